"""Sink operators: legacy SinkFunction, two-phase-commit Sink, and the collect sink.

Invariant (exactly-once): data is pre-committed at the checkpoint barrier and made visible
only after the checkpoint completed; committables of a restored checkpoint are re-committed
(idempotently) by subtask 0 before any writer of the new attempt writes.
"""

from __future__ import annotations

from typing import Any

from cairn.api.connectors import Committer, SinkWriter, SinkWriterContext
from cairn.api.state import ListStateDescriptor
from cairn.events import DEFAULT_CHECKPOINT_OPTIONS, CheckpointOptions
from cairn.ids import CheckpointId
from cairn.runtime.eventtime.stamped import StampedBatch
from cairn.runtime.operators.base import OperatorRestore, OperatorSnapshot, StreamOperator
from cairn.runtime.operators.user_function import UserFunctionOperator, resolve_method
from cairn.runtime.reports import CollectedResults

END_OF_INPUT_CHECKPOINT = CheckpointId(2**62)


class _SinkContext:
    def __init__(self, op: StreamOperator) -> None:
        self._op = op
        # Set by the operator for each record or timer: a plain attribute, one store each.
        self.record_timestamp: int | None = None

    def current_processing_time(self) -> int:
        return self._op.ctx.clock_ms()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def timestamp(self) -> int | None:
        return self.record_timestamp


class SinkFunctionOperator(UserFunctionOperator):
    """``add_sink(SinkFunction)`` and ``print()``: at-least-once, no commit protocol."""

    def open(self) -> None:
        super().open()
        self._invoke = resolve_method(self.function, "invoke")
        self._context = _SinkContext(self)
        self._takes_context = _accepts_two_args(self._invoke)

    def process_batch(self, records: list[Any]) -> None:
        f = self._invoke
        if self._takes_context:
            ctx = self._context
            if type(records) is StampedBatch:
                for r, t in zip(records, records.timestamps, strict=True):
                    ctx.record_timestamp = t
                    f(r, ctx)
                ctx.record_timestamp = None
                return
            for r in records:
                f(r, ctx)
        else:
            for r in records:
                f(r)


