"""The writers of a sink with a global committer (``Sink.global_committer``), as an operator.

Invariant: everything a writer prepared at a checkpoint barrier is emitted downstream before
the barrier is forwarded (``prepare_snapshot_pre_barrier``), so the one committer subtask
receives a checkpoint's committables ahead of (or, unaligned, with) that checkpoint's
barrier; what a writer prepares at the end of its input is emitted before it finishes.
The writer's own state (``snapshot_state``) is kept as in ``SinkOperator``.
"""

from __future__ import annotations

from typing import Any

from cairn.api.connectors import SinkWriter, SinkWriterContext
from cairn.api.state import ListStateDescriptor
from cairn.events import DEFAULT_CHECKPOINT_OPTIONS, CheckpointOptions
from cairn.ids import CheckpointId
from cairn.runtime.operators.base import OperatorRestore, OperatorSnapshot, StreamOperator
from cairn.runtime.operators.sinks import END_OF_INPUT_CHECKPOINT

__all__ = ["SinkWriterOperator"]


class SinkWriterOperator(StreamOperator):
    """``sink_to(sink)`` of a sink with a global committer: the writer part (Flink's
    ``SinkWriterOperator`` emitting committables)."""

    def initialize_state(self, restore: OperatorRestore | None) -> None:
        super().initialize_state(restore)
        assert self.node.spec is not None
        sink = self.node.spec.function
        self._writer_state = self.ctx.operator_backend.get_list_state(
            ListStateDescriptor("_cairn_sink_writer", None)
        )
        c = self.ctx
        context = SinkWriterContext(c.subtask_index, c.parallelism, c.attempt, c.job_id)
        restored = list(self._writer_state.get() or []) if restore is not None else []
        self.writer: SinkWriter = sink.create_writer(context, restored)

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

    def _emit(self, checkpoint_id: CheckpointId) -> None:
        committables = self.writer.prepare_commit(checkpoint_id)
        if committables:
            self.output(list(committables))

    def prepare_snapshot_pre_barrier(self, checkpoint_id: CheckpointId) -> None:
        self.writer.flush(False)
        self._emit(checkpoint_id)

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        self._writer_state.update(list(self.writer.snapshot_state(checkpoint_id)))
        return super().snapshot_state(checkpoint_id, timestamp_ms, options)

    def finish(self) -> None:
        self.writer.flush(True)
        self._emit(END_OF_INPUT_CHECKPOINT)

    def close(self) -> None:
        self.writer.close()
