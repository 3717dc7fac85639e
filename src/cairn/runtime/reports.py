"""What a task reports to the job master: sources exhausted, task finished, metrics, results.

Invariant: reports are immutable values that name the deployment attempt of their sender, so
the job master can drop late reports of an attempt it already cancelled; the runtime defines
them, the deploy layer carries them (``cairn.deploy.control_messages``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.messages import TaskKey
from cairn.ids import AttemptNumber
from cairn.runtime.latency import LatencyReport

__all__ = ["CollectedResults", "SourceExhausted", "TaskFinished", "TaskMetrics"]


@dataclass(frozen=True)
class SourceExhausted:
    attempt: AttemptNumber
    task: TaskKey


@dataclass(frozen=True)
class TaskFinished:
    attempt: AttemptNumber
    task: TaskKey
    metrics: TaskMetrics | None = None  # the task's final counters


@dataclass(frozen=True)
class TaskMetrics:
    """A subtask's counters since it started (Flink's ``numRecordsIn/Out`` and the time
    accounting behind ``busy/backPressured/idleTimeMsPerSecond``): cumulative values, so the
    job master derives rates from two reports without trusting their spacing.

    ``elapsed_ms``: monotonic time since the task was built; ``busy_ms``: time its worker's
    task thread spent in it doing work; ``backpressured_ms``: time its outputs had no room;
    ``watermark``: the current input watermark (``None`` without event time);
    ``bytes_in``/``bytes_out``: pickled bytes of the batches taken from and sent to remote
    channels (Flink's ``numBytesIn/Out``; local channels hand lists over: no bytes).
    """

    records_in: int
    records_out: int
    backpressured: bool = False
    elapsed_ms: float = 0.0
    busy_ms: float = 0.0
    backpressured_ms: float = 0.0
    watermark: int | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    # User-defined metrics of the task's operators: (operator name, metric name, value).
    user: tuple[tuple[str, str, float], ...] = ()
    # Latency histograms of the task's operators (``metrics.latency.interval`` > 0).
    latency: tuple[LatencyReport, ...] = ()


@dataclass(frozen=True)
class CollectedResults:
    """Records of an ``execute_and_collect`` sink, released when their checkpoint completed.

    ``dedup_key`` makes delivery idempotent when a restored subtask re-sends them.
    """

    attempt: AttemptNumber
    transformation_id: int
    dedup_key: tuple[int, int, int] | None  # (subtask, checkpoint id, sequence)
    records: list[Any]