def _accepts_two_args(f: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


class SinkOperator(StreamOperator):
    """``sink_to(Sink)``: writer plus optional committer (two-phase commit)."""

    def initialize_state(self, restore: OperatorRestore | None) -> None:
        super().initialize_state(restore)
        assert self.node.spec is not None
        sink = self.node.spec.function
        backend = self.ctx.operator_backend
        self._writer_state = backend.get_list_state(ListStateDescriptor("_cairn_sink_writer", None))
        self._committables = backend.get_union_list_state(
            ListStateDescriptor("_cairn_sink_committables", None)
        )
        self._pending: dict[CheckpointId, list[Any]] = {}
        self.committer: Committer | None = sink.create_committer()
        c = self.ctx
        self._writer_context = SinkWriterContext(
            c.subtask_index, c.parallelism, c.attempt, c.job_id
        )
        if self.committer is not None and c.subtask_index == 0:
            if restore is not None:
                restored = sorted(self._committables.get() or [], key=lambda e: (e[0], e[1]))
                for _cid, _subtask, committables in restored:
                    self.committer.commit(committables)
            if restore is not None or c.attempt > 0:
                self.committer.abort_leftovers(self._writer_context)
        self._committables.update([])
        restored_writer = list(self._writer_state.get() or []) if restore is not None else []
        self.writer: SinkWriter = sink.create_writer(self._writer_context, restored_writer)

    def process_batch(self, records: list[Any]) -> None:
        self.writer.write_batch(records)

    def process_watermark(self, timestamp: int) -> None:
        self.writer.write_watermark(timestamp)
        super().process_watermark(timestamp)

    def next_timer_ms(self) -> int | None:
        return self.writer.next_flush_ms()

    def on_processing_time(self, now_ms: int) -> None:
        due = self.writer.next_flush_ms()
        if due is not None and due <= now_ms:
            self.writer.flush(False)

    def prepare_snapshot_pre_barrier(self, checkpoint_id: CheckpointId) -> None:
        self.writer.flush(False)
        if self.committer is not None:
            committables = self.writer.prepare_commit(checkpoint_id)
            if committables:
                self._pending[checkpoint_id] = list(committables)

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        self._writer_state.update(list(self.writer.snapshot_state(checkpoint_id)))
        index = self.ctx.subtask_index
        self._committables.update(
            [(cid, index, c) for cid, c in sorted(self._pending.items()) if cid <= checkpoint_id]
        )
        return super().snapshot_state(checkpoint_id, timestamp_ms, options)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        if self.committer is None:
            return
        for cid in sorted(k for k in self._pending if k <= checkpoint_id):
            self.committer.commit(self._pending.pop(cid))

    def finish(self) -> None:
        self.writer.flush(True)
        if self.committer is not None:
            committables = self.writer.prepare_commit(END_OF_INPUT_CHECKPOINT)
            # Without checkpoints this is the only commit; with them, only records emitted
            # after the final checkpoint (by timers) are left to commit here.
            if committables:
                self.committer.commit(committables)

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            if self.committer is not None:
                self.committer.close()


class CollectSinkOperator(StreamOperator):
    """``execute_and_collect()``: results reach the client once their checkpoint completed;
    without checkpointing as they come (a batch of ``FLUSH_SIZE`` records, or what arrived
    within ``FLUSH_DELAY_MS``, so a slow unbounded stream still shows its records). A job
    restored from a savepoint (or a retained checkpoint) sends its own results only, not
    the ones the savepoint's run delivered: a restored changelog goes on from where it was."""

    FLUSH_SIZE = 4096
    FLUSH_DELAY_MS = 100

    def initialize_state(self, restore: OperatorRestore | None) -> None:
        super().initialize_state(restore)
        self._state = self.ctx.operator_backend.get_union_list_state(
            ListStateDescriptor("_cairn_collect_pending", None)
        )
        self._buffer: list[Any] = []
        self._flush_due_ms: int | None = None  # without checkpointing, while buffered
        self._pending: dict[CheckpointId, list[Any]] = {}
        # After a failover the client may not have the restored checkpoint's results (its
        # notification can be lost): send them again, the job master drops what it has. A
        # first attempt restores another run's savepoint, whose client had them: not again.
        if restore is not None and self.ctx.subtask_index == 0 and self.ctx.attempt > 0:
            for subtask, cid, records in sorted(self._state.get() or [], key=lambda e: e[:2]):
                self._send(records, (subtask, cid, 0))
        self._state.update([])

    def _send(self, records: list[Any], dedup_key: tuple[int, int, int] | None) -> None:
        if not records:
            return
        self.ctx.services.send_to_master(
            CollectedResults(self.ctx.attempt, self.node.transformation_id, dedup_key, records)
        )

    def process_batch(self, records: list[Any]) -> None:
        self._buffer.extend(records)
        if self.ctx.checkpointing or not self._buffer:
            return
        if len(self._buffer) >= self.FLUSH_SIZE:
            self._flush_unchecked()
        elif self._flush_due_ms is None:
            self._flush_due_ms = self.ctx.clock_ms() + self.FLUSH_DELAY_MS

    def next_timer_ms(self) -> int | None:
        return self._flush_due_ms

    def on_processing_time(self, now_ms: int) -> None:
        if self._flush_due_ms is not None and now_ms >= self._flush_due_ms:
            self._flush_unchecked()

    def _flush_unchecked(self) -> None:
        self._send(self._buffer, None)
        self._buffer = []
        self._flush_due_ms = None

    def prepare_snapshot_pre_barrier(self, checkpoint_id: CheckpointId) -> None:
        if self._buffer:
            self._pending[checkpoint_id] = self._buffer
            self._buffer = []

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        index = self.ctx.subtask_index
        self._state.update(
            [
                (index, cid, recs)
                for cid, recs in sorted(self._pending.items())
                if cid <= checkpoint_id
            ]
        )
        return super().snapshot_state(checkpoint_id, timestamp_ms, options)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        for cid in sorted(k for k in self._pending if k <= checkpoint_id):
            self._send(self._pending.pop(cid), (self.ctx.subtask_index, cid, 0))

    def finish(self) -> None:
        self._send(self._buffer, None)
        self._buffer = []
