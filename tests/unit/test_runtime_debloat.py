"""Buffer debloating: the pure sizing decision, writers honouring per-channel buffer sizes,
and the receiver's request reaching local and remote senders."""

from __future__ import annotations

from cairn.graph.transformations import PartitionKind
from cairn.runtime.channels import (
    InputChannel,
    LocalOutputChannel,
)
from cairn.runtime.debloat import (
    BufferDebloater,
    DebloatConfig,
    desired_buffer_size,
    should_change,
)
from cairn.runtime.record_writer import RecordWriter

from ._remote_channel import RemoteChannel


def test_desired_size_makes_in_flight_data_take_the_target_time() -> None:
    config = DebloatConfig(target_ms=500, min_size=8, max_size=1024)
    # 4,000 records/s over 10 buffers with a 0.5 s target: 200 records per buffer.
    assert desired_buffer_size(4_000.0, 10, config) == 200
    assert desired_buffer_size(1.0, 10, config) == 8
    assert desired_buffer_size(1e9, 10, config) == 1024


def test_threshold_ignores_small_changes() -> None:
    assert not should_change(1000, 800, 25)
    assert should_change(1000, 700, 25)
    assert should_change(100, 100 + 26, 25)


def test_debloater_averages_throughput_and_reports_only_real_changes() -> None:
    d = BufferDebloater(DebloatConfig(period_ms=100, samples=3), buffers_in_flight=4, now_ms=0)
    assert d.next_ms == 100
    assert d.observe(400, 1_000) == 100  # 400 rec/s, 4 buffers, 1 s target
    assert d.observe(800, 2_000) is None  # same rate
    sizes = [d.observe(800 + 4_000 * k, 2_000 + 1_000 * k) for k in range(1, 6)]
    assert sizes[0] is not None and d.size > 100, "a higher rate grows the buffers"
    assert d.size <= 1024


def test_writer_flushes_each_channel_at_its_own_buffer_size() -> None:
    inputs = [InputChannel(0), InputChannel(1)]
    outs = [LocalOutputChannel(c, capacity=100) for c in inputs]
    writer = RecordWriter(outs, PartitionKind.REBALANCE, batch_size=100)
    inputs[1].request_buffer_size(10)  # the receiver of channel 1 asks for small buffers
    assert outs[1].batch_size == 10 and outs[0].batch_size == 100
    writer.emit(list(range(60)))  # 30 records per channel
    assert [len(b) for b in inputs[1].queue] == [10, 10, 10]
    assert not inputs[0].queue, "channel 0 keeps filling its 100-record buffer"
    assert writer.min_batch_size() == 10
    writer.flush_all()
    assert [len(b) for b in inputs[0].queue] == [30]
    assert writer.records_out == 60


def test_buffer_size_request_reaches_a_remote_sender() -> None:
    with RemoteChannel(5, initial_credits=4) as remote:
        channel = remote.channel
        channel.send_batch([1])  # the receiver learns the connection from the first frame
        remote.wait(lambda: remote.input.queue, "the first batch")
        remote.input.request_buffer_size(48)
        remote.wait(lambda: channel.batch_size == 48, "the new buffer size at the sender")
        assert channel.batch_size == 48
        assert not remote.errors
