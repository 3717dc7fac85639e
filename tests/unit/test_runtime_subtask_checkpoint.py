"""The task's checkpointing side (``SubtaskCheckpointCoordinator``) behind a real
``StreamTask``: one decline path for every asynchronous failure, the task's typed seams, and
the injected clock driving alignment timeouts."""

from __future__ import annotations

from typing import Any

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.messages import TaskAcknowledgement, TaskDecline, TaskKey
from cairn.clock import ManualClock
from cairn.events import AlignmentMode, CheckpointBarrier, CheckpointOptions
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.runtime.barriers.api import UnalignedBarrierHandlerActions
from cairn.runtime.channel_state import read_channel_state
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators.base import OperatorSnapshot, StreamOperator
from cairn.runtime.task import StreamTask
from cairn.testing.simple_state_files import MemoryStateFiles

from ._task_services import StubServices, run_until_idle

UNALIGNED = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)


class _Inline(StreamOperator):
    """Keeps what it processed; its snapshot is inline (it never writes a file)."""

    def __init__(self) -> None:
        super().__init__(OperatorNode("op", "op", 1, "map", None, None, 1, 128, False))
        self.seen: list[Any] = []
        self.clock: ManualClock | None = None

    def process_batch(self, records: list[Any]) -> None:
        self.seen.extend(records)
        if self.clock is not None:
            self.clock.advance(60)

    def snapshot_state(
        self, checkpoint_id: int, timestamp_ms: int, options: object = None
    ) -> OperatorSnapshot:
        return OperatorSnapshot(keyed=None, operator=None, inline={"seen": list(self.seen)})


class _BrokenFiles(MemoryStateFiles):
    def write_state_file(self, name: str, data: bytes) -> str:
        raise OSError("no space left on device")


class _BrokenStorage(StubServices):
    def state_writer(self, checkpoint_id: int) -> MemoryStateFiles:
        return _BrokenFiles(checkpoint_id)


def _task(
    services: StubServices, alignment: AlignmentMode, clock: ManualClock | None = None
) -> tuple[StreamTask, list[LocalOutputChannel]]:
    targets = [InputChannel(0), InputChannel(1)]
    op = _Inline()
    vertex = JobVertex(1, "op", 1, 128, (op.node,), False, True)
    key = TaskKey(VertexId(1), SubtaskIndex(0))
    gate = InputGate(targets)
    task = StreamTask(key, vertex, [op], gate, [], services, alignment, True, clock=clock)
    return task, [LocalOutputChannel(t, capacity=10) for t in targets]


def test_the_coordinator_is_the_handlers_typed_actions() -> None:
    task, _ = _task(StubServices(), AlignmentMode.UNALIGNED)
    assert isinstance(task.checkpoints, UnalignedBarrierHandlerActions)


def test_a_failed_channel_state_write_declines_like_a_failed_snapshot_and_never_acks() -> None:
    services = _BrokenStorage()
    task, outs = _task(services, AlignmentMode.UNALIGNED)
    outs[0].send_event(CheckpointBarrier(CheckpointId(1), 0, UNALIGNED))
    outs[1].send_batch(["in flight"])
    outs[1].send_event(CheckpointBarrier(CheckpointId(1), 0, UNALIGNED))
    run_until_idle(task)
    assert not [m for m in services.sent if isinstance(m, TaskAcknowledgement)]
    (decline,) = [m for m in services.sent if isinstance(m, TaskDecline)]
    assert decline.reason is CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION
    assert "OSError: no space left on device" in decline.message


def test_the_injected_clock_times_out_the_alignment_and_the_barrier_overtakes() -> None:
    clock = ManualClock(1_000)
    services = StubServices()
    # Unaligned checkpoints enabled: each barrier's options decide (here: aligned, 100 ms).
    task, outs = _task(services, AlignmentMode.UNALIGNED, clock)
    op = task.head
    assert isinstance(op, _Inline)
    op.clock = clock  # each batch takes 60 ms of the task's clock
    timed = CheckpointBarrier(CheckpointId(1), 1_000, CheckpointOptions(aligned_timeout_ms=100))
    outs[0].send_event(timed)
    for i in range(10):
        outs[1].send_batch([f"b{i}"])
    outs[1].send_event(timed)
    task.run_once()  # barrier 1 of channel 0, then 7 batches of channel 1 (8 polls a run)
    assert op.seen == [f"b{i}" for i in range(7)] and clock.now_ms() == 1_420
    assert task.next_timer_ms() == 1_100, "the alignment timeout, on the task's clock"
    run_until_idle(task)  # timed out: unaligned, channel 1's barrier overtakes b7..b9
    (ack,) = [m for m in services.sent if isinstance(m, TaskAcknowledgement)]
    assert ack.metrics.unaligned and ack.states["op"].inline_value("seen") == op.seen[:7]
    handle = ack.states["op"].input_channels
    assert handle is not None
    assert read_channel_state(services.files[1], handle) == {1: [["b7"], ["b8"], ["b9"]]}
    assert op.seen == [f"b{i}" for i in range(10)]
