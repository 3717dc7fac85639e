"""What a BATCH job shows while it runs: its status, its stages done, each subtask's records in
and out, published as a STREAMING job master publishes them (``deploy.job_view.JobView``),
so the progress line, the control endpoint and web UI, ``cairn list`` and the metrics
reporters read a BATCH job through the same ``ObservedJob`` port as a STREAMING one.

Invariant: the view is immutable and swapped whole under the monitor's lock; a subtask's
counts are the latest its run reported (a rerun after a failure replaces them, never adds
to them); a stage is done once each of its partitions completed; listeners hear each
status change once, in order, outside the lock.

>>> from cairn.settings import JobSettings
>>> from cairn.graph.job_graph import JobGraph
>>> monitor = BatchMonitor(JobId("j"), JobSettings("sums", 1), JobGraph("sums", (), ()),
...                        {0: 2, 1: 1}, sources=(0,))
>>> monitor.set_status(JobStatus.RUNNING)
>>> monitor.partition_counts(0, 0, records_in=0, records_out=5, elapsed_ms=9.0, done=True)
>>> monitor.partition_counts(0, 1, 0, 2, 4.0, done=False)
>>> monitor.view.stages.done, monitor.plan.source_tasks
(0, (TaskKey(vertex_id=0, subtask_index=0), TaskKey(vertex_id=0, subtask_index=1)))
>>> monitor.partition_counts(0, 1, 0, 3, 6.0, done=True)  # replaces the counts
>>> monitor.view.stages, sum(m.records_out for m in monitor.view.metrics.values())
(StageProgress(finished=frozenset({0}), total=2), 8)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from cairn.checkpoint.ha.leader import Leadership
from cairn.checkpoint.messages import TaskKey
from cairn.common.job_status import JobStatus
from cairn.deploy.job_master_ports import Listener
from cairn.deploy.job_view import JobView, StageProgress, shifted
from cairn.deploy.savepoint_requests import StopWithSavepoint
from cairn.events import SavepointFormatType
from cairn.graph.job_graph import JobGraph
from cairn.ids import AttemptNumber, JobId, SubtaskIndex, VertexId
from cairn.runtime.reports import TaskMetrics
from cairn.settings import JobSettings

__all__ = ["NO_SAVEPOINTS", "BatchMonitor"]

log = logging.getLogger(__name__)

NO_SAVEPOINTS = "a BATCH job takes no savepoints (it has no checkpoints)"


@dataclass(frozen=True)
class _Sources:
    source_tasks: tuple[TaskKey, ...]


class BatchMonitor:
    """The ``ObservedJob`` of a BATCH job (``deploy.job_master_ports``): fed by the job's
    runner (status, restarts, each completed partition's counts), read by observers."""

    def __init__(
        self,
        job_id: JobId,
        settings: JobSettings,
        graph: JobGraph,
        parallelism: Mapping[int, int],
        sources: tuple[int, ...],
    ) -> None:
        self._job_id = job_id
        self._settings = settings
        self._graph = graph
        self._parallelism = dict(parallelism)  # stage (vertex id) -> partitions
        self._plan = _Sources(
            tuple(
                TaskKey(VertexId(v), SubtaskIndex(i))
                for v in sources
                for i in range(self._parallelism[v])
            )
        )
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._done: set[TaskKey] = set()
        self._view = JobView(
            job_id,
            start_ms=int(time.time() * 1000),
            stages=StageProgress(frozenset(), len(self._parallelism)),
        )

    # ------------------------------------------------------------------ ObservedJob

    @property
    def job_id(self) -> JobId:
        return self._job_id

    @property
    def settings(self) -> JobSettings:
        return self._settings

    @property
    def graph(self) -> JobGraph:
        return self._graph

    @property
    def plan(self) -> _Sources:
        return self._plan

    @property
    def view(self) -> JobView:
        return self._view

    @property
    def leadership(self) -> Leadership | None:
        return None

    @property
    def listeners(self) -> list[Listener]:
        return self._listeners

    def stop_with_savepoint(
        self,
        target_dir: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
        drain: bool = False,
    ) -> StopWithSavepoint:
        """Fails at once: BATCH mode has no checkpoints to stop with (as Flink's)."""
        refused: Future[str] = Future()
        refused.set_exception(RuntimeError(NO_SAVEPOINTS))
        return StopWithSavepoint(refused, refused)

    # ------------------------------------------------------------------ the runner's side

    def set_status(self, status: JobStatus, error: BaseException | None = None) -> None:
        """The job's new status (``error``: why it failed); a terminal one also ends it."""
        with self._lock:
            changes: dict[str, Any] = {"status": status}
            if status is JobStatus.RUNNING and self._view.attempt < 0:
                changes["attempt"] = AttemptNumber(0)
            if error is not None:
                changes["error"] = error
            self._view = replace(self._view, **changes)
        self._emit("status", status)
        if status.is_globally_terminal_state():
            with self._lock:
                self._view = replace(self._view, end_ms=int(time.time() * 1000))

    def restarted(self, attempt: int, reason: str) -> None:
        """The restart strategy reruns what had not completed, as attempt ``attempt``."""
        with self._lock:
            self._view = replace(
                self._view, attempt=AttemptNumber(attempt), restarts=self._view.restarts + 1
            )
        self._emit("restart", reason)

    def partition_counts(
        self,
        vertex: int,
        partition: int,
        records_in: int,
        records_out: int,
        elapsed_ms: float,
        done: bool,
    ) -> None:
        """Partition ``partition`` of stage ``vertex`` has these counts after running
        ``elapsed_ms`` (``done``: it completed). A BATCH task is busy all that time: its
        outputs go to a blocking exchange, never wait for room."""
        key = TaskKey(VertexId(vertex), SubtaskIndex(partition))
        metrics = TaskMetrics(records_in, records_out, elapsed_ms=elapsed_ms, busy_ms=elapsed_ms)
        with self._lock:
            if done:
                self._done.add(key)
            reports = shifted(self._view.metric_reports, {key: metrics})
            finished = frozenset(
                v
                for v, n in self._parallelism.items()
                if all(TaskKey(VertexId(v), SubtaskIndex(i)) in self._done for i in range(n))
            )
            stages = StageProgress(finished, len(self._parallelism))
            self._view = replace(self._view, metric_reports=reports, stages=stages)

    def _emit(self, event: str, payload: Any) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, payload)
            except Exception:  # as the job master's: an observer never fails the job
                log.debug("listener failed", exc_info=True)
