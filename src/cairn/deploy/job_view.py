"""What other threads see of a running job: one immutable snapshot, swapped whole.

Invariant: a ``JobView`` never changes; only the job master's thread makes a new one, and it
publishes it with one attribute assignment, so a reader on any thread (the REST endpoint,
the metrics reporters, the progress line, the CLI, the job client) takes one consistent
snapshot by reading ``JobMaster.view`` once, without a lock.

>>> from cairn.ids import JobId
>>> view = JobView(JobId("j"), start_ms=5)
>>> view.status.name, view.attempt, view.ended
('CREATED', -1, False)
>>> view.running_for_ms(now_ms=20)
15
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from cairn.checkpoint.messages import TaskKey
from cairn.checkpoint.stats import CheckpointStatsTracker
from cairn.common.job_status import JobStatus
from cairn.deploy.initialization import JobInitialization
from cairn.deploy.worker_cpu import WorkerCpu
from cairn.ids import AttemptNumber, CheckpointId, JobId
from cairn.runtime.reports import TaskMetrics

__all__ = ["CpuReports", "JobView", "MetricReports", "StageProgress", "shifted"]

K = TypeVar("K")
V = TypeVar("V")
_NONE: Mapping[TaskKey, TaskMetrics] = MappingProxyType({})
_BEFORE_FIRST = AttemptNumber(-1)

# (each subtask's report before its latest, the latest): rates are the difference of the two.
MetricReports = tuple[Mapping[TaskKey, TaskMetrics], Mapping[TaskKey, TaskMetrics]]
# The same pair of each worker's CPU readings, by worker index.
CpuReports = tuple[Mapping[int, WorkerCpu], Mapping[int, WorkerCpu]]
_NO_CPU: Mapping[int, WorkerCpu] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StageProgress:
    """A BATCH job's stages (one per job vertex): which completed, how many in all.

    >>> StageProgress(frozenset({0}), 3).done
    1
    """

    finished: frozenset[int]
    total: int

    @property
    def done(self) -> int:
        return len(self.finished)


@dataclass(frozen=True, slots=True)
class JobView:
    """A running (or ended) job as of one moment.

    ``error``: why the job failed or was suspended (None otherwise); ``end_ms``: when the job
    master's run ended (None while it runs; set a moment after the terminal status);
    ``worker_pids``: the current attempt's registered workers (``worker_data_addresses``:
    where each listens for data); ``checkpoint_stats``: the
    (thread-safe) checkpoint statistics, None with checkpointing disabled;
    ``latest_checkpoint_id``: the latest completed checkpoint the job master knows of;
    ``metric_reports``/``cpu_reports``: the current attempt's reports, the latest and the one
    before of each subtask/worker; ``stages``: a BATCH job's stages, which completed (None
    for a STREAMING job, whose tasks all run at once).
    """

    job_id: JobId
    status: JobStatus = JobStatus.CREATED
    attempt: AttemptNumber = _BEFORE_FIRST
    restarts: int = 0
    error: BaseException | None = None
    failure_reason: str | None = None  # why a FAILED job was not restarted
    start_ms: int = 0
    end_ms: int | None = None
    worker_pids: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    worker_data_addresses: Mapping[int, tuple[str, int]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    metric_reports: MetricReports = (_NONE, _NONE)
    cpu_reports: CpuReports = (_NO_CPU, _NO_CPU)
    last_initialization: JobInitialization | None = None
    latest_checkpoint_id: CheckpointId | None = None
    checkpoint_stats: CheckpointStatsTracker | None = None
    stages: StageProgress | None = None

    @property
    def ended(self) -> bool:
        """Whether the job master's run ended (its final figures are in)."""
        return self.end_ms is not None

    @property
    def metrics(self) -> Mapping[TaskKey, TaskMetrics]:
        """Each subtask's latest metrics report."""
        return self.metric_reports[1]

    def running_for_ms(self, now_ms: int) -> int:
        """How long the job ran (until it ended, or ``now_ms``)."""
        return (self.end_ms if self.end_ms is not None else now_ms) - self.start_ms


def shifted(
    pair: tuple[Mapping[K, V], Mapping[K, V]], reports: Mapping[K, V]
) -> tuple[Mapping[K, V], Mapping[K, V]]:
    """The (previous, latest) pair after ``reports``: a reported key's latest becomes its
    previous. New read-only maps; ``pair``'s are not touched.

    >>> before, latest = shifted(({}, {"a": 1}), {"a": 2, "b": 5})
    >>> dict(before), dict(latest)
    ({'a': 1}, {'a': 2, 'b': 5})
    """
    previous, current = dict(pair[0]), dict(pair[1])
    for key, report in reports.items():
        if key in current:
            previous[key] = current[key]
        current[key] = report
    return MappingProxyType(previous), MappingProxyType(current)
