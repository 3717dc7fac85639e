"""What an attempt of a job restores, and where the time of its restore went.

The first attempt of a run restores, in this order: an explicit path (``-s``,
``execution.state-recovery.path``); the checkpoint the HA pointer names when this driver
took the job over (``high_availability.py``); the earlier run's history when the run resumes
a lost one (``job_runs.py``); else nothing. A restart restores the latest completed checkpoint
of the run.

Invariant: the choice is made by the checkpoint coordinator (verified, never a checkpoint a
worker failed to restore); another job's or run's state is checked against this job's
operators before it is used; the earlier run's own checkpoints are claimed (the job deletes
them once subsumed), an explicit path only in CLAIM mode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.metadata import encode_metadata
from cairn.checkpoint.restore import check_restore_compatible
from cairn.deploy import control_messages as p
from cairn.deploy.initialization import JobInitialization
from cairn.graph.job_graph import JobGraph
from cairn.ids import JobId
from cairn.settings import JobSettings, RestoreMode

__all__ = ["RestoreChoice"]

log = logging.getLogger(__name__)

# Metadata up to this size travels with the workers' launch; larger, they read it themselves.
MAX_SHIPPED_METADATA = 4 << 20


class RestoreChoice:
    """The restore points of one job master's attempts.

    ``resume_from``: the earlier run's history, newest first (set before the first attempt);
    ``ha_restore``: the HA pointer's checkpoint directory (set when this driver leads).
    """

    def __init__(
        self,
        job_id: JobId,
        settings: JobSettings,
        graph: JobGraph,
        coordinator: CheckpointCoordinator,
        resume_from: Sequence[str] = (),
    ) -> None:
        self._job_id = job_id
        self._settings = settings
        self._graph = graph
        self._coordinator = coordinator
        self.resume_from = tuple(resume_from)
        self.ha_restore: str | None = None
        self._choosing = (0, 0)  # wall-clock ms: choosing the last restore point began, ended

    def initial(self) -> p.RestoreInfo | None:
        """What the run's first attempt restores (None: it starts from scratch)."""
        if self._settings.restore_path:
            return self.latest(explicit=self._settings.restore_path)
        if self.ha_restore:
            return self.latest(explicit=self.ha_restore)
        if self.resume_from:
            return self.latest(explicit=self.resume_from)
        return None

    def latest(self, explicit: str | Sequence[str] | None) -> p.RestoreInfo | None:
        """The newest usable checkpoint: of ``explicit`` (a path, or an earlier run's
        history) or, with None, of this run.

        Raises:
            CheckpointError: nothing (safe) to restore from; the message says why.
        """
        # A resumed run's own checkpoints are the job's, deleted once subsumed.
        own = explicit is not None and not isinstance(explicit, str)
        claim = own or (explicit is not None and self._settings.restore_mode is RestoreMode.CLAIM)
        began = _now_ms()
        point = self._coordinator.restore_point(explicit, claim, resumed=own)
        self._choosing = (began, _now_ms())
        if point is None:
            return None
        if own:
            cid, where = point.checkpoint_id, point.directory
            log.warning("Job %s resumes from checkpoint %d at %s.", self._job_id, cid, where)
        if explicit is not None:  # another job's state: it must fit this job's operators
            operators = {
                node.uid: (node.parallelism, node.max_parallelism)
                for v in self._graph.vertices
                for node in v.operators
            }
            check_restore_compatible(point, operators, self._settings.restore_ignore_unclaimed)
        encoded = encode_metadata(point.metadata, self._settings.checkpoint.signing_key)
        shipped = encoded if len(encoded) <= MAX_SHIPPED_METADATA else None
        return p.RestoreInfo(point.directory, point.checkpoint_id, shipped)

    def initialization(
        self,
        restore: p.RestoreInfo,
        attempt: int,
        launched_ms: int,
        workers: Sequence[p.WorkerInitialization],
    ) -> JobInitialization:
        """Where the time of ``restore`` went, now that every worker runs (logged)."""
        began, chosen = self._choosing
        init = JobInitialization.of(
            restore.checkpoint_id, began, chosen, launched_ms, _now_ms(), workers
        )
        log.info("job %s, attempt %d: %s", self._job_id, attempt, init.describe())
        return init


def _now_ms() -> int:
    return int(time.time() * 1000)
