"""Checkpoint statistics as Flink's web UI reports them: counts, a bounded history, summaries.

Invariant: the tracker only records what the coordinator reports (it decides nothing); every
value it hands out is an immutable snapshot (copy-on-write, taken under the tracker's lock), so
readers on other threads (job client, progress line) never see a torn one. Every derived number
is a pure function of the recorded acknowledgements.

Definitions (Flink's): *end-to-end duration* is trigger -> completion (per subtask: trigger ->
acknowledgement); *start delay* is barrier creation -> first barrier at the subtask;
*alignment duration* is first -> last barrier at the subtask; *sync*/*async* are the two parts
of the snapshot; *processed*/*persisted* are the bytes processed during alignment and the
in-flight bytes written by an unaligned checkpoint. The *checkpointed size* is what a
checkpoint wrote: its *state size* (keyed + operator state), less the files an incremental
RocksDB checkpoint shares with older ones; persisted in-flight bytes are counted separately.
"""

from __future__ import annotations

import enum
import math
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.ids import CheckpointId


class CheckpointStatus(enum.Enum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "min": self.min,
            "max": self.max,
            "avg": self.avg,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
        }


class _Figures(NamedTuple):
    """The summarized numbers of one observation (a completed checkpoint or one subtask)."""

    end_to_end_duration: int
    state_size: int
    checkpointed_size: int
    processed_bytes: int
    persisted_bytes: int
    alignment_duration: int
    start_delay: int
    sync_duration: int
    async_duration: int


@dataclass(frozen=True, slots=True)
class StatsSummary:
    """A :class:`Summary` of each of Flink's checkpoint figures over a set of observations.

    Over completed checkpoints (:attr:`CheckpointStatsSnapshot.summary`) the durations of a
    checkpoint are its slowest subtask's; over the subtasks of one checkpoint
    (:meth:`CheckpointStats.subtask_summary`) every subtask is one observation.
    Sizes are bytes, durations milliseconds.

    >>> StatsSummary.of([]).alignment_duration.count
    0
    """

    end_to_end_duration: Summary = Summary()
    state_size: Summary = Summary()
    checkpointed_size: Summary = Summary()
    processed_bytes: Summary = Summary()
    persisted_bytes: Summary = Summary()
    alignment_duration: Summary = Summary()
    start_delay: Summary = Summary()
    sync_duration: Summary = Summary()
    async_duration: Summary = Summary()

    @classmethod
    def of(cls, figures: Iterable[_Figures]) -> StatsSummary:
        columns = list(zip(*figures, strict=True))
        if not columns:
            return cls()
        return cls(*(Summary.of(column) for column in columns))

    def items(self) -> tuple[tuple[str, Summary], ...]:
        """(figure name, summary) in display order."""
        return tuple((name, getattr(self, name)) for name in _Figures._fields)

    def to_dict(self) -> dict[str, Any]:
        return {name: s.to_dict() for name, s in self.items()}


@dataclass(frozen=True, slots=True)
class SubtaskStats:
    """One subtask's acknowledgement of a checkpoint: when it came and what the task measured.

    >>> from cairn.ids import SubtaskIndex, VertexId
    >>> m = SubtaskCheckpointMetrics(start_delay_ms=3, alignment_duration_ms=5, state_size=64)
    >>> s = SubtaskStats(TaskKey(VertexId(1), SubtaskIndex(0)), ack_ms=140, metrics=m)
    >>> s.end_to_end_duration_ms(trigger_ms=100), s.to_dict(100)["alignment_duration"]
    (40, 5)
    """

    task: TaskKey
    ack_ms: int
    metrics: SubtaskCheckpointMetrics

    def end_to_end_duration_ms(self, trigger_ms: int) -> int:
        """Trigger on the coordinator until this subtask's acknowledgement arrived."""
        return max(0, self.ack_ms - trigger_ms)

    def _figures(self, trigger_ms: int) -> _Figures:
        m = self.metrics
        return _Figures(
            self.end_to_end_duration_ms(trigger_ms),
            m.state_size,
            m.checkpointed,
            m.processed_bytes,
            m.persisted_bytes,
            m.alignment_duration_ms,
            m.start_delay_ms,
            m.sync_duration_ms,
            m.async_duration_ms,
        )

    def to_dict(self, trigger_ms: int | None = None) -> dict[str, Any]:
        """JSON-ready row (Flink's subtask names); end-to-end only when ``trigger_ms`` is given."""
        m = self.metrics
        return {
            "vertex_id": self.task.vertex_id,
            "subtask_index": self.task.subtask_index,
            "ack_timestamp": self.ack_ms,
            "end_to_end_duration": (
                None if trigger_ms is None else self.end_to_end_duration_ms(trigger_ms)
            ),
            "start_delay": m.start_delay_ms,
            "alignment_duration": m.alignment_duration_ms,
            "sync_duration": m.sync_duration_ms,
            "async_duration": m.async_duration_ms,
            "state_size": m.state_size,
            "checkpointed_size": m.checkpointed,
            "processed_data": m.processed_bytes,
            "persisted_data": m.persisted_bytes,
            "unaligned": m.unaligned,
        }


