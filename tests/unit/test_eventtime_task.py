"""Watermarks and timestamps in the data plane: through a task's valve and chain, through
record writers and the wire, in unaligned checkpoints' in-flight data, at end of input."""

from __future__ import annotations

import pickle
from typing import Any

from cairn.checkpoint.messages import TaskAcknowledgement, TaskKey
from cairn.common import WatermarkStrategy
from cairn.datastream.connectors.number_seq import NumberSequenceSource
from cairn.events import (
    ACTIVE,
    IDLE,
    MAX_WATERMARK,
    AlignmentMode,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    EndOfPartition,
    Watermark,
)
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.graph.transformations import PartitionKind
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.runtime.channel_state import read_channel_state
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.eventtime.stamped import StampedBatch, stamp
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators import create_operator
from cairn.runtime.operators.base import OperatorSnapshot, StreamOperator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.reports import SourceExhausted
from cairn.runtime.task import StreamTask

from ._task_services import StubServices, operator_context, run_until_idle

UNALIGNED = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)


class _Collect(StreamOperator):
    """Remembers records (with timestamps) and watermarks in arrival order."""

    def __init__(self) -> None:
        super().__init__(OperatorNode("collect", "collect", 1, "map", None, None, 1, 128, False))
        self.seen: list[Any] = []
        self.batches = 0

    def process_batch(self, records: list[Any]) -> None:
        self.batches += 1
        stamps = records.timestamps if type(records) is StampedBatch else [None] * len(records)
        self.seen.extend(zip(records, stamps, strict=True))
        self.output(records)

    def process_watermark(self, timestamp: int) -> None:
        self.seen.append(Watermark(timestamp))
        super().process_watermark(timestamp)

    def snapshot_state(
        self, checkpoint_id: int, timestamp_ms: int, options: object = None
    ) -> OperatorSnapshot:
        return OperatorSnapshot(keyed=None, operator=None, inline={})


def _task(
    channels: int, alignment: AlignmentMode = AlignmentMode.ALIGNED
) -> tuple[StreamTask, _Collect, list[LocalOutputChannel], InputChannel, StubServices]:
    inputs = [InputChannel(i) for i in range(channels)]
    outs = [LocalOutputChannel(c, capacity=100) for c in inputs]
    downstream = InputChannel(99)
    writer = RecordWriter([LocalOutputChannel(downstream, capacity=100)], PartitionKind.FORWARD)
    op = _Collect()
    op.output = writer.emit
    vertex = JobVertex(1, "collect", 1, 128, (op.node,), False, True)
    services = StubServices()
    task = StreamTask(
        TaskKey(VertexId(1), SubtaskIndex(0)),
        vertex,
        [op],
        InputGate(inputs),
        [writer],
        services,
        alignment,
        True,
    )
    return task, op, outs, downstream, services


def test_a_task_passes_on_the_minimum_watermark_of_its_channels_behind_its_records() -> None:
    task, op, outs, downstream, _ = _task(2)
    outs[0].send_batch(stamp(["a"], [10]))
    outs[0].send_event(Watermark(10))
    outs[1].send_event(Watermark(4))
    outs[1].send_batch(stamp(["b"], [6]))
    outs[1].send_event(Watermark(20))
    run_until_idle(task)
    assert op.seen == [("a", 10), Watermark(4), ("b", 6), Watermark(10)]
    assert list(downstream.queue) == [["a"], Watermark(4), ["b"], Watermark(10)]
    assert downstream.queue[0].timestamps == [10], "timestamps cross the channel"


def test_an_idle_channel_is_skipped_and_idleness_is_passed_on_when_all_are_idle() -> None:
    task, op, outs, downstream, _ = _task(2)
    outs[0].send_event(Watermark(50))
    outs[1].send_event(IDLE)
    run_until_idle(task)
    assert op.seen == [Watermark(50)]
    outs[0].send_event(IDLE)
    outs[1].send_event(ACTIVE)
    run_until_idle(task)
    assert list(downstream.queue) == [Watermark(50), IDLE, ACTIVE]


def test_end_of_input_fires_the_final_watermark_before_the_operators_finish() -> None:
    task, op, outs, downstream, _ = _task(2)
    outs[0].send_event(Watermark(5))
    outs[1].send_event(Watermark(7))
    outs[0].send_event(EndOfPartition())
    outs[1].send_event(EndOfPartition())
    run_until_idle(task)
    assert op.seen == [Watermark(5), Watermark(7), Watermark(MAX_WATERMARK)]
    assert task.finished
    assert list(downstream.queue)[-2:] == [Watermark(MAX_WATERMARK), EndOfPartition()]


def test_watermarks_in_overtaken_in_flight_data_are_persisted_and_replayed_in_place() -> None:
    task, _, outs, _, services = _task(1, AlignmentMode.UNALIGNED)
    outs[0].send_batch(stamp(["a1"], [1]))
    outs[0].send_event(Watermark(1))
    outs[0].send_batch(stamp(["a2"], [2]))
    outs[0].send_event(CheckpointBarrier(CheckpointId(1), 0, UNALIGNED))
    run_until_idle(task)
    (ack,) = [m for m in services.sent if isinstance(m, TaskAcknowledgement)]
    handle = ack.states["collect"].input_channels
    assert handle is not None
    (persisted,) = read_channel_state(services.files[1], handle).values()
    assert persisted == [["a1"], Watermark(1), ["a2"]]
    assert persisted[0].timestamps == [1], "in-flight records keep their timestamps"
    # Replayed into a fresh task: records and the watermark come back in their order.
    task2, op2, _, _, _ = _task(1, AlignmentMode.UNALIGNED)
    assert task2.gate is not None
    task2.gate.replay(0, persisted)
    run_until_idle(task2)
    assert op2.seen == [("a1", 1), Watermark(1), ("a2", 2)]


