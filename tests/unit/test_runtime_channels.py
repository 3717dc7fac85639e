"""Channels, flow control and partitioners of the runtime (no job, real sockets)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from cairn.api.partitioning import CustomPartitioning
from cairn.events import CheckpointBarrier
from cairn.graph.job_graph import JobEdge
from cairn.graph.transformations import PartitionKind
from cairn.runtime.channels import (
    InputChannel,
    LocalOutputChannel,
)
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.input_gate import InputGate
from cairn.runtime.record_writer import RecordWriter
from cairn.state.key_groups import assign_to_key_group, subtask_for_key_group

from ._remote_channel import RemoteChannel, take_batches


def _local(n: int) -> tuple[list[InputChannel], list[LocalOutputChannel]]:
    inputs = [InputChannel(i) for i in range(n)]
    return inputs, [LocalOutputChannel(c, capacity=100) for c in inputs]


def _drain(channel: InputChannel) -> list[Any]:
    out: list[Any] = []
    while channel.queue:
        entry = channel.queue.popleft()
        out.extend(entry if isinstance(entry, list) else [entry])
    return out


def test_hash_partitioning_follows_flinks_key_group_assignment() -> None:
    inputs, outputs = _local(3)
    writer = RecordWriter(
        outputs, PartitionKind.HASH, key_selector=lambda r: r[0], max_parallelism=128, batch_size=4
    )
    records = [(f"key{i}", i) for i in range(200)]
    writer.emit(records)
    writer.flush_all()
    for index, channel in enumerate(inputs):
        for key, _ in _drain(channel):
            assert subtask_for_key_group(128, 3, assign_to_key_group(key, 128)) == index
    assert writer.records_out == 200


def _edge(partition: PartitionKind, selector: Any) -> JobEdge:
    return JobEdge(0, 1, partition, selector, target_max_parallelism=128, input_index=0)


def test_a_custom_edge_routes_by_its_partitioner_stamped_or_not() -> None:
    inputs, outputs = _local(3)
    by_key = CustomPartitioning(lambda key, n: key % n, lambda r: r[0])
    edge = _edge(PartitionKind.CUSTOM, by_key)
    writer = RecordWriter.for_edge(outputs, edge, subtask_index=0, batch_size=100)
    writer.emit([(k, "plain") for k in range(9)])
    writer.emit(stamp([(k, "stamped") for k in range(9)], list(range(9))))
    writer.flush_all()
    for index, channel in enumerate(inputs):
        got = _drain(channel)
        assert {k % 3 for k, _ in got} == {index}
        assert len(got) == 6


def test_a_custom_partitioner_out_of_range_fails_naming_it() -> None:
    _, outputs = _local(2)
    edge = _edge(PartitionKind.CUSTOM, CustomPartitioning(lambda key, n: 5, lambda r: r))
    writer = RecordWriter.for_edge(outputs, edge, subtask_index=0)
    with pytest.raises(ValueError, match=r"returned 5 .* \[0, 2\)"):
        writer.emit([1])


def test_a_custom_writer_needs_a_partitioner_not_a_key_selector() -> None:
    _, outputs = _local(2)
    with pytest.raises(ValueError, match="custom partitioning needs its partitioner"):
        RecordWriter(outputs, PartitionKind.CUSTOM, key_selector=lambda r: r)


def test_a_hash_edge_keeps_its_key_selector() -> None:
    inputs, outputs = _local(2)
    writer = RecordWriter.for_edge(
        outputs, _edge(PartitionKind.HASH, lambda r: r), subtask_index=1, batch_size=100
    )
    writer.emit(["a", "b", "c"])
    writer.flush_all()
    for index, channel in enumerate(inputs):
        for key in _drain(channel):
            assert subtask_for_key_group(128, 2, assign_to_key_group(key, 128)) == index


def test_records_before_a_barrier_are_flushed_ahead_of_it() -> None:
    inputs, outputs = _local(2)
    writer = RecordWriter(outputs, PartitionKind.REBALANCE, batch_size=1000)
    writer.emit(list(range(10)))
    barrier = CheckpointBarrier(1, 0)  # type: ignore[arg-type]
    writer.broadcast_event(barrier)
    for channel in inputs:
        entries = list(channel.queue)
        assert entries[-1] is barrier
        assert all(isinstance(e, list) for e in entries[:-1])
    assert sorted(_drain(inputs[0])[:-1] + _drain(inputs[1])[:-1]) == list(range(10))


def test_round_robin_and_broadcast_distribution() -> None:
    inputs, outputs = _local(4)
    writer = RecordWriter(outputs, PartitionKind.REBALANCE, batch_size=1)
    writer.emit(list(range(100)))
    assert [len(_drain(c)) for c in inputs] == [25, 25, 25, 25]
    inputs, outputs = _local(3)
    writer = RecordWriter(outputs, PartitionKind.BROADCAST, batch_size=1)
    writer.emit([1, 2])
    assert [_drain(c) for c in inputs] == [[1, 2]] * 3


def test_local_channel_capacity_makes_writer_unavailable() -> None:
    target = InputChannel(0)
    writer = RecordWriter(
        [LocalOutputChannel(target, capacity=2)], PartitionKind.FORWARD, batch_size=1
    )
    writer.emit([1])
    assert writer.available()
    writer.emit([2])
    assert not writer.available(), "a full channel must back-pressure the producer"
    target.queue.popleft()
    assert writer.available()


def test_input_gate_skips_blocked_channels_and_is_fair() -> None:
    channels = [InputChannel(i) for i in range(3)]
    for i, ch in enumerate(channels):
        ch.queue.extend([[f"c{i}-a"], [f"c{i}-b"]])
    gate = InputGate(channels)
    gate.set_blocked_view({1})
    order = []
    while (item := gate.poll()) is not None:
        order.append(item[1][0])
    assert order == ["c0-a", "c2-a", "c0-b", "c2-b"]
    gate.set_blocked_view(set())
    assert gate.poll() == (1, ["c1-a"])


def test_remote_channel_sends_only_with_credit_and_gets_credit_back() -> None:
    with RemoteChannel(7, initial_credits=2, max_backlog=100) as remote:
        channel, received_by = remote.channel, remote.input
        for i in range(6):
            channel.send_batch([i])
        remote.wait(lambda: len(received_by.queue) >= 2, "the first two batches")
        remote.holds(
            lambda: len(received_by.queue) == 2,
            0.2,
            "only as many batches as credits may be in flight",
        )
        assert len(channel.backlog) == 4
        gate = InputGate([received_by])
        # each batch taken is unpickled and counts a credit for the sender
        received = [batch[0] for batch in take_batches(remote, gate, 6)]
        assert received == list(range(6))
        assert not remote.errors
        assert pickle.loads(pickle.dumps(received)) == received


def test_credits_go_back_in_pairs_and_never_strand_a_sender() -> None:
    """With four credits, the receiver returns them two at a time (one frame, one wake-up of
    the sender, per two batches); a sender out of credit always gets its pair back."""
    with RemoteChannel(4, initial_credits=4, max_backlog=100) as remote:
        channel, gate = remote.channel, InputGate([remote.input])
        for i in range(20):
            channel.send_batch([i])
        remote.wait(lambda: len(remote.input.queue) == 4, "four batches, one per credit")
        assert take_batches(remote, gate, 1) == [[0]]
        remote.holds(lambda: channel.credits == 0, 0.05, "one batch taken: no credit back yet")
        assert take_batches(remote, gate, 1) == [[1]]
        remote.wait(lambda: len(remote.input.queue) == 4, "the pair back: two more batches")
        got = [b[0] for b in take_batches(remote, gate, 18)]
        assert got == list(range(2, 20))
        assert not remote.errors


class _WriterOnRemoteChannel(RemoteChannel):
    """A writer on a remote channel (1 credit, backlog of 2) to a real receiving socket."""

    def __init__(self, channel_id: int, batch_size: int) -> None:
        super().__init__(channel_id, initial_credits=1, max_backlog=2)
        self.writer = RecordWriter([self.channel], PartitionKind.FORWARD, batch_size=batch_size)
        self.gate = InputGate([self.input])


def test_partial_batches_wait_in_the_writer_while_a_remote_channel_has_no_credit() -> None:
    """Buffer timeout / idle flush: a channel without credit keeps collecting records into one
    batch (instead of queueing a tiny batch per flush); once its credit is back, the held
    records travel as one batch."""
    remote = _WriterOnRemoteChannel(3, batch_size=1000)
    channel, writer, gate = remote.channel, remote.writer, remote.gate

    def take() -> list[Any]:  # consume one batch on the receiving side (returns a credit)
        (batch,) = take_batches(remote, gate, 1)
        return list(batch)

    try:
        writer.emit([0, 1])
        assert writer.flush_ready()  # one credit: the partial batch goes at once
        assert not channel.backlog
        assert take() == [0, 1]
        remote.wait(lambda: channel.credits == 1, "the credit back")

        writer.emit([2])
        assert writer.flush_ready()  # uses the credit
        for i in range(3, 9):  # no credit left: each flush leaves the records pending
            writer.emit([i])
            assert not writer.flush_ready()
        assert writer.has_pending() and not channel.backlog
        assert take() == [2]
        remote.wait(lambda: channel.credits == 1, "its credit back")
        assert writer.flush_ready()
        assert take() == [3, 4, 5, 6, 7, 8], "the held records travel as one batch"
        assert not remote.errors
    finally:
        remote.close()


def test_local_channels_take_partial_batches_at_once() -> None:
    inputs, outputs = _local(2)
    writer = RecordWriter(outputs, PartitionKind.REBALANCE, batch_size=1000)
    writer.emit([1, 2, 3])
    assert writer.flush_ready()
    assert not writer.has_pending()
    assert sorted(_drain(inputs[0]) + _drain(inputs[1])) == [1, 2, 3]
    assert not writer.flush_ready()  # nothing pending: nothing to do


def test_a_full_backlog_gets_room_when_a_credit_comes_back() -> None:
    remote = _WriterOnRemoteChannel(5, batch_size=2)
    channel, writer, gate = remote.channel, remote.writer, remote.gate
    try:
        writer.emit([0, 1])  # a full batch: sent with the one credit
        assert not channel.backlog
        writer.emit([2, 3])  # two batches, no credit: the backlog is full
        writer.emit([4, 5])
        assert not writer.available()
        # consuming [0, 1] returns a credit: one batch goes
        (batch,) = take_batches(remote, gate, 1)
        assert list(batch) == [0, 1]
        remote.wait(writer.available, "room in the backlog")
        assert not remote.errors
    finally:
        remote.close()


def test_bytes_are_counted_once_per_pickled_batch_on_both_ends_and_never_locally() -> None:
    """Flink's numBytesOut/In: the pickled size of each remote batch, counted by the sending
    channel and by the gate that takes it; a local channel hands lists over (no bytes)."""
    remote = _WriterOnRemoteChannel(3, batch_size=4)
    try:
        batches = [[f"record-{i}-{j}" for j in range(4)] for i in range(3)]
        sizes = [len(pickle.dumps(b, protocol=5)) for b in batches]
        received: list[Any] = []
        for batch in batches:
            remote.writer.emit(batch)  # a full batch: flushed and pickled at once
            received += take_batches(remote, remote.gate, 1)
        assert received == batches
        assert remote.channel.bytes_out == sum(sizes)
        assert remote.gate.bytes_in == sum(sizes)
        assert not remote.errors
    finally:
        remote.close()
    inputs, outputs = _local(1)
    writer = RecordWriter(outputs, PartitionKind.FORWARD, batch_size=2)
    writer.emit(["a", "b", "c", "d"])
    gate = InputGate(inputs)
    assert gate.poll() == (0, ["a", "b", "c", "d"])
    assert outputs[0].bytes_out == 0 and gate.bytes_in == 0
