"""Deleting what the checkpoint coordinator no longer needs: aborted and subsumed checkpoints,
shared files of incremental checkpoints, the job's directory at the end.

Invariant: cleanup is best effort and never raises (a checkpoint's outcome is decided before
its files go; what cannot be deleted is logged and left for the user); what to delete is
decided here, on the coordinator's thread, and deleted in that order on a background thread
(``deletions.py``), which the end of the job waits for before it tidies or removes the job
directory; a shared file is
deleted only when the ``SharedStateRegistry`` releases it, or when only an aborted checkpoint
uploaded it (no registered checkpoint references it, so no backend reuses it); nothing is
deleted once ``may_delete`` says no (a driver that lost its leadership deletes nothing: the
new leader's checkpoints may share its directory).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from cairn.checkpoint.deletions import BackgroundDeletions
from cairn.checkpoint.handles import OperatorSubtaskState
from cairn.checkpoint.metadata import CheckpointMetadata, CompletedCheckpoint
from cairn.checkpoint.shared_state import SharedStateRegistry, rocksdb_handles
from cairn.checkpoint.storage import CheckpointStorage
from cairn.ids import CheckpointId, JobId

# Logged as the coordinator, whose work this is (one logger to configure, as before the split).
log = logging.getLogger("cairn.checkpoint.coordinator")

# How long the end of a job waits for the deletions still queued (an unreachable store
# retries each for seconds) before it tidies the job directory anyway.
END_OF_JOB_WAIT_S = 120.0


def _subtask_states(metadata: CheckpointMetadata) -> Iterable[OperatorSubtaskState]:
    return (s for op in metadata.operators.values() for s in op.subtasks.values())


class CheckpointCleaner:
    """The coordinator's deletions, with the shared-state registry that decides about shared
    files. Called on the coordinator's thread only; the deleting runs on ``deletions``."""

    def __init__(
        self,
        job_id: JobId,
        storage: CheckpointStorage,
        may_delete: Callable[[], bool] = lambda: True,
    ) -> None:
        self._job_id = job_id
        self._storage = storage
        self._shared = SharedStateRegistry()  # shared files of incremental checkpoints
        self._may_delete = may_delete
        self.deletions = BackgroundDeletions(job_id)

    def _delete_later(self, what: str, delete: Callable[[], None]) -> None:
        """Delete on the background thread, unless this driver stopped leading by then."""

        def guarded() -> None:
            if not self._refused(what):
                delete()

        self.deletions.submit(what, guarded)

    def wait_for_deletions(self, timeout: float | None = None) -> bool:
        """Block until every deletion decided so far ran; False if ``timeout`` passed."""
        return self.deletions.wait(timeout)

    def _wait_at_end(self) -> None:
        if not self.deletions.wait(END_OF_JOB_WAIT_S):
            left = self.deletions.pending()
            log.warning("%d deletions of job %s still queued at its end", left, self._job_id)

    def _refused(self, what: object) -> bool:
        if self._may_delete():
            return False
        log.warning("Not deleting %s: this driver no longer leads the job", what)
        return True

    def checkpoint_completed(self, cid: CheckpointId, metadata: CheckpointMetadata) -> None:
        """Register a completed checkpoint's shared files; delete those it made unreachable."""
        self._delete_shared(self._shared.register(cid, rocksdb_handles(_subtask_states(metadata))))

    def savepoint_completed(self, cid: CheckpointId, metadata: CheckpointMetadata) -> None:
        """A savepoint copied its shared files: its new ones are registered (backends may
        reuse them once told it completed), and released at once, as nothing retains it."""
        self._shared.register(cid, rocksdb_handles(_subtask_states(metadata)))
        self._delete_shared(self._shared.release(cid))

    def discard_completed(self, checkpoint: CompletedCheckpoint) -> None:
        """A subsumed checkpoint the job owns — its own ``chk-<n>``, or a claimed one
        (restore mode CLAIM) wherever it is — and the shared files nothing needs now."""
        cid, directory = checkpoint.checkpoint_id, checkpoint.directory
        if self._refused(directory):
            return
        storage = self._storage
        if directory == storage.checkpoint_dir(cid):
            self._delete_later(directory, lambda: storage.discard(cid))
        else:
            self._delete_later(directory, lambda: storage.discard_directory(directory))
        self._delete_shared(self._shared.release(cid))

    def discard_unregistered_shared(self, states: Iterable[OperatorSubtaskState]) -> None:
        """Shared files only an aborted checkpoint uploaded: no backend reuses them."""
        self._delete_shared(
            [
                f.path
                for h in rocksdb_handles(states)
                for f in h.shared_files()
                if not self._shared.is_registered(f.path)
            ]
        )

    def backends_gone(self) -> None:
        """The backends that uploaded shared files are gone (failover, end of job)."""
        self._delete_shared(self._shared.backends_gone())

    def discard_files(self, cid: CheckpointId) -> None:
        """The files of ``chk-<cid>`` (an aborted checkpoint, a savepoint's working copy)."""
        where = self._storage.checkpoint_dir(cid)
        if not self._refused(where):
            storage = self._storage
            self._delete_later(where, lambda: storage.discard(cid))

    def tidy_kept_job_dir(self, aborted: Iterable[CheckpointId]) -> None:
        """The job ended and its directory is kept: remove what no checkpoint references."""
        if self._refused(self._storage.job_dir):
            return
        # Uploads that finished after their checkpoint was aborted left files behind.
        for cid in aborted:
            self.discard_files(cid)
        self.backends_gone()
        try:  # uploads of workers killed before they acknowledged
            orphans = set(self._storage.list_shared_files()) - self._shared.referenced()
            self._delete_shared(sorted(orphans))
        except Exception:
            where = self._storage.job_dir
            log.warning("Could not list the shared state files of %s", where, exc_info=True)
        self._wait_at_end()

    def discard_run(self, first_own: CheckpointId | None) -> list[str] | None:
        """The retention policy discards the ended run's checkpoints: remove what the run
        made (``CheckpointStorage.discard_run``); the names left in the job directory, or
        None if nothing could be removed."""
        if self._refused(self._storage.job_dir):
            return None
        self.backends_gone()
        self._wait_at_end()
        try:
            return self._storage.discard_run(first_own)
        except Exception:  # best effort: the job is over either way
            log.warning("Could not clean up %s", self._storage.job_dir, exc_info=True)
            return None

    def _delete_shared(self, paths: list[str]) -> None:
        if not paths or self._refused(f"{len(paths)} shared state files"):
            return
        job, storage = self._job_id, self._storage
        log.debug("Deleting %d unreferenced shared state files of job %s", len(paths), job)
        what = f"{len(paths)} shared state files ({', '.join(paths[:3])}...)"
        self._delete_later(what, lambda: storage.delete_shared_files(paths))
