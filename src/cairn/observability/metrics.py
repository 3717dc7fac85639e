"""A job's metrics under Flink's names, computed from the subtasks' cumulative counters and
the checkpoint statistics.

Invariant: pure functions of immutable inputs (two :class:`TaskMetrics` reports of a subtask,
a :class:`CheckpointStatsSnapshot`, the restart count); nothing here reads a clock or the job.
Per-second figures come from the difference of two cumulative reports, so a late or early
report changes nothing but the window; the three time shares are clamped to sum to 1000.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cairn.checkpoint.messages import TaskKey
from cairn.checkpoint.stats import CheckpointStatsSnapshot
from cairn.runtime.latency import LatencyReport
from cairn.runtime.reports import TaskMetrics

__all__ = [
    "JOB_METRICS",
    "SUBTASK_METRICS",
    "JobMetrics",
    "SubtaskMetrics",
    "all_subtask_metrics",
    "backpressure_level",
    "job_metrics",
    "subtask_metrics",
]

# Flink's metric names, in the order the REST API lists them.
SUBTASK_METRICS = (
    "numRecordsIn",
    "numRecordsOut",
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "idleTimeMsPerSecond",
    "currentInputWatermark",
    "numBytesIn",
    "numBytesOut",
    "numBytesInPerSecond",
    "numBytesOutPerSecond",
)
JOB_METRICS = (
    "numRestarts",
    "numberOfCompletedCheckpoints",
    "numberOfFailedCheckpoints",
    "numberOfInProgressCheckpoints",
    "lastCheckpointDuration",
    "lastCheckpointSize",
    "lastCheckpointFullSize",
)


@dataclass(frozen=True)
class SubtaskMetrics:
    """One subtask's figures (Flink's task metrics; ``currentInputWatermark`` is
    ``Long.MIN_VALUE`` as in Flink when the task has no input watermark; bytes are those of
    remote channels, the only ones that serialize). ``accumulated_*_ms``: the task's time
    since it started, for Flink's ``accumulated-*-time`` of a vertex."""

    numRecordsIn: int
    numRecordsOut: int
    numRecordsInPerSecond: float
    numRecordsOutPerSecond: float
    busyTimeMsPerSecond: float
    backPressuredTimeMsPerSecond: float
    idleTimeMsPerSecond: float
    currentInputWatermark: int
    numBytesIn: int = 0
    numBytesOut: int = 0
    numBytesInPerSecond: float = 0.0
    numBytesOutPerSecond: float = 0.0
    accumulated_busy_ms: float = 0.0
    accumulated_backpressured_ms: float = 0.0
    accumulated_idle_ms: float = 0.0
    # User-defined metrics of the subtask's operators: (operator name, metric name, value).
    user: tuple[tuple[str, str, float], ...] = ()
    # Latency histograms of the subtask's operators (``metrics.latency.interval``).
    latency: tuple[LatencyReport, ...] = ()

    def value(self, name: str) -> float:
        """The figure named ``name`` (one of :data:`SUBTASK_METRICS`)."""
        if name not in SUBTASK_METRICS:
            raise KeyError(f"unknown subtask metric {name!r}; known: {', '.join(SUBTASK_METRICS)}")
        return float(getattr(self, name))


@dataclass(frozen=True)
class JobMetrics:
    """The job-level figures (Flink's job manager metrics; -1 until a checkpoint completed)."""

    numRestarts: int
    numberOfCompletedCheckpoints: int
    numberOfFailedCheckpoints: int
    numberOfInProgressCheckpoints: int
    lastCheckpointDuration: int
    lastCheckpointSize: int
    lastCheckpointFullSize: int

    def value(self, name: str) -> float:
        """The figure named ``name`` (one of :data:`JOB_METRICS`)."""
        if name not in JOB_METRICS:
            raise KeyError(f"unknown job metric {name!r}; known: {', '.join(JOB_METRICS)}")
        return float(getattr(self, name))


_MIN_LONG = -(2**63)


