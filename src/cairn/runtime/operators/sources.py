"""Source operators: cooperative ``Source`` readers and legacy ``SourceFunction`` threads.

Invariant: a source's checkpointed position always covers exactly the records emitted before
the barrier: readers are polled by the task thread only, and a ``SourceFunction`` thread emits
under the checkpoint lock, which the task holds while it drains, snapshots and emits a barrier;
its thread collects at most as many records ahead of the task as the task allows
(``bound_buffer``, a few batches' work), so that drain is short when the chain is slow. A
``Source`` with a watermark strategy stamps each polled batch and emits watermarks on the
task's timer loop: one generator per subtask, over all its splits, unless the reader is
split-aware (``SourceReader.split_ids``): then one per split, merged by the minimum over the
splits that are not idle (``SplitWatermarks``). Readers that are not split-aware take exactly
the path they took before.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any

from cairn.api.connectors import (
    Source,
    SourceReader,
    SourceReaderContext,
    SplitBatch,
    TimestampedBatch,
)
from cairn.api.state import ListStateDescriptor
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.events import DEFAULT_CHECKPOINT_OPTIONS, CheckpointOptions
from cairn.graph.job_graph import OperatorNode
from cairn.ids import CheckpointId
from cairn.runtime.eventtime.split_watermarks import SplitWatermarks
from cairn.runtime.operators.base import OperatorRestore, OperatorSnapshot
from cairn.runtime.operators.timestamps import PeriodicWatermarks
from cairn.runtime.operators.user_function import UserFunctionOperator

SPLITS_STATE = "_cairn_source_splits"


class UserSourceError(Exception):
    """A user's source raised; carries the formatted traceback of the source thread."""

    def __init__(self, message: str, formatted: str) -> None:
        super().__init__(message)
        self.formatted_traceback = formatted


class SourceOperator(UserFunctionOperator):
    is_source = True

    def __init__(self, node: OperatorNode) -> None:
        super().__init__(node)
        strategy = node.watermark_strategy
        event_time = isinstance(strategy, WatermarkStrategy) and (
            strategy.kind != "no_watermarks"
            or strategy.timestamp_assigner is not None
            or strategy.idle_timeout_ms is not None
        )
        self._strategy = strategy if event_time else None
        self.generates_watermarks = event_time
        self._event_time: PeriodicWatermarks | None = None
        self._split_watermarks: SplitWatermarks | None = None
        self._interval_ms = 0
        self._next_emit_ms: int | None = None

    def initialize_state(self, restore: OperatorRestore | None) -> None:
        super().initialize_state(restore)
        source: Source = self.function
        desc = ListStateDescriptor(SPLITS_STATE, None)
        backend = self.ctx.operator_backend
        if getattr(source, "split_redistribution", "split") == "union":
            self._splits_state = backend.get_union_list_state(desc)
        else:
            self._splits_state = backend.get_list_state(desc)
        if restore is not None:
            self._splits = list(self._splits_state.get() or [])
        else:
            p = self.ctx.parallelism
            self._splits = list(source.create_splits(p))[self.ctx.subtask_index :: p]

    def open(self) -> None:
        c = self.ctx
        self.reader: SourceReader = self.function.create_reader(
            self._splits, SourceReaderContext(c.subtask_index, c.parallelism, c.attempt, c.job_id)
        )
        split_ids = self.reader.split_ids()
        if split_ids is not None:
            # Split-aware readers return SplitBatches: these methods replace the class's.
            self.poll = self._poll_split_batch  # type: ignore[method-assign]
            if self._strategy is not None:
                self._split_watermarks = SplitWatermarks(self._strategy, split_ids)
                self._interval_ms = c.watermark_interval_ms
                if self._interval_ms > 0:
                    self._next_emit_ms = c.clock_ms() + self._interval_ms
            return
        if self._strategy is not None:
            self._event_time = PeriodicWatermarks(
                self._strategy, c.watermark_interval_ms, c.clock_ms()
            )

    def _poll_split_batch(self, max_records: int) -> list[Any] | None:
        batch = self.reader.poll_batch(max_records)
        if not batch:
            return None if batch is None else []
        if type(batch) is not SplitBatch:
            raise TypeError(
                f"source {self.name!r}: a split-aware reader must return SplitBatch, "
                f"got {type(batch).__name__}"
            )
        watermarks = self._split_watermarks
        if watermarks is None:
            return list(batch)  # no event time: plain records, as from any source
        return watermarks.assign(list(batch), batch.timestamps, batch.split_runs)

    def poll(self, max_records: int) -> list[Any] | None:
        batch = self.reader.poll_batch(max_records)
        event_time = self._event_time
        if event_time is not None and batch:
            if type(batch) is TimestampedBatch:
                return event_time.stamper.assign_read(batch, batch.timestamps, batch.max_read)
            return event_time.stamper.assign(batch)
        return batch

    def next_timer_ms(self) -> int | None:
        event_time = self._event_time
        if event_time is not None:
            return event_time.next_ms
        return self._next_emit_ms

    def on_processing_time(self, now_ms: int) -> None:
        event_time = self._event_time
        if event_time is not None:
            self.emit_events(event_time.on_timer(now_ms))
            return
        watermarks = self._split_watermarks
        due = self._next_emit_ms
        if watermarks is not None and due is not None and now_ms >= due:
            self._next_emit_ms = now_ms + self._interval_ms
            split_ids = self.reader.split_ids()
            if split_ids is not None:
                watermarks.sync_splits(split_ids)
            self.emit_events(watermarks.on_periodic_emit(now_ms))

    def end_of_event_time(self) -> None:
        event_time = self._event_time
        if event_time is not None:
            self.emit_events(event_time.emitter.on_end_of_input())
        elif self._split_watermarks is not None:
            self.emit_events(self._split_watermarks.on_end_of_input())
        else:
            super().end_of_event_time()

    def available_in_s(self) -> float | None:
        """The reader's hint after an empty poll (see ``SourceReader.available_in_s``)."""
        hint = getattr(self.reader, "available_in_s", None)
        return hint() if hint is not None else None

    def records_due_in_s(self) -> float | None:
        """When the reader's next records are due, exactly (``SourceReader.records_due_in_s``)."""
        due = getattr(self.reader, "records_due_in_s", None)
        return due() if due is not None else None

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        self._splits_state.update(list(self.reader.snapshot_state(checkpoint_id)))
        return super().snapshot_state(checkpoint_id, timestamp_ms, options)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        self.reader.notify_checkpoint_complete(checkpoint_id)

    def close(self) -> None:
        self.reader.close()