@dataclass(frozen=True, slots=True)
class CheckpointStats:
    """One checkpoint as seen so far; derived numbers follow Flink's definitions.

    Durations of the checkpoint as a whole (alignment, start delay, sync, async) are the
    maximum over its acknowledged subtasks (the slowest subtask decides); byte counts are sums.

    >>> from cairn.ids import SubtaskIndex, VertexId
    >>> t = TaskKey(VertexId(0), SubtaskIndex(0))
    >>> m = SubtaskCheckpointMetrics(alignment_duration_ms=7, unaligned=True)
    >>> sub = SubtaskStats(t, 130, m)
    >>> c = CheckpointStats(CheckpointId(4), False, CheckpointStatus.COMPLETED, 100, 1, {t: sub},
    ...                     end_ms=150)
    >>> c.end_to_end_duration_ms, c.max_alignment_duration_ms, c.checkpoint_type
    (50, 7, 'UNALIGNED_CHECKPOINT')
    """

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
        return sum(s.metrics.checkpointed for s in self.subtasks.values())

    @property
    def processed_bytes(self) -> int:
        return sum(s.metrics.processed_bytes for s in self.subtasks.values())

    @property
    def persisted_bytes(self) -> int:
        return sum(s.metrics.persisted_bytes for s in self.subtasks.values())

    @property
    def unaligned(self) -> bool:
        return any(s.metrics.unaligned for s in self.subtasks.values())

    @property
    def max_alignment_duration_ms(self) -> int:
        return max((s.metrics.alignment_duration_ms for s in self.subtasks.values()), default=0)

    @property
    def max_start_delay_ms(self) -> int:
        return max((s.metrics.start_delay_ms for s in self.subtasks.values()), default=0)

    @property
    def max_sync_duration_ms(self) -> int:
        return max((s.metrics.sync_duration_ms for s in self.subtasks.values()), default=0)

    @property
    def max_async_duration_ms(self) -> int:
        return max((s.metrics.async_duration_ms for s in self.subtasks.values()), default=0)

    @property
    def checkpoint_type(self) -> str:
        """``SAVEPOINT``, ``UNALIGNED_CHECKPOINT`` or ``CHECKPOINT`` (Flink's names)."""
        if self.is_savepoint:
            return "SAVEPOINT"
        return "UNALIGNED_CHECKPOINT" if self.unaligned else "CHECKPOINT"

    def subtask_details(self) -> tuple[SubtaskStats, ...]:
        """Acknowledged subtasks ordered by (vertex, subtask index)."""
        return tuple(self.subtasks[t] for t in sorted(self.subtasks))

    def subtask_summary(self) -> StatsSummary:
        """Min/avg/percentiles/max over this checkpoint's acknowledged subtasks."""
        return StatsSummary.of(s._figures(self.trigger_ms) for s in self.subtasks.values())

    def _figures(self) -> _Figures:
        return _Figures(
            self.end_to_end_duration_ms,
            self.state_size,
            self.checkpointed_size,
            self.processed_bytes,
            self.persisted_bytes,
            self.max_alignment_duration_ms,
            self.max_start_delay_ms,
            self.max_sync_duration_ms,
            self.max_async_duration_ms,
        )

    def to_dict(self, details: bool = False) -> dict[str, Any]:
        """JSON-ready view; ``details`` adds the per-subtask rows and their summary."""
        out: dict[str, Any] = {
            "id": self.checkpoint_id,
            "is_savepoint": self.is_savepoint,
            "checkpoint_type": self.checkpoint_type,
            "status": self.status.value,
            "trigger_timestamp": self.trigger_ms,
            "end_timestamp": self.end_ms,
            "latest_ack_timestamp": self.latest_ack_ms,
            "end_to_end_duration": self.end_to_end_duration_ms,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
            "processed_data": self.processed_bytes,
            "persisted_data": self.persisted_bytes,
            "alignment_duration": self.max_alignment_duration_ms,
            "start_delay": self.max_start_delay_ms,
            "sync_duration": self.max_sync_duration_ms,
            "async_duration": self.max_async_duration_ms,
            "unaligned": self.unaligned,
            "num_subtasks": self.num_subtasks,
            "num_acknowledged_subtasks": self.num_acknowledged_subtasks,
            "failure_reason": self.failure_reason,
            "failure_message": self.failure_message,
            "external_path": self.path,
        }
        if details:
            out["subtasks"] = [s.to_dict(self.trigger_ms) for s in self.subtask_details()]
            out["subtask_summary"] = self.subtask_summary().to_dict()
        return out


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
class RestoredCheckpointStats:
    checkpoint_id: CheckpointId
    restore_ms: int
    path: str
    is_savepoint: bool