def subtask_metrics(current: TaskMetrics, previous: TaskMetrics | None = None) -> SubtaskMetrics:
    """Figures of a subtask from its latest report and the one before (``None``: since the
    task started).

    >>> before = TaskMetrics(1000, 1000, elapsed_ms=1000.0, busy_ms=100.0)
    >>> now = TaskMetrics(3000, 3000, True, elapsed_ms=2000.0, busy_ms=400.0,
    ...                   backpressured_ms=500.0)
    >>> m = subtask_metrics(now, before)
    >>> m.numRecordsInPerSecond, m.busyTimeMsPerSecond, m.backPressuredTimeMsPerSecond
    (2000.0, 300.0, 500.0)
    >>> m.idleTimeMsPerSecond
    200.0
    >>> m = subtask_metrics(TaskMetrics(10, 10, elapsed_ms=2000.0, bytes_in=300, bytes_out=900),
    ...                     TaskMetrics(5, 5, elapsed_ms=1000.0, bytes_in=100, bytes_out=400))
    >>> m.numBytesIn, m.numBytesInPerSecond, m.numBytesOutPerSecond
    (300, 200.0, 500.0)
    """
    if previous is None or previous.elapsed_ms > current.elapsed_ms:
        previous = TaskMetrics(0, 0)  # first report, or a new task (restart) reports
    window_ms = current.elapsed_ms - previous.elapsed_ms
    if window_ms <= 0:
        rate_in = rate_out = busy = backpressured = bytes_in = bytes_out = 0.0
    else:
        per_s = 1000.0 / window_ms
        rate_in = (current.records_in - previous.records_in) * per_s
        rate_out = (current.records_out - previous.records_out) * per_s
        busy = (current.busy_ms - previous.busy_ms) * per_s
        backpressured = (current.backpressured_ms - previous.backpressured_ms) * per_s
        bytes_in = (current.bytes_in - previous.bytes_in) * per_s
        bytes_out = (current.bytes_out - previous.bytes_out) * per_s
    busy = min(max(busy, 0.0), 1000.0)
    backpressured = min(max(backpressured, 0.0), 1000.0 - busy)
    return SubtaskMetrics(
        numRecordsIn=current.records_in,
        numRecordsOut=current.records_out,
        numRecordsInPerSecond=rate_in,
        numRecordsOutPerSecond=rate_out,
        busyTimeMsPerSecond=busy,
        backPressuredTimeMsPerSecond=backpressured,
        idleTimeMsPerSecond=1000.0 - busy - backpressured,
        currentInputWatermark=current.watermark if current.watermark is not None else _MIN_LONG,
        numBytesIn=current.bytes_in,
        numBytesOut=current.bytes_out,
        numBytesInPerSecond=max(bytes_in, 0.0),
        numBytesOutPerSecond=max(bytes_out, 0.0),
        accumulated_busy_ms=current.busy_ms,
        accumulated_backpressured_ms=current.backpressured_ms,
        accumulated_idle_ms=max(
            current.elapsed_ms - current.busy_ms - current.backpressured_ms, 0.0
        ),
        user=current.user,
        latency=current.latency,
    )


def job_metrics(stats: CheckpointStatsSnapshot | None, restarts: int) -> JobMetrics:
    """Job-level figures from the checkpoint statistics (``None``: checkpointing disabled).

    >>> job_metrics(None, 2)
    JobMetrics(numRestarts=2, numberOfCompletedCheckpoints=0, numberOfFailedCheckpoints=0, \
numberOfInProgressCheckpoints=0, lastCheckpointDuration=-1, lastCheckpointSize=-1, \
lastCheckpointFullSize=-1)
    """
    snap = stats if stats is not None else CheckpointStatsSnapshot.empty()
    last = snap.latest_completed
    return JobMetrics(
        numRestarts=restarts,
        numberOfCompletedCheckpoints=snap.counts.completed,
        numberOfFailedCheckpoints=snap.counts.failed,
        numberOfInProgressCheckpoints=snap.counts.in_progress,
        lastCheckpointDuration=last.end_to_end_duration_ms if last is not None else -1,
        lastCheckpointSize=last.checkpointed_size if last is not None else -1,
        lastCheckpointFullSize=last.state_size if last is not None else -1,
    )


def backpressure_level(backpressured_ms_per_s: float) -> str:
    """Flink's level of a subtask's backpressure ratio: ``ok`` up to 10 %, ``low`` up to
    50 %, ``high`` above.

    >>> [backpressure_level(x) for x in (0.0, 100.0, 300.0, 800.0)]
    ['ok', 'ok', 'low', 'high']
    """
    ratio = backpressured_ms_per_s / 1000.0
    if ratio <= 0.10:
        return "ok"
    if ratio <= 0.5:
        return "low"
    return "high"


def all_subtask_metrics(
    current: Mapping[TaskKey, TaskMetrics], previous: Mapping[TaskKey, TaskMetrics]
) -> dict[TaskKey, SubtaskMetrics]:
    """:func:`subtask_metrics` of every subtask that reported."""
    return {k: subtask_metrics(v, previous.get(k)) for k, v in current.items()}
