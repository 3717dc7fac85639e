"""The restore points of a running job: its retained checkpoints, those found unusable, those
of the path it was started from, and which of them were announced to the tasks.

Invariant: a checkpoint found unusable is never offered again in this job (but still counts
for the fallback rule); a checkpoint whose completion was announced, or may have been (one
found under an explicit restore path), is marked so before anyone can commit its output; the
choice itself is ``restore.find_restore_point``'s (verify, then the pure ``choose_restore``);
the driver reads the state files' contents (CRC-32s, digests) only of checkpoints this job
did not complete and has not verified in full before, and leaves the others' to the workers,
which check every byte they restore (a failure marks the checkpoint unusable).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from cairn.checkpoint.errors import CheckpointNotFoundError
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.checkpoint.protocol import FallbackRule, RestoreCandidate
from cairn.checkpoint.restore import candidate_at, find_restore_point
from cairn.checkpoint.storage import CheckpointStorage, resolve_checkpoint_dirs
from cairn.checkpoint.store import CompletedCheckpointStore
from cairn.ids import CheckpointId, JobId

# Logged as the coordinator, whose work this is (one logger to configure, as before the split).
log = logging.getLogger("cairn.checkpoint.coordinator")


class RestorePoints:
    """Which checkpoint a job deploys from; kept by the checkpoint coordinator (one thread)."""

    def __init__(
        self,
        job_id: JobId,
        storage: CheckpointStorage,
        store: CompletedCheckpointStore,
        fallback: FallbackRule,
    ) -> None:
        self._job_id = job_id
        self._storage = storage
        self._store = store
        self._fallback = fallback
        # Checkpoints whose completion was announced to the tasks (sinks may have committed
        # their output), or that may have been: one restored from an earlier run's files.
        self._announced: set[CheckpointId] = set()
        # Checkpoints found unusable (by verification or by a worker that failed to restore
        # one): never offered again, but remembered for the fallback rule.
        self._unusable: dict[str, RestoreCandidate] = {}
        # Where an explicit restore path pointed: the candidates behind the retained ones.
        self._origin: list[str] = []
        # Checkpoints this job completed, or verified in full once: on a failover their
        # state files are checked by size only here (the workers check their contents).
        self._vouched: set[str] = set()

    def announced(self, checkpoint_id: CheckpointId) -> None:
        """Its completion is told to the tasks next (a sink may commit at once)."""
        self._announced.add(checkpoint_id)

    def completed(self, directory: str) -> None:
        """This job completed the checkpoint at ``directory``: its workers wrote every state
        file and its CRC-32s, so a restore reads the files' contents only in the workers."""
        self._vouched.add(directory)

    def choose(
        self, explicit_path: str | Sequence[str] | None = None, claim: bool = False
    ) -> CompletedCheckpoint | None:
        """The verified checkpoint to deploy from, or None for a fresh start.

        Without ``explicit_path``: the newest retained checkpoint that verifies, falling back
        to older retained ones (logged with the reason), then to the older checkpoints of the
        path the job was started from. With it: that checkpoint/savepoint (or a job
        directory's newest usable checkpoint); it is kept as the restore point for later
        failovers until subsumed, but its files are never deleted by this job.

        The state files of a checkpoint this job completed (or chose here before) are checked
        by size only: the workers check their contents as they restore them, and a failure
        there comes back through :meth:`mark_unusable`. Those of other runs' checkpoints are
        read in full (CRC-32s, digests) before they are chosen.

        Falling back past a checkpoint whose completion was announced is refused if the job
        has committing sinks (see :class:`~cairn.checkpoint.protocol.FallbackRule`). A
        checkpoint this job completed was announced; one found under ``explicit_path`` has
        ``_metadata``, so the run that wrote it completed it and may have announced it: it is
        treated as announced, like Flink, which re-commits a restored checkpoint's
        committables because it cannot know whether the earlier run committed them.

        ``claim`` (restore mode CLAIM): a retained checkpoint found under ``explicit_path``
        becomes this job's own, deleted once subsumed like the job's checkpoints; without
        it (NO_CLAIM) its files are never deleted. A savepoint is never claimed.

        ``explicit_path`` may also be several paths, newest first (an earlier run's history
        when a rerun resumes it): each is resolved like one path, and one that holds no
        complete checkpoint any more is a skipped candidate, not an error.

        Raises:
            FallbackRefusedError: only an older checkpoint is usable, and restoring it would
                commit output a second time; names the skipped checkpoint.
            NoUsableCheckpointError: candidates exist but none verifies; names each path.
            CheckpointNotFoundError: ``explicit_path`` holds no complete checkpoint.
        """
        options = self._storage.storage_options
        if isinstance(explicit_path, str):
            dirs = resolve_checkpoint_dirs(explicit_path, options)
            self._origin = list(dirs)
            candidates = [candidate_at(d, committed=True) for d in dirs]
        elif explicit_path is not None:
            candidates = _resolve_each(explicit_path, self._storage.storage_options)
            self._origin = [c.location for c in candidates if c.usable]
        else:
            candidates = self._candidates()
            if not candidates:
                return None
        origin = explicit_path if isinstance(explicit_path, str) else None
        if explicit_path is not None and origin is None:
            origin = ", ".join(explicit_path)
        where = f"job {self._job_id} from {origin or self._storage.job_dir}"
        key = self._storage.signing_key
        choice = find_restore_point(
            candidates, options, where, self._fallback, key, sizes_only=self._vouched
        )
        for skipped in choice.skipped:  # unusable: never offer them again
            self._forget(skipped)
        chosen = choice.checkpoint
        self._vouched.add(chosen.directory)  # verified in full, or completed by this job
        cid, where = chosen.checkpoint_id, chosen.directory
        log.info("Restoring job %s from checkpoint %d at %s.", self._job_id, cid, where)
        if explicit_path is not None:
            self._announced.add(cid)
            if all(cp.directory != chosen.directory for cp in self._store.all()):
                owned = claim and not chosen.is_savepoint
                self._store.add(chosen, owned=owned)
        return chosen

    def mark_unusable(self, directory: str, checkpoint_id: CheckpointId, problem: str) -> None:
        """Never restore the checkpoint at ``directory`` again in this job (e.g. its state
        failed its checks while a worker restored it); the next :meth:`choose` tries the next
        older one, subject to the fallback rule. Its files are left alone."""
        log.warning("Checkpoint %d at %s is unusable: %s", checkpoint_id, directory, problem)
        committed = checkpoint_id in self._announced
        self._forget(RestoreCandidate(directory, checkpoint_id, problem, committed))

    def _forget(self, candidate: RestoreCandidate) -> None:
        self._unusable[candidate.location] = candidate
        for cp in self._store.all():
            if cp.directory == candidate.location:
                self._store.remove(cp.checkpoint_id)

    def _candidates(self) -> list[RestoreCandidate]:
        """Retained and known-unusable checkpoints, newest first, then those of the explicit
        restore path (older: numbering continued after the one restored from there). Empty
        only if the job never had a checkpoint: a fresh start."""
        announced = self._announced
        known = [
            RestoreCandidate(cp.directory, cp.checkpoint_id, None, cp.checkpoint_id in announced)
            for cp in self._store.all()
        ]
        known += self._unusable.values()
        known.sort(key=lambda c: -1 if c.checkpoint_id is None else c.checkpoint_id, reverse=True)
        seen = {c.location for c in known}
        origin = [candidate_at(d, committed=True) for d in self._origin if d not in seen]
        return known + origin


def _resolve_each(paths: Sequence[str], options: dict[str, Any]) -> list[RestoreCandidate]:
    """The complete checkpoints under each of ``paths`` in order (a path with none: an
    unusable candidate naming the problem)."""
    found: list[RestoreCandidate] = []
    for path in paths:
        try:
            dirs = resolve_checkpoint_dirs(path, options)
        except CheckpointNotFoundError as e:
            found.append(RestoreCandidate(path, None, e.problem, committed=True))
            continue
        seen = {c.location for c in found}
        found += [candidate_at(d, committed=True) for d in dirs if d not in seen]
    return found