@dataclass(frozen=True, slots=True)
class CheckpointStatsSnapshot:
    """Everything known about a job's checkpoints at one moment (Flink's stats snapshot).

    ``history`` is newest first and includes in-progress and failed checkpoints, each with
    its per-subtask rows (:meth:`CheckpointStats.subtask_details`); ``summary`` covers the
    completed checkpoints (and savepoints) of the tracker's summary window.

    >>> snap = CheckpointStatsSnapshot.empty()
    >>> snap.counts.total, snap.summary.end_to_end_duration.count, snap.latest_completed
    (0, 0, None)
    """

    counts: CheckpointCounts
    history: tuple[CheckpointStats, ...]  # newest first, in-progress ones included
    summary: StatsSummary = StatsSummary()  # over completed checkpoints
    latest_completed: CheckpointStats | None = None
    latest_failed: CheckpointStats | None = None
    latest_savepoint: CheckpointStats | None = None
    latest_restored: RestoredCheckpointStats | None = None

    @classmethod
    def empty(cls) -> CheckpointStatsSnapshot:
        """The snapshot of a job that has not reported anything yet."""
        return cls(CheckpointCounts(), ())

    @property
    def end_to_end_duration(self) -> Summary:
        """Shortcut for ``summary.end_to_end_duration``."""
        return self.summary.end_to_end_duration

    @property
    def state_size(self) -> Summary:
        """Shortcut for ``summary.state_size``."""
        return self.summary.state_size

    def get(self, checkpoint_id: CheckpointId) -> CheckpointStats | None:
        """The checkpoint with this id if it is still in the history."""
        return next((s for s in self.history if s.checkpoint_id == checkpoint_id), None)

    def snapshot(self) -> CheckpointStatsSnapshot:
        """This snapshot (lets code written against the tracker keep calling ``snapshot()``)."""
        return self

    def to_dict(self, details: bool = False) -> dict[str, Any]:
        """JSON-ready view, shaped like Flink's ``/jobs/:id/checkpoints`` response.

        ``details`` adds per-subtask rows to every history entry.
        """
        restored = self.latest_restored
        return {
            "counts": {
                "in_progress": self.counts.in_progress,
                "completed": self.counts.completed,
                "failed": self.counts.failed,
                "restored": self.counts.restored,
                "total": self.counts.total,
            },
            "summary": self.summary.to_dict(),
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
            "history": [s.to_dict(details) for s in self.history],
        }


