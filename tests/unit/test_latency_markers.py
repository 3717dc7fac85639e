"""Latency markers (``metrics.latency.*``): histograms per granularity, markers that wait
behind the records written before them, and a job (in-process executor) in which every
operator but the source reports a ``latency`` histogram, under Flink's ids in REST and
Prometheus; off by default, when no task tracks anything."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.common import Configuration, Types
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream import (
    KeyedProcessFunction,
    MapFunction,
    SinkFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.events import (
    AlignmentMode,
    CheckpointBarrier,
    CheckpointOptions,
    LatencyMarker,
    is_priority_event,
)
from cairn.graph.transformations import PartitionKind
from cairn.ids import CheckpointId
from cairn.observability.prometheus import facts_of, render
from cairn.rest.metric_views import job_metric_values
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.input_gate import InputGate
from cairn.runtime.latency import (
    Granularity,
    LatencyConfig,
    LatencyStats,
    LatencyTracker,
    SlidingHistogram,
)
from cairn.runtime.record_writer import RecordWriter


def test_a_histogram_keeps_the_latest_values_and_flinks_quantiles() -> None:
    h = SlidingHistogram(128)
    for v in range(1, 201):  # 1..200: the window holds 73..200
        h.update(float(v))
    s = h.statistics()
    assert (s.count, s.size, s.min, s.max) == (200, 128, 73.0, 200.0)
    assert s.median == pytest.approx(136.5)
    assert s.p99 == pytest.approx(199.71)  # position 0.99 * 129 = 127.71
    assert s.fields()["p999"] == 200.0


@pytest.mark.parametrize(
    ("granularity", "scopes"),
    [
        (Granularity.SINGLE, {(None, None)}),
        (Granularity.OPERATOR, {("a", None), ("b", None)}),
        (Granularity.SUBTASK, {("a", 0), ("a", 1), ("b", 0)}),
    ],
)
def test_histograms_per_granularity(granularity: Granularity, scopes: set[Any]) -> None:
    stats = LatencyStats("sum-3", 1, granularity, 128)
    for source, subtask, marked in (("a", 0, 90.0), ("a", 1, 80.0), ("b", 0, 70.0)):
        stats.report(LatencyMarker(marked, source, subtask), now_ms=100.0)
    reports = stats.reports()
    assert {(r.scope.source_id, r.scope.source_subtask_index) for r in reports} == scopes
    assert all(
        r.scope.operator_id == "sum-3" and r.scope.operator_subtask_index == 1 for r in reports
    )
    assert sum(r.stats.count for r in reports) == 3
    if granularity is Granularity.SINGLE:
        assert reports[0].stats.max == 30.0


def _writer(channels: int = 2, batch_size: int = 4) -> tuple[RecordWriter, list[InputChannel]]:
    inputs = [InputChannel(i) for i in range(channels)]
    outs = [LocalOutputChannel(ch) for ch in inputs]
    writer = RecordWriter(outs, PartitionKind.FORWARD if channels == 1 else PartitionKind.REBALANCE)
    for ch in outs:
        ch.batch_size = batch_size
    writer.batch_size = batch_size
    return writer, inputs


def test_a_marker_waits_behind_the_records_pending_on_its_channel() -> None:
    writer, (inbox,) = _writer(channels=1)
    writer.emit([1, 2])
    marker = LatencyMarker(1.0, "src", 0)
    writer.emit_latency_marker(marker)
    assert list(inbox.queue) == []  # held with the partly filled batch
    writer.emit([3, 4])  # the batch fills: records first, then the marker
    assert list(inbox.queue) == [[1, 2, 3, 4], marker]
    writer.emit_latency_marker(marker)  # nothing pending: it goes at once
    assert list(inbox.queue)[-1] is marker


def test_a_marker_behind_a_debloated_channel_goes_only_after_its_records() -> None:
    writer, (inbox,) = _writer(channels=1, batch_size=8)
    writer.channels[0].batch_size = 2  # the receiver asked for buffers of 2
    writer.emit([1, 2, 3])
    marker = LatencyMarker(1.0, "src", 0)
    writer.emit_latency_marker(marker)
    writer.emit([4])  # 4 pending: two full buffers go, the marker after them
    assert list(inbox.queue) == [[1, 2], [3, 4], marker]
    writer.emit([5])
    writer.emit_latency_marker(marker)
    writer.emit([6, 7])  # [5, 6] goes, 7 stays: the marker (behind 5) went with its record
    assert list(inbox.queue)[3:] == [[5, 6], marker]
    writer.flush_all()
    assert list(inbox.queue)[-1] == [7]


def test_a_tracker_records_at_its_operators_and_forwards_on_one_random_channel() -> None:
    writer, inputs = _writer(channels=2)
    now = [1000.0]
    tracker = LatencyTracker(
        LatencyConfig(50), ["map-1"], 0, [writer], source_id="src-0", clock_ms=lambda: now[0]
    )
    sent = 0
    for step in range(40):
        now[0] = 1000.0 + 50 * step
        sent += tracker.emit_due()
    assert sent == 40
    got = [e for ch in inputs for e in ch.queue]
    assert len(got) == 40 and all(type(e) is LatencyMarker for e in got)
    assert all(ch.queue for ch in inputs)  # both channels, at random
    (report,) = tracker.reports()
    assert report.scope.source_id == "src-0" and report.stats.max == 0.0
    now[0] += 10_000  # a stalled task sends one marker, not two hundred
    assert tracker.emit_due() and not tracker.emit_due()


class Double(MapFunction):
    def map(self, value: Any) -> Any:
        return value * 2


class Running(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value


def _run(latency: dict[str, str], records: int = 3000) -> Any:
    """Rate-limited source -> map -> key_by -> process -> sink (p=2), 2,000 records/s."""
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    for k, v in latency.items():
        conf.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    source = DataGeneratorSource(lambda i: i, records, RateLimiterStrategy.per_second(2000))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers", Types.LONG())
        .uid("numbers")
        .map(Double(), Types.LONG())
        .uid("double")
        .key_by(lambda v: v % 7)
        .process(Running(), Types.LONG())
        .uid("running")
        .add_sink(_Discard())
        .uid("discard")
    )
    client = env.execute_async("latency-markers")
    client.get_job_execution_result(timeout=120)
    return client.job_master


class _Discard(SinkFunction):
    def invoke(self, value: Any, context: Any = None) -> None:
        pass


def test_markers_reach_every_operator_and_show_in_rest_and_prometheus() -> None:
    master = _run(
        {"metrics.latency.interval": "20", "metrics.latency.granularity": "subtask"}, 2000
    )
    seen: dict[tuple[str, int], set[tuple[str, int]]] = {}
    for report in master.metrics.values():
        for r in report.latency:
            assert r.stats.count > 0 and 0 <= r.stats.min <= r.stats.median <= r.stats.max
            scope = r.scope
            assert scope.source_id is not None and scope.source_subtask_index is not None
            key = (scope.operator_id, scope.operator_subtask_index)
            seen.setdefault(key, set()).add((scope.source_id, scope.source_subtask_index))
    operators = {(op, i) for op in ("double", "running", "discard") for i in (0, 1)}
    assert set(seen) == operators  # every operator subtask but the source's
    assert seen[("running", 0)] == {("numbers", 0), ("numbers", 1)}  # over the hash edge
    assert seen[("double", 1)] == {("numbers", 1)}  # chained to its own source subtask

    facts = facts_of(master)
    metric = "latency.source_id.numbers.source_subtask_index.1.operator_id.running"
    ids = [m["id"] for m in job_metric_values(facts, None)]
    assert f"{metric}.operator_subtask_index.0.latency_p99" in ids
    (p99,) = job_metric_values(facts, [f"{metric}.operator_subtask_index.0.latency_p99"])
    assert float(p99["value"]) >= 0
    text = render(lambda: facts).decode()
    family = (
        "cairn_taskmanager_job_latency_"
        "source_id_source_subtask_index_operator_id_operator_subtask_index_latency"
    )
    assert f"# TYPE {family} summary" in text
    assert 'operator_id="running"' in text and 'quantile="0.99"' in text


def test_latency_tracking_is_off_by_default() -> None:
    master = _run({}, records=600)
    assert master.metrics and not any(r.latency for r in master.metrics.values())
    facts = facts_of(master)
    assert not any(m["id"].startswith("latency.") for m in job_metric_values(facts, None))


def test_an_unaligned_barrier_overtakes_a_marker_without_storing_it() -> None:
    """Markers keep their place among records but are no channel state: a barrier that
    overtakes one leaves it queued, to be taken (after the barrier) in order."""
    channel = InputChannel(0)
    gate = InputGate([channel])
    marker = LatencyMarker(1.0, "src", 0)
    channel.push([1, 2])
    channel.push(marker)
    channel.push([3])
    unaligned = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)
    barrier = CheckpointBarrier(CheckpointId(1), 0, unaligned)
    assert not is_priority_event(marker) and is_priority_event(barrier)
    channel.announce(barrier)
    taken, overtaken = gate.overtake(0)
    assert taken is barrier and overtaken == [[1, 2], [3]]  # the in-flight data, no marker
    assert [gate.poll() for _ in range(3)] == [(0, [1, 2]), (0, marker), (0, [3])]
