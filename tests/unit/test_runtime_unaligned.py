"""Unaligned checkpoints in the data plane: priority barriers, channel state, replay.

Scripted sequences of batches and barriers through real channels, gates and a real
``StreamTask`` (its services are the seam a worker implements; snapshots run inline).
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import pytest

from cairn.checkpoint.handles import OperatorSubtaskState
from cairn.checkpoint.messages import (
    SubtaskCheckpointMetrics,
    TaskAcknowledgement,
    TaskDecline,
    TaskKey,
)
from cairn.events import (
    AlignmentMode,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    EndOfPartition,
    is_priority_event,
)
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.runtime.channel_state import (
    ChannelStateRecorder,
    HeldBatch,
    channel_state_for_subtask,
    read_channel_state,
)
from cairn.runtime.channels import (
    InputChannel,
    LocalOutputChannel,
)
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators.base import OperatorSnapshot, StreamOperator
from cairn.runtime.task import StreamTask
from cairn.runtime.unaligned_ack import SliceBudget, UnalignedAcknowledgement
from cairn.state.errors import CorruptStateError
from cairn.testing.processes import wait_for
from cairn.testing.simple_state_files import MemoryStateFiles

from ._remote_channel import RemoteChannel, take_batches
from ._task_services import StubServices, run_until_idle

UNALIGNED = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)


def unaligned(cid: int, ts: int = 0) -> CheckpointBarrier:
    return CheckpointBarrier(CheckpointId(cid), ts, UNALIGNED)


def with_timeout(cid: int, timeout_ms: int, ts: int) -> CheckpointBarrier:
    options = CheckpointOptions(aligned_timeout_ms=timeout_ms)
    return CheckpointBarrier(CheckpointId(cid), ts, options)


# ----------------------------------------------------------------- channels and the gate


def test_priority_events_are_unaligned_or_timeout_barriers_but_never_savepoints() -> None:
    assert is_priority_event(unaligned(1))
    assert is_priority_event(with_timeout(1, 100, 0))
    assert not is_priority_event(CheckpointBarrier(CheckpointId(1), 0))
    savepoint = CheckpointOptions(CheckpointType.SAVEPOINT, AlignmentMode.UNALIGNED)
    assert not is_priority_event(CheckpointBarrier(CheckpointId(1), 0, savepoint))
    assert not is_priority_event(EndOfPartition())


def test_priority_barrier_is_announced_with_its_position_and_overtakes_queued_batches() -> None:
    ch = InputChannel(0)
    out = LocalOutputChannel(ch, capacity=10)
    gate = InputGate([ch])
    out.send_batch([1, 2])
    out.send_batch([3])
    out.send_event(unaligned(5))
    out.send_batch([4])
    assert list(ch.queue) == [[1, 2], [3], [4]], "the barrier is not queued behind data"
    assert gate.signal.raised
    assert gate.pending_announcements() == [(0, unaligned(5))]
    assert not gate.signal.raised
    assert gate.poll() == (0, [1, 2])  # consumed one of the two batches in front
    barrier, overtaken = gate.overtake(0)
    assert barrier == unaligned(5)
    assert overtaken == [[3]], "only what was sent before the barrier and not yet taken"
    assert [gate.poll(), gate.poll(), gate.poll()] == [(0, [3]), (0, [4]), None]


def test_announced_barrier_not_overtaken_is_delivered_exactly_at_its_position() -> None:
    ch = InputChannel(0)
    out = LocalOutputChannel(ch, capacity=10)
    gate = InputGate([ch])
    out.send_batch(["a"])
    out.send_event(with_timeout(1, 1000, 0))
    out.send_batch(["b"])
    assert gate.poll() == (0, ["a"])
    assert gate.poll() == (0, with_timeout(1, 1000, 0))
    assert gate.poll() == (0, ["b"])


def test_overtaken_prefix_skips_events_and_keeps_held_batches() -> None:
    ch = InputChannel(0)
    out = LocalOutputChannel(ch, capacity=10)
    gate = InputGate([ch])
    out.send_batch([1, 2, 3])
    out.send_event(EndOfPartition())  # an in-order event in front (never a real case for EOP)
    out.send_event(unaligned(2))
    polled = gate.poll()
    assert polled is not None
    first = polled[1]
    gate.put_back(0, HeldBatch(first[1:]))
    _, overtaken = gate.overtake(0)
    assert len(overtaken) == 1 and isinstance(overtaken[0], HeldBatch)
    assert overtaken[0].records == [2, 3]


def test_replayed_batches_come_before_new_input_and_keep_positions_right() -> None:
    ch = InputChannel(0)
    out = LocalOutputChannel(ch, capacity=10)
    out.send_batch(["new"])
    out.send_event(unaligned(7))  # position 1: behind "new" only
    gate = InputGate([ch])
    gate.replay(0, [["old1"], ["old2"]])
    _, overtaken = gate.overtake(0)
    assert [e.records if isinstance(e, HeldBatch) else e for e in overtaken] == [
        ["old1"],
        ["old2"],
        ["new"],
    ], "replayed in-flight data precedes everything that arrived after the restore"
    polled = [gate.poll() for _ in range(3)]
    assert [p[1].records if isinstance(p[1], HeldBatch) else p[1] for p in polled if p] == [
        ["old1"],
        ["old2"],
        ["new"],
    ]
    assert polled[0] is not None and polled[0][1].replayed


def test_gate_records_batches_of_recording_channels_only() -> None:
    chans = [InputChannel(0), InputChannel(1)]
    outs = [LocalOutputChannel(c, capacity=10) for c in chans]
    gate = InputGate(chans)
    recorder = ChannelStateRecorder(3, 2, {1})
    gate.recorder = recorder
    outs[0].send_batch([0])
    outs[1].send_batch([10])
    outs[1].send_event(CheckpointBarrier(CheckpointId(9), 0))  # events are never recorded
    while gate.poll() is not None:
        pass
    assert recorder.num_batches == 1
    written = recorder.write(MemoryStateFiles(3), "channels")
    assert written is not None


# -------------------------------------------------------------- recorder, files, restore


def test_channel_state_round_trips_in_channel_order_and_held_batches_are_not_doubled() -> None:
    files = MemoryStateFiles(4)
    rec = ChannelStateRecorder(4, 3, {0, 2})
    rec.add(2, [("k", 1)])
    rec.add(0, pickle.dumps([("j", 1)], protocol=5))  # a remote batch as it came off the wire
    rec.add(2, HeldBatch([("k", 2)]))
    rec.add(2, HeldBatch([("k", 3)], recorded_for=4))  # already recorded when first taken
    handle = rec.write(files, "channels op 0")
    assert handle is not None and handle.num_channels == 3
    assert handle.size == rec.persisted_bytes > 0
    assert read_channel_state(files, handle) == {0: [[("j", 1)]], 2: [[("k", 1)], [("k", 2)]]}
    assert ChannelStateRecorder(5, 1, set()).write(files, "empty") is None


def test_corrupt_channel_state_is_reported_not_replayed() -> None:
    files = MemoryStateFiles(1)
    rec = ChannelStateRecorder(1, 1, {0})
    rec.add(0, list(range(100)))
    handle = rec.write(files, "channels")
    assert handle is not None
    r = handle.buffers[0][0]
    files.files[handle.path] = files.files[handle.path][: r.offset] + b"X" * r.length
    with pytest.raises(CorruptStateError, match="CRC-32"):
        read_channel_state(files, handle)


def test_channel_state_restores_only_at_the_same_parallelism_and_gate_width() -> None:
    rec = ChannelStateRecorder(1, 2, {0})
    rec.add(0, [1])
    handle = rec.write(MemoryStateFiles(1), "c")
    assert channel_state_for_subtask({0: handle, 1: None}, 2, 2, 0, 2, "map") is handle
    assert channel_state_for_subtask({0: handle, 1: None}, 2, 2, 1, 2, "map") is None
    with pytest.raises(ValueError, match="savepoint"):
        channel_state_for_subtask({0: handle}, 2, 3, 0, 2, "map")
    with pytest.raises(ValueError, match="input channels"):
        channel_state_for_subtask({0: handle}, 2, 2, 0, 3, "map")


def test_unaligned_acknowledgement_waits_for_both_parts_and_cancel_silences_it() -> None:
    sent: list[TaskAcknowledgement] = []
    key = TaskKey(VertexId(1), SubtaskIndex(0))
    ack = UnalignedAcknowledgement(CheckpointId(2), key, "op", sent.append)
    rec = ChannelStateRecorder(2, 1, {0})
    rec.add(0, [1, 2, 3])
    handle = rec.write(MemoryStateFiles(2), "c")
    ack.channels_done(handle)
    assert sent == []
    ack.operators_done({"op": OperatorSubtaskState()}, SubtaskCheckpointMetrics(state_size=5))
    assert len(sent) == 1
    assert sent[0].states["op"].input_channels == handle
    assert sent[0].metrics.persisted_bytes == handle.size and sent[0].metrics.unaligned
    cancelled = UnalignedAcknowledgement(CheckpointId(3), key, "op", sent.append)
    cancelled.cancel()
    cancelled.operators_done({}, SubtaskCheckpointMetrics())
    cancelled.channels_done(None)
    assert len(sent) == 1


def test_slice_budget_follows_the_measured_cost_per_record() -> None:
    budget = SliceBudget(budget_s=0.005)
    assert budget.records == 64
    budget.learn(100, 0.1)  # 1 ms per record
    assert budget.records == 5
    for _ in range(20):
        budget.learn(1000, 0.001)  # 1 us per record
    assert budget.records > 1000


# ------------------------------------------------------------------ remote channels


def test_remote_data_in_front_of_a_priority_barrier_goes_without_credit() -> None:
    with RemoteChannel(3, initial_credits=1, max_backlog=100) as remote:
        channel, ch = remote.channel, remote.input
        for i in range(4):
            channel.send_batch([i])
        channel.send_event(unaligned(1))
        channel.send_batch([99])  # behind the barrier: needs credit again
        remote.wait(lambda: ch.announced, "the barrier's announcement")
        assert ch.announced and ch.announced[0][0] == 4, "all four batches arrived before it"
        remote.holds(
            lambda: len(ch.queue) == 4, 0.1, "the batch behind the barrier waits for credit"
        )
        gate = InputGate([ch])
        _, overtaken = gate.overtake(0)
        assert [pickle.loads(b) for b in overtaken] == [[0], [1], [2], [3]]
        got = [batch[0] for batch in take_batches(remote, gate, 5)]
        assert got == [0, 1, 2, 3, 99], "credits returned for consumed batches free the rest"
        assert not remote.errors


# ---------------------------------------------------------------- a real StreamTask


_Services = StubServices


class _Collect(StreamOperator):
    """Remembers processed records; its snapshot is the list so far (inline)."""

    def __init__(self, cost_s: float = 0.0) -> None:
        node = OperatorNode("collect", "collect", 1, "map", None, None, 1, 128, False)
        super().__init__(node)
        self.seen: list[Any] = []
        self.cost_s = cost_s

    def process_batch(self, records: list[Any]) -> None:
        if self.cost_s:
            time.sleep(self.cost_s * len(records))
        self.seen.extend(records)

    def snapshot_state(
        self, checkpoint_id: int, timestamp_ms: int, options: object = None
    ) -> OperatorSnapshot:
        return OperatorSnapshot(keyed=None, operator=None, inline={"seen": list(self.seen)})


def _task(channels: int, op: _Collect) -> tuple[StreamTask, list[LocalOutputChannel], _Services]:
    inputs = [InputChannel(i) for i in range(channels)]
    outs = [LocalOutputChannel(c, capacity=100) for c in inputs]
    vertex = JobVertex(1, "collect", 1, 128, (op.node,), False, True)
    services = _Services()
    task = StreamTask(
        TaskKey(VertexId(1), SubtaskIndex(0)),
        vertex,
        [op],
        InputGate(inputs),
        [],
        services,
        AlignmentMode.UNALIGNED,
        True,
    )
    return task, outs, services


def _acks(services: _Services) -> list[TaskAcknowledgement]:
    return [m for m in services.sent if isinstance(m, TaskAcknowledgement)]


def _replayed(services: _Services, ack: TaskAcknowledgement) -> dict[int, list[list[Any]]]:
    handle = ack.states["collect"].input_channels
    if handle is None:
        return {}
    return read_channel_state(services.files[int(ack.checkpoint_id)], handle)


def test_task_snapshot_plus_channel_state_equals_everything_sent_before_the_barriers() -> None:
    op = _Collect()
    task, outs, services = _task(2, op)
    outs[0].send_batch(["a1"])
    outs[1].send_batch(["b1"])
    task.run_once()
    outs[0].send_batch(["a2"])
    outs[0].send_event(unaligned(1))
    outs[0].send_batch(["a3"])  # after the barrier: not part of checkpoint 1
    outs[1].send_batch(["b2"])  # channel 1: before its barrier, recorded when consumed
    task.run_once()
    outs[1].send_batch(["b3"])
    outs[1].send_event(unaligned(1))
    outs[1].send_batch(["b4"])
    run_until_idle(task)
    (ack,) = _acks(services)
    assert ack.metrics.unaligned and ack.metrics.persisted_bytes > 0
    snapshot_seen = ack.states["collect"].inline_value("seen")
    assert snapshot_seen == ["a1", "b1"]
    assert _replayed(services, ack) == {0: [["a2"]], 1: [["b2"], ["b3"]]}
    assert sorted(op.seen) == ["a1", "a2", "a3", "b1", "b2", "b3", "b4"]


def test_a_newer_barrier_during_an_unaligned_checkpoint_aborts_it_and_takes_over() -> None:
    op = _Collect()
    task, outs, services = _task(2, op)
    outs[0].send_batch(["a1"])
    outs[0].send_event(unaligned(1))
    task.run_once()
    outs[0].send_event(unaligned(2))  # channel 1 never delivered barrier 1
    outs[1].send_batch(["b1"])
    outs[1].send_event(unaligned(2))
    run_until_idle(task)
    declines = [m for m in services.sent if isinstance(m, TaskDecline)]
    assert [int(d.checkpoint_id) for d in declines] == [1]
    (ack,) = _acks(services)
    assert int(ack.checkpoint_id) == 2
    assert sorted(op.seen) == ["a1", "b1"]


def test_end_of_input_completes_the_recording_of_a_finished_channel() -> None:
    op = _Collect()
    task, outs, services = _task(2, op)
    outs[0].send_event(unaligned(1))
    outs[1].send_batch(["b1"])
    outs[1].send_event(EndOfPartition())
    outs[0].send_event(EndOfPartition())
    run_until_idle(task)
    (ack,) = _acks(services)
    assert _replayed(services, ack) == {1: [["b1"]]}
    assert task.finished


def test_barrier_overtakes_the_rest_of_a_slow_batch_being_processed() -> None:
    op = _Collect(cost_s=0.002)
    task, outs, services = _task(1, op)
    outs[0].send_batch(list(range(200)))
    task.run_once()  # processes the first slice only (the budget is learned per record)
    outs[0].send_event(unaligned(1))
    task.run_once()
    (ack,) = _acks(services)
    seen_at_snapshot = ack.states["collect"].inline_value("seen")
    replayed = [r for batch in _replayed(services, ack).get(0, []) for r in batch]
    assert 0 < len(seen_at_snapshot) < 200
    assert seen_at_snapshot + replayed == list(range(200)), "nothing lost, nothing twice"
    run_until_idle(task)
    assert op.seen == list(range(200))


def test_aligned_barrier_with_timeout_turns_unaligned_when_alignment_takes_too_long() -> None:
    op = _Collect(cost_s=0.002)
    task, outs, services = _task(2, op)
    now = int(time.time() * 1000)
    outs[0].send_event(with_timeout(1, 50, now))  # channel 0 aligns at once
    outs[1].send_batch(list(range(100)))  # ~200 ms of work in front of channel 1's barrier
    outs[1].send_event(with_timeout(1, 50, now))

    def acknowledged() -> bool:
        task.run_once()
        return bool(_acks(services))

    wait_for(acknowledged, 5, 0, "the task's acknowledgement")
    (ack,) = _acks(services)
    assert ack.metrics.unaligned, "alignment outlived the 50 ms timeout"
    seen_at_snapshot = ack.states["collect"].inline_value("seen")
    replayed = [r for batch in _replayed(services, ack).get(1, []) for r in batch]
    assert replayed, "the barrier overtook the rest of the slow batch"
    assert seen_at_snapshot + replayed == list(range(100))
    assert ack.metrics.sync_duration_ms < 200


def test_aligned_barrier_with_timeout_stays_aligned_when_alignment_is_quick() -> None:
    op = _Collect()
    task, outs, services = _task(2, op)
    now = int(time.time() * 1000)
    outs[0].send_event(with_timeout(1, 10_000, now))
    outs[1].send_batch(["b1"])
    outs[1].send_event(with_timeout(1, 10_000, now))
    run_until_idle(task)
    (ack,) = _acks(services)
    assert not ack.metrics.unaligned and ack.metrics.persisted_bytes == 0
    assert ack.states["collect"].input_channels is None
    assert ack.states["collect"].inline_value("seen") == ["b1"]


def test_in_flight_data_survives_metadata_and_blocks_a_rescaled_restore_up_front() -> None:
    from cairn.checkpoint.metadata import (
        CheckpointMetadata,
        CompletedCheckpoint,
        OperatorMetadata,
        decode_metadata,
        encode_metadata,
    )
    from cairn.checkpoint.restore import IncompatibleCheckpointError, check_restore_compatible
    from cairn.ids import JobId, OperatorUid

    rec = ChannelStateRecorder(3, 2, {1})
    rec.add(1, [("k", 1)])
    handle = rec.write(MemoryStateFiles(3), "channels")
    sub = OperatorSubtaskState(input_channels=handle)
    op = OperatorMetadata(OperatorUid("check"), 2, 128, {0: sub})
    md = CheckpointMetadata(
        JobId("j"), CheckpointId(3), 1, 2, 128, operators={OperatorUid("check"): op}
    )
    decoded = decode_metadata(encode_metadata(md))
    assert decoded.operators[OperatorUid("check")].subtasks[0].input_channels == handle
    assert handle is not None and decoded.referenced_files()[handle.path] > 0
    checkpoint = CompletedCheckpoint(decoded, "/tmp/chk-3")
    check_restore_compatible(checkpoint, {"check": (2, 128)})
    with pytest.raises(IncompatibleCheckpointError, match="savepoint"):
        check_restore_compatible(checkpoint, {"check": (3, 128)})
