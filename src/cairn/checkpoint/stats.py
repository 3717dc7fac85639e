"""Checkpoint statistics as Flink's web UI reports them: counts, a bounded history, summaries.

Invariant: the tracker only records what the coordinator reports (it decides nothing); every
value it hands out is an immutable snapshot, so readers on other threads never see a torn one.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.ids import CheckpointId


class CheckpointStatus(enum.Enum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class SubtaskStats:
    task: TaskKey
    ack_ms: int
    metrics: SubtaskCheckpointMetrics


@dataclass(frozen=True, slots=True)
class CheckpointStats:
    """One checkpoint as seen so far; derived numbers follow Flink's definitions."""

    checkpoint_id: CheckpointId
    is_savepoint: bool
    status: CheckpointStatus
    trigger_ms: int
    num_subtasks: int
    subtasks: Mapping[TaskKey, SubtaskStats] = field(default_factory=dict)
    end_ms: int | None = None  # completion or failure time
    failure_reason: str | None = None
    failure_message: str | None = None
    path: str | None = None  # directory of a completed checkpoint

    @property
    def num_acknowledged_subtasks(self) -> int:
        return len(self.subtasks)

    @property
    def latest_ack_ms(self) -> int | None:
        return max((s.ack_ms for s in self.subtasks.values()), default=None)

    @property
    def end_to_end_duration_ms(self) -> int:
        """Trigger until the end (or, while in progress, until the latest acknowledgement)."""
        end = self.end_ms if self.end_ms is not None else self.latest_ack_ms
        return 0 if end is None else max(0, end - self.trigger_ms)

    @property
    def state_size(self) -> int:
        return sum(s.metrics.state_size for s in self.subtasks.values())

    @property
    def checkpointed_size(self) -> int:
        # Snapshots are full (not incremental): what was persisted equals the state size.
        return self.state_size

    @property
    def processed_bytes(self) -> int:
        return sum(s.metrics.processed_bytes for s in self.subtasks.values())

    @property
    def persisted_bytes(self) -> int:
        return sum(s.metrics.persisted_bytes for s in self.subtasks.values())

    @property
    def unaligned(self) -> bool:
        return any(s.metrics.unaligned for s in self.subtasks.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.checkpoint_id,
            "is_savepoint": self.is_savepoint,
            "status": self.status.value,
            "trigger_timestamp": self.trigger_ms,
            "end_timestamp": self.end_ms,
            "end_to_end_duration": self.end_to_end_duration_ms,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
            "processed_data": self.processed_bytes,
            "persisted_data": self.persisted_bytes,
            "unaligned": self.unaligned,
            "num_subtasks": self.num_subtasks,
            "num_acknowledged_subtasks": self.num_acknowledged_subtasks,
            "failure_reason": self.failure_reason,
            "failure_message": self.failure_message,
            "external_path": self.path,
        }


@dataclass(frozen=True, slots=True)
class CheckpointCounts:
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    restored: int = 0

    @property
    def total(self) -> int:
        return self.in_progress + self.completed + self.failed


@dataclass(frozen=True, slots=True)
class Summary:
    """Min/avg/percentiles/max over a window of values (nearest-rank percentiles).

    >>> Summary.of([10, 20, 30, 40]).p50, Summary.of([]).count
    (20, 0)
    """

    count: int = 0
    min: int = 0
    max: int = 0
    avg: float = 0.0
    p50: int = 0
    p90: int = 0
    p99: int = 0

    @classmethod
    def of(cls, values: Iterable[int]) -> Summary:
        xs = sorted(values)
        if not xs:
            return cls()

        def rank(p: float) -> int:
            return xs[max(0, math.ceil(p * len(xs)) - 1)]

        return cls(len(xs), xs[0], xs[-1], sum(xs) / len(xs), rank(0.5), rank(0.9), rank(0.99))


@dataclass(frozen=True, slots=True)
class RestoredCheckpointStats:
    checkpoint_id: CheckpointId
    restore_ms: int
    path: str
    is_savepoint: bool


@dataclass(frozen=True, slots=True)
class CheckpointStatsSnapshot:
    counts: CheckpointCounts
    history: tuple[CheckpointStats, ...]  # newest first, in-progress ones included
    end_to_end_duration: Summary  # over completed checkpoints
    state_size: Summary
    latest_completed: CheckpointStats | None = None
    latest_failed: CheckpointStats | None = None
    latest_savepoint: CheckpointStats | None = None
    latest_restored: RestoredCheckpointStats | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view, shaped like Flink's ``/jobs/:id/checkpoints`` response."""
        restored = self.latest_restored
        return {
            "counts": {
                "in_progress": self.counts.in_progress,
                "completed": self.counts.completed,
                "failed": self.counts.failed,
                "restored": self.counts.restored,
                "total": self.counts.total,
            },
            "summary": {
                "end_to_end_duration": _summary_dict(self.end_to_end_duration),
                "state_size": _summary_dict(self.state_size),
            },
            "latest": {
                "completed": self.latest_completed and self.latest_completed.to_dict(),
                "failed": self.latest_failed and self.latest_failed.to_dict(),
                "savepoint": self.latest_savepoint and self.latest_savepoint.to_dict(),
                "restored": restored
                and {
                    "id": restored.checkpoint_id,
                    "restore_timestamp": restored.restore_ms,
                    "external_path": restored.path,
                    "is_savepoint": restored.is_savepoint,
                },
            },
            "history": [s.to_dict() for s in self.history],
        }


