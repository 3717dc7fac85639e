"""A two-input task: each channel's batches reach the method of its logical input; barriers
are aligned over the channels of both inputs (exactly-once), only counted (at-least-once), or
overtake with the other input's in-flight data persisted (unaligned); the watermark is the
minimum of the two inputs, an idle input excluded."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.checkpoint.messages import TaskAcknowledgement, TaskKey
from cairn.datastream.functions import CoFlatMapFunction
from cairn.events import (
    IDLE,
    AlignmentMode,
    CheckpointBarrier,
    CheckpointOptions,
    Watermark,
)
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.graph.transformations import OperatorKind, OperatorSpec, PartitionKind
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.runtime.channel_state import read_channel_state
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators import create_operator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.task import StreamTask

from ._task_services import StubServices, operator_context, run_until_idle

ALIGNED = CheckpointOptions()
UNALIGNED = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)
# Channels 0 and 1 carry the first input, channel 2 the second.
SIDES = [0, 0, 1]


class Tag(CoFlatMapFunction):
    def flat_map1(self, value: Any) -> Any:
        yield ("one", value)

    def flat_map2(self, value: Any) -> Any:
        yield ("two", value)


def _task(
    alignment: AlignmentMode = AlignmentMode.ALIGNED,
) -> tuple[StreamTask, list[LocalOutputChannel], InputChannel, StubServices]:
    inputs = [InputChannel(i) for i in range(len(SIDES))]
    outs = [LocalOutputChannel(c, capacity=100) for c in inputs]
    downstream = InputChannel(99)
    writer = RecordWriter([LocalOutputChannel(downstream, capacity=100)], PartitionKind.FORWARD)
    spec = OperatorSpec(OperatorKind.CO_FLAT_MAP, Tag())
    node = OperatorNode("co", "Co-Flat Map", 1, spec.kind.value, spec, None, 1, 128, False)
    op = create_operator(node)
    services = StubServices()
    op.setup(operator_context(node, writer.emit, task_name="co", services=services))
    op.initialize_state(None)
    op.open()
    vertex = JobVertex(1, "co", 1, 128, (node,), False, True)
    task = StreamTask(
        TaskKey(VertexId(1), SubtaskIndex(0)),
        vertex,
        [op],
        InputGate(inputs),
        [writer],
        services,
        alignment,
        True,
        sides=SIDES,
    )
    return task, outs, downstream, services


def _records(downstream: InputChannel) -> list[Any]:
    return [r for e in downstream.queue if isinstance(e, list) for r in e]


def _acks(services: StubServices) -> list[TaskAcknowledgement]:
    return [m for m in services.sent if isinstance(m, TaskAcknowledgement)]


def test_each_channel_reaches_the_method_of_its_input() -> None:
    task, outs, downstream, _ = _task()
    outs[0].send_batch([1])
    outs[2].send_batch([2])
    outs[1].send_batch([3])
    run_until_idle(task, flush=True)
    assert sorted(_records(downstream)) == [("one", 1), ("one", 3), ("two", 2)]


def test_aligned_barriers_block_each_input_until_both_delivered_the_barrier() -> None:
    task, outs, downstream, services = _task()
    barrier = CheckpointBarrier(CheckpointId(1), 0, ALIGNED)
    for ch in (0, 1):
        outs[ch].send_event(barrier)
        outs[ch].send_batch([f"after-{ch}"])
    outs[2].send_batch(["before"])
    run_until_idle(task, flush=True)
    # The first input delivered its barriers: its later records wait; the second's flow.
    assert _records(downstream) == [("two", "before")]
    assert _acks(services) == []
    outs[2].send_event(barrier)
    outs[2].send_batch(["after-2"])
    run_until_idle(task, flush=True)
    (ack,) = _acks(services)
    assert ack.checkpoint_id == 1
    queue = list(downstream.queue)
    forwarded = queue.index(barrier)
    assert queue.count(barrier) == 1
    before = [r for e in queue[:forwarded] if isinstance(e, list) for r in e]
    after = [r for e in queue[forwarded:] if isinstance(e, list) for r in e]
    assert before == [("two", "before")]
    assert sorted(after) == [("one", "after-0"), ("one", "after-1"), ("two", "after-2")]


def test_at_least_once_counts_barriers_of_both_inputs_without_blocking() -> None:
    task, outs, downstream, services = _task(AlignmentMode.AT_LEAST_ONCE)
    barrier = CheckpointBarrier(CheckpointId(1), 0, ALIGNED)
    outs[0].send_event(barrier)
    outs[0].send_batch(["late-0"])
    run_until_idle(task, flush=True)
    assert _records(downstream) == [("one", "late-0")], "nothing is blocked"
    assert _acks(services) == []
    outs[1].send_event(barrier)
    outs[2].send_event(barrier)
    run_until_idle(task, flush=True)
    assert [a.checkpoint_id for a in _acks(services)] == [1]


def test_an_unaligned_barrier_of_one_input_persists_the_other_inputs_in_flight_data() -> None:
    task, outs, _, services = _task(AlignmentMode.UNALIGNED)
    barrier = CheckpointBarrier(CheckpointId(1), 0, UNALIGNED)
    outs[2].send_batch(["overtaken"])
    outs[2].send_event(barrier)
    outs[0].send_batch(["in-flight-0"])
    outs[0].send_event(barrier)
    outs[1].send_event(barrier)
    run_until_idle(task, flush=True)
    (ack,) = _acks(services)
    handle = ack.states["co"].input_channels
    assert handle is not None
    persisted = read_channel_state(services.files[1], handle)
    assert persisted == {0: [["in-flight-0"]], 2: [["overtaken"]]}


def test_the_watermark_is_the_minimum_of_both_inputs_and_an_idle_input_is_skipped() -> None:
    task, outs, downstream, _ = _task()
    outs[0].send_event(Watermark(30))
    outs[1].send_event(Watermark(40))
    outs[2].send_batch(stamp(["x"], [5]))
    outs[2].send_event(Watermark(10))
    run_until_idle(task, flush=True)
    assert [e for e in downstream.queue if isinstance(e, Watermark)] == [Watermark(10)]
    assert downstream.queue[0].timestamps == [5], "outputs keep their input's timestamp"
    outs[2].send_event(IDLE)
    run_until_idle(task, flush=True)
    assert [e for e in downstream.queue if isinstance(e, Watermark)][-1] == Watermark(30)


def test_a_two_input_head_without_the_sides_of_its_channels_is_refused() -> None:
    with pytest.raises(ValueError, match="logical input of each of its 3 channels"):
        global SIDES
        saved, SIDES = SIDES, [0, 0, 0]
        try:
            _task()
        finally:
            SIDES = saved