def test_record_writer_keeps_timestamps_with_their_records_on_every_partitioner() -> None:
    for kind in (
        PartitionKind.HASH,
        PartitionKind.REBALANCE,
        PartitionKind.BROADCAST,
        PartitionKind.SHUFFLE,
    ):
        targets = [InputChannel(i) for i in range(3)]
        writer = RecordWriter(
            [LocalOutputChannel(t, capacity=100) for t in targets],
            kind,
            key_selector=lambda r: r % 5,
            batch_size=4,
        )
        writer.emit(list(range(3)))  # plain records first: they get no timestamp
        writer.emit(stamp(list(range(3, 20)), [r * 10 for r in range(3, 20)]))
        writer.flush_all()
        received = [b for t in targets for b in t.queue]
        assert all(type(b) is StampedBatch for b in received), kind
        pairs = sorted(
            set((r, ts) for b in received for r, ts in zip(b, b.timestamps, strict=True))
        )
        assert pairs == [(r, None) for r in range(3)] + [(r, r * 10) for r in range(3, 20)]


def test_a_plain_job_never_builds_a_stamped_batch() -> None:
    target = InputChannel(0)
    writer = RecordWriter(
        [LocalOutputChannel(target, capacity=100)],
        PartitionKind.HASH,
        key_selector=lambda r: r,
        batch_size=2,
    )
    writer.emit([1, 2, 3])
    writer.flush_all()
    assert [type(b) for b in target.queue] == [list]


def test_a_stamped_batch_crosses_the_wire_with_its_timestamps() -> None:
    batch = pickle.loads(pickle.dumps(stamp([("k", 1)], [99]), protocol=5))
    assert type(batch) is StampedBatch and batch.timestamps == [99]


def test_a_sliced_stamped_batch_keeps_timestamps_for_the_rest_put_back() -> None:
    task, op, outs, _, _ = _task(1, AlignmentMode.UNALIGNED)
    task._slices.records = 2  # type: ignore[attr-defined]
    outs[0].send_batch(stamp(["a", "b", "c"], [1, 2, 3]))
    run_until_idle(task)
    assert op.batches == 2, "processed in two slices, the rest put back as a HeldBatch"
    assert op.seen == [("a", 1), ("b", 2), ("c", 3)]


def _number_source_task(end: int) -> tuple[StreamTask, InputChannel, StubServices]:
    """A source task of ``NumberSequenceSource(1, end)`` (no watermarks but the final one)."""
    node = OperatorNode(
        "src",
        "src",
        1,
        "source",
        None,
        NumberSequenceSource(1, end),
        1,
        128,
        False,
        WatermarkStrategy.no_watermarks(),
    )
    src = create_operator(node)
    downstream = InputChannel(0)
    writer = RecordWriter([LocalOutputChannel(downstream, capacity=100)], PartitionKind.FORWARD)
    services = StubServices()
    src.setup(operator_context(node, writer.emit, task_name="src", services=services))
    vertex = JobVertex(0, "src", 1, 128, (node,), True, True)
    task = StreamTask(
        TaskKey(VertexId(0), SubtaskIndex(0)),
        vertex,
        [src],
        None,
        [writer],
        services,
        AlignmentMode.ALIGNED,
        True,
    )
    src.initialize_state(None)
    src.open()
    return task, downstream, services


def test_a_source_task_sends_the_final_watermark_before_it_reports_the_end() -> None:
    task, downstream, services = _number_source_task(3)
    run_until_idle(task)
    assert list(downstream.queue) == [[1, 2, 3], Watermark(MAX_WATERMARK)]
    assert any(isinstance(m, SourceExhausted) for m in services.sent)


def test_a_drained_stop_sends_the_final_watermark_ahead_of_its_barrier() -> None:
    """Stop-with-savepoint with drain (Flink's ``--drain``): ``MAX_WATERMARK`` goes out
    behind the records and ahead of the savepoint's barrier, so every downstream timer fires
    before the savepoint; without drain no watermark precedes the barrier. Either way the
    source reads nothing after the barrier."""
    for drain in (False, True):
        task, downstream, _ = _number_source_task(1 << 20)
        assert task.run_once()
        options = CheckpointOptions(CheckpointType.SAVEPOINT, terminate=True, drain=drain)
        barrier = CheckpointBarrier(CheckpointId(1), 0, options)
        task.trigger_source_checkpoint(barrier)
        assert not task.run_once() and task.source_suspended
        final = [Watermark(MAX_WATERMARK)] if drain else []
        assert type(downstream.queue[0]) is list, "the records come first"
        assert [e for e in downstream.queue if type(e) is not list] == [*final, barrier]