def _summary_dict(s: Summary) -> dict[str, Any]:
    return {
        "count": s.count,
        "min": s.min,
        "max": s.max,
        "avg": s.avg,
        "p50": s.p50,
        "p90": s.p90,
        "p99": s.p99,
    }


class CheckpointStatsTracker:
    """Collects what the coordinator reports about each checkpoint.

    >>> t = CheckpointStatsTracker()
    >>> t.report_pending(CheckpointId(1), trigger_ms=100, num_subtasks=2)
    >>> t.report_completed(CheckpointId(1), end_ms=130, path="/c/chk-1")
    >>> t.snapshot().counts, t.snapshot().end_to_end_duration.max
    (CheckpointCounts(in_progress=0, completed=1, failed=0, restored=0), 30)
    """

    def __init__(self, history_size: int = 10, summary_window: int = 1000) -> None:
        self._in_progress: dict[CheckpointId, CheckpointStats] = {}
        self._finished: deque[CheckpointStats] = deque(maxlen=history_size)
        self._history_size = history_size
        self._durations: deque[int] = deque(maxlen=summary_window)
        self._sizes: deque[int] = deque(maxlen=summary_window)
        self._completed = 0
        self._failed = 0
        self._restored = 0
        self._latest_completed: CheckpointStats | None = None
        self._latest_failed: CheckpointStats | None = None
        self._latest_savepoint: CheckpointStats | None = None
        self._latest_restored: RestoredCheckpointStats | None = None

    def report_pending(
        self,
        checkpoint_id: CheckpointId,
        trigger_ms: int,
        num_subtasks: int,
        is_savepoint: bool = False,
    ) -> None:
        self._in_progress[checkpoint_id] = CheckpointStats(
            checkpoint_id, is_savepoint, CheckpointStatus.IN_PROGRESS, trigger_ms, num_subtasks
        )

    def report_ack(
        self,
        checkpoint_id: CheckpointId,
        task: TaskKey,
        metrics: SubtaskCheckpointMetrics,
        ack_ms: int,
    ) -> None:
        stats = self._in_progress.get(checkpoint_id)
        if stats is not None:
            subtasks = {**stats.subtasks, task: SubtaskStats(task, ack_ms, metrics)}
            self._in_progress[checkpoint_id] = replace(stats, subtasks=subtasks)

    def report_completed(
        self, checkpoint_id: CheckpointId, end_ms: int, path: str | None = None
    ) -> None:
        stats = self._in_progress.pop(checkpoint_id, None)
        if stats is None:
            return
        done = replace(stats, status=CheckpointStatus.COMPLETED, end_ms=end_ms, path=path)
        self._finished.append(done)
        self._completed += 1
        self._durations.append(done.end_to_end_duration_ms)
        self._sizes.append(done.state_size)
        if done.is_savepoint:
            self._latest_savepoint = done
        else:
            self._latest_completed = done

    def report_failed(
        self, checkpoint_id: CheckpointId, end_ms: int, reason: str, message: str = ""
    ) -> None:
        stats = self._in_progress.pop(checkpoint_id, None)
        if stats is None:
            return
        failed = replace(
            stats,
            status=CheckpointStatus.FAILED,
            end_ms=end_ms,
            failure_reason=reason,
            failure_message=message,
        )
        self._finished.append(failed)
        self._failed += 1
        self._latest_failed = failed

    def report_restored(
        self, checkpoint_id: CheckpointId, restore_ms: int, path: str, is_savepoint: bool
    ) -> None:
        self._restored += 1
        self._latest_restored = RestoredCheckpointStats(
            checkpoint_id, restore_ms, path, is_savepoint
        )

    def get(self, checkpoint_id: CheckpointId) -> CheckpointStats | None:
        if checkpoint_id in self._in_progress:
            return self._in_progress[checkpoint_id]
        return next((s for s in self._finished if s.checkpoint_id == checkpoint_id), None)

    @property
    def counts(self) -> CheckpointCounts:
        return CheckpointCounts(
            len(self._in_progress), self._completed, self._failed, self._restored
        )

    def snapshot(self) -> CheckpointStatsSnapshot:
        history = sorted(
            [*self._in_progress.values(), *self._finished],
            key=lambda s: s.checkpoint_id,
            reverse=True,
        )[: self._history_size]
        return CheckpointStatsSnapshot(
            counts=self.counts,
            history=tuple(history),
            end_to_end_duration=Summary.of(self._durations),
            state_size=Summary.of(self._sizes),
            latest_completed=self._latest_completed,
            latest_failed=self._latest_failed,
            latest_savepoint=self._latest_savepoint,
            latest_restored=self._latest_restored,
        )