class CheckpointStatsTracker:
    """Collects what the coordinator reports about each checkpoint.

    Reports come from the coordinator's thread; :meth:`snapshot` and :meth:`get` may be
    called from any thread.

    >>> from cairn.ids import SubtaskIndex, VertexId
    >>> t = CheckpointStatsTracker()
    >>> t.report_pending(CheckpointId(1), trigger_ms=100, num_subtasks=1)
    >>> t.report_ack(CheckpointId(1), TaskKey(VertexId(0), SubtaskIndex(0)),
    ...              SubtaskCheckpointMetrics(alignment_duration_ms=4), ack_ms=120)
    >>> t.report_completed(CheckpointId(1), end_ms=130, path="/c/chk-1")
    >>> snap = t.snapshot()
    >>> summary = snap.summary
    >>> snap.counts.completed, summary.end_to_end_duration.max, summary.alignment_duration.max
    (1, 30, 4)
    """

    def __init__(self, history_size: int = 10, summary_window: int = 1000) -> None:
        self._lock = threading.Lock()
        self._in_progress: dict[CheckpointId, CheckpointStats] = {}
        self._finished: deque[CheckpointStats] = deque(maxlen=history_size)
        self._history_size = history_size
        self._figures: deque[_Figures] = deque(maxlen=summary_window)
        self._completed = 0
        self._failed = 0
        self._restored = 0
        self._latest_completed: CheckpointStats | None = None
        self._latest_failed: CheckpointStats | None = None
        self._latest_savepoint: CheckpointStats | None = None
        self._latest_restored: RestoredCheckpointStats | None = None
        self._cached: CheckpointStatsSnapshot | None = None

    def report_pending(
        self,
        checkpoint_id: CheckpointId,
        trigger_ms: int,
        num_subtasks: int,
        is_savepoint: bool = False,
    ) -> None:
        with self._lock:
            self._cached = None
            self._in_progress[checkpoint_id] = CheckpointStats(
                checkpoint_id,
                is_savepoint,
                CheckpointStatus.IN_PROGRESS,
                trigger_ms,
                num_subtasks,
            )

    def report_ack(
        self,
        checkpoint_id: CheckpointId,
        task: TaskKey,
        metrics: SubtaskCheckpointMetrics,
        ack_ms: int,
    ) -> None:
        with self._lock:
            stats = self._in_progress.get(checkpoint_id)
            if stats is not None:
                self._cached = None
                subtasks = {**stats.subtasks, task: SubtaskStats(task, ack_ms, metrics)}
                self._in_progress[checkpoint_id] = replace(stats, subtasks=subtasks)

    def report_completed(
        self, checkpoint_id: CheckpointId, end_ms: int, path: str | None = None
    ) -> None:
        with self._lock:
            stats = self._in_progress.pop(checkpoint_id, None)
            if stats is None:
                return
            self._cached = None
            done = replace(stats, status=CheckpointStatus.COMPLETED, end_ms=end_ms, path=path)
            self._finished.append(done)
            self._completed += 1
            self._figures.append(done._figures())
            if done.is_savepoint:
                self._latest_savepoint = done
            else:
                self._latest_completed = done

    def report_failed(
        self, checkpoint_id: CheckpointId, end_ms: int, reason: str, message: str = ""
    ) -> None:
        with self._lock:
            stats = self._in_progress.pop(checkpoint_id, None)
            if stats is None:
                return
            self._cached = None
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
        with self._lock:
            self._cached = None
            self._restored += 1
            self._latest_restored = RestoredCheckpointStats(
                checkpoint_id, restore_ms, path, is_savepoint
            )

    def get(self, checkpoint_id: CheckpointId) -> CheckpointStats | None:
        with self._lock:
            if checkpoint_id in self._in_progress:
                return self._in_progress[checkpoint_id]
            return next((s for s in self._finished if s.checkpoint_id == checkpoint_id), None)

    @property
    def counts(self) -> CheckpointCounts:
        with self._lock:
            return self._counts()

    def _counts(self) -> CheckpointCounts:
        return CheckpointCounts(
            len(self._in_progress), self._completed, self._failed, self._restored
        )

    def snapshot(self) -> CheckpointStatsSnapshot:
        """The current statistics (cached until the next report)."""
        with self._lock:
            if self._cached is None:
                history = sorted(
                    [*self._in_progress.values(), *self._finished],
                    key=lambda s: s.checkpoint_id,
                    reverse=True,
                )[: self._history_size]
                self._cached = CheckpointStatsSnapshot(
                    counts=self._counts(),
                    history=tuple(history),
                    summary=StatsSummary.of(self._figures),
                    latest_completed=self._latest_completed,
                    latest_failed=self._latest_failed,
                    latest_savepoint=self._latest_savepoint,
                    latest_restored=self._latest_restored,
                )
            return self._cached