def _no_wake() -> None:
    """Until the worker installs its wake-up signal."""


class _SourceContext:
    """``SourceFunction.SourceContext`` handed to ``run``; called from the source thread."""

    def __init__(self, op: SourceFunctionOperator, limit: int) -> None:
        self._op = op
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.buffer: list[Any] = []
        self.limit = limit
        self.closed = False

    def collect(self, element: Any) -> None:
        with self.cond:
            while len(self.buffer) >= self.limit and not self.closed:
                self.cond.wait(0.05)
            if self.closed:
                raise _SourceCancelled()
            self.buffer.append(element)
            n = len(self.buffer)
        if n == 1 or n == self.limit:
            self._op.wake()

    def collect_with_timestamp(self, element: Any, timestamp: int) -> None:
        self.collect(element)

    def emit_watermark(self, watermark: Any) -> None:
        pass

    def mark_as_temporarily_idle(self) -> None:
        pass

    def get_checkpoint_lock(self) -> threading.RLock:
        return self.lock

    def close(self) -> None:
        pass


class _SourceCancelled(BaseException):
    pass


class SourceFunctionOperator(UserFunctionOperator):
    """Legacy ``add_source(SourceFunction)``: ``run(ctx)`` loops in its own thread."""

    is_source = True
    BUFFER_LIMIT = 4096
    # Until the task has measured its chain (``bound_buffer``): a slow chain must not find
    # thousands of records to emit ahead of its first barrier.
    INITIAL_BUFFER = 4

    def open(self) -> None:
        super().open()
        self.context = _SourceContext(self, self.INITIAL_BUFFER)
        self._done = False
        self._error: UserSourceError | None = None
        self.wake: Callable[[], None] = _no_wake
        self._thread = threading.Thread(
            target=self._run, name=f"source-{self.name}-{self.ctx.subtask_index}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            self.function.run(self.context)
        except _SourceCancelled:
            pass
        except BaseException as exc:  # surfaced to the task thread with the user's traceback
            self._error = UserSourceError(
                f"source {self.name!r} failed: {type(exc).__name__}: {exc}", traceback.format_exc()
            )
        finally:
            self._done = True
            self.wake()

    @property
    def checkpoint_lock(self) -> threading.RLock:
        return self.context.lock

    def poll(self, max_records: int) -> list[Any] | None:
        ctx = self.context
        with ctx.cond:
            batch = ctx.buffer
            if batch:
                if len(batch) > max_records:
                    ctx.buffer, batch = batch[max_records:], batch[:max_records]
                else:
                    ctx.buffer = []
                ctx.cond.notify_all()
                return batch
        if self._error is not None:
            raise self._error
        if self._done:
            return None
        return []

    def available_in_s(self) -> float | None:
        return None  # the source thread wakes the task when it emits

    def records_due_in_s(self) -> float | None:
        return None

    def bound_buffer(self, records: int) -> None:
        """Let the source thread run at most ``records`` ahead of the task (within
        ``[1, BUFFER_LIMIT]``): what a checkpoint must emit ahead of its barrier stays a few
        batches' work when the chain is slow."""
        limit = max(1, min(self.BUFFER_LIMIT, records))
        ctx = self.context
        if limit != ctx.limit:
            with ctx.cond:
                ctx.limit = limit
                ctx.cond.notify_all()

    def close(self) -> None:
        ctx = self.context
        if not self._done:
            cancel = getattr(self.function, "cancel", None)
            if callable(cancel):
                cancel()
        with ctx.cond:
            ctx.closed = True
            ctx.cond.notify_all()
        super().close()
