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
from cairn.testing.processes import holds_for, wait_for

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
        wait_for(lambda: len(received_by.queue) >= 2, 5, 0.01, "the first two batches")
        holds_for(
            lambda: len(received_by.queue) == 2,
            0.2,
            0.01,
            "only as many batches as credits may be in flight",
        )
        assert len(channel.backlog) == 4
        gate = InputGate([received_by])
        # each batch taken is unpickled and returns one credit
        received = [batch[0] for batch in take_batches(gate, 6)]
        assert received == list(range(6))
        assert not remote.errors
        assert pickle.loads(pickle.dumps(received)) == received


class _WriterOnRemoteChannel(RemoteChannel):
    """A writer on a remote channel (1 credit, backlog of 2) to a real receiving socket."""

    def __init__(self, channel_id: int, batch_size: int) -> None:
        super().__init__(channel_id, initial_credits=1, max_backlog=2)
        self.writer = RecordWriter([self.channel], PartitionKind.FORWARD, batch_size=batch_size)
        self.gate = InputGate([self.input])


def test_partial_batches_wait_in_the_writer_while_a_remote_channel_has_no_credit() -> None:
    """Buffer timeout / idle flush: a channel without credit keeps collecting records into one
    batch (instead of queueing a tiny batch per flush); a credit reaching an empty backlog
    wakes the task only if the writer held records back for it."""
    remote = _WriterOnRemoteChannel(3, batch_size=1000)
    channel, writer, gate, woken = remote.channel, remote.writer, remote.gate, remote.woken

    def take() -> list[Any]:  # consume one batch on the receiving side (returns a credit)
        (batch,) = take_batches(gate, 1)
        return list(batch)

    def sent_all() -> None:
        wait_for(lambda: not channel.backlog, 5, 0.01, "an empty backlog")

    try:
        writer.emit([0, 1])
        assert writer.flush_ready()  # one credit: the partial batch goes at once
        sent_all()
        woken.clear()
        assert take() == [0, 1]
        wait_for(lambda: channel.credits == 1, 5, 0.01, "the credit back")
        holds_for(lambda: not woken.is_set(), 0.05, 0.01, "a credit nobody waits for wakes no one")

        writer.emit([2])
        assert writer.flush_ready()  # uses the credit
        sent_all()
        for i in range(3, 9):  # no credit left: each flush leaves the records pending
            writer.emit([i])
            assert not writer.flush_ready()
        assert writer.has_pending() and not channel.backlog
        woken.clear()
        assert take() == [2]  # its credit comes back to an empty backlog
        assert woken.wait(5), "a credit for held records wakes the task"
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


def test_a_send_wakes_the_task_only_when_a_full_backlog_gets_room() -> None:
    """At moderate rates a wake-up per frame would cost the task thread more than the frame:
    the sender wakes it only when the writer is backpressured (its backlog was full)."""
    remote = _WriterOnRemoteChannel(5, batch_size=2)
    channel, writer, gate, woken = remote.channel, remote.writer, remote.gate, remote.woken
    try:
        writer.emit([0, 1])  # a full batch: sent with the one credit
        wait_for(lambda: not channel.backlog, 5, 0.01, "an empty backlog")
        holds_for(lambda: not woken.is_set(), 0.05, 0.01, "a plain send wakes no one")
        assert not channel.backlog and not woken.is_set(), "a plain send wakes no one"
        writer.emit([2, 3])  # two batches, no credit: the backlog is full
        writer.emit([4, 5])
        assert not writer.available()
        # consuming [0, 1] returns a credit: one batch goes
        (batch,) = take_batches(gate, 1)
        assert list(batch) == [0, 1]
        assert woken.wait(5), "room in a full backlog wakes the backpressured task"
        assert writer.available()
        assert not remote.errors
    finally:
        remote.close()


class _CreditArrivesWhileHolding(LocalOutputChannel):
    """A channel whose credit comes in just as the writer announces it holds records."""

    def __init__(self, target: InputChannel) -> None:
        super().__init__(target)
        self.credit = False

    def accepts_partial(self) -> bool:
        return self.credit

    def hold(self) -> None:
        self.credit = True  # the sender saw no holder yet, so it woke no one


def test_a_credit_racing_with_the_hold_announcement_is_not_lost() -> None:
    target = InputChannel(0)
    writer = RecordWriter(
        [_CreditArrivesWhileHolding(target)], PartitionKind.FORWARD, batch_size=100
    )
    writer.emit([1, 2])
    assert writer.flush_ready(), "the writer looks again after announcing, and sends"
    assert _drain(target) == [1, 2]


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
            received += take_batches(remote.gate, 1)
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
