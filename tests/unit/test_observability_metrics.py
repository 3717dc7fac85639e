"""Flink's metrics from recorded task reports: rates from two cumulative reports, time
shares that sum to 1000 ms/s, a restarted task, checkpoint figures, and the Prometheus text
and REST bodies built from them (parsed back with ``prometheus_client``'s parser)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cairn.checkpoint.messages import TaskKey
from cairn.checkpoint.stats import (
    CheckpointCounts,
    CheckpointStats,
    CheckpointStatsSnapshot,
    CheckpointStatus,
)
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.observability.metrics import (
    JOB_METRICS,
    SUBTASK_METRICS,
    all_subtask_metrics,
    job_metrics,
    subtask_metrics,
)
from cairn.observability.progress import time_shares
from cairn.observability.prometheus import MetricsFacts, render
from cairn.rest import metric_views
from cairn.runtime.reports import TaskMetrics


def key(vertex: int, subtask: int) -> TaskKey:
    return TaskKey(VertexId(vertex), SubtaskIndex(subtask))


# Two reports one second apart of a source that was backpressured 70 % of that second.
SOURCE_BEFORE = TaskMetrics(10_000, 10_000, False, 5_000.0, 1_000.0, 2_000.0)
SOURCE_NOW = TaskMetrics(12_000, 12_000, True, 6_000.0, 1_200.0, 2_700.0)


def test_rates_and_time_shares_come_from_the_difference_of_two_reports() -> None:
    m = subtask_metrics(SOURCE_NOW, SOURCE_BEFORE)
    assert m.numRecordsIn == 12_000 and m.numRecordsInPerSecond == pytest.approx(2_000.0)
    assert m.busyTimeMsPerSecond == pytest.approx(200.0)
    assert m.backPressuredTimeMsPerSecond == pytest.approx(700.0)
    assert m.idleTimeMsPerSecond == pytest.approx(100.0)
    assert m.currentInputWatermark == -(2**63)  # Flink's Long.MIN_VALUE: no watermark


def test_a_first_report_is_measured_since_the_task_started() -> None:
    m = subtask_metrics(SOURCE_BEFORE)
    assert m.numRecordsInPerSecond == pytest.approx(2_000.0)
    assert m.busyTimeMsPerSecond == pytest.approx(200.0)
    assert m.backPressuredTimeMsPerSecond == pytest.approx(400.0)


def test_a_restarted_task_is_not_compared_with_the_old_one() -> None:
    restarted = TaskMetrics(500, 500, False, 500.0, 250.0, 0.0, watermark=42)
    m = subtask_metrics(restarted, SOURCE_NOW)  # elapsed went back: a new task
    assert m.numRecordsInPerSecond == pytest.approx(1_000.0) and m.busyTimeMsPerSecond == 500.0
    assert m.currentInputWatermark == 42


def test_shares_are_clamped_to_one_second_whatever_the_clocks_say() -> None:
    skewed = TaskMetrics(1, 1, True, 1_000.0, 900.0, 900.0)
    m = subtask_metrics(skewed)
    assert m.busyTimeMsPerSecond == 900.0 and m.backPressuredTimeMsPerSecond == 100.0
    assert m.idleTimeMsPerSecond == 0.0
    zero = subtask_metrics(SOURCE_NOW, SOURCE_NOW)  # no time passed
    assert zero.numRecordsInPerSecond == 0.0 and zero.idleTimeMsPerSecond == 1000.0


def completed(cid: int, trigger: int, end: int) -> CheckpointStats:
    return CheckpointStats(
        CheckpointId(cid), False, CheckpointStatus.COMPLETED, trigger, 0, {}, end_ms=end
    )


def test_job_metrics_name_the_latest_completed_checkpoint() -> None:
    snap = CheckpointStatsSnapshot(
        CheckpointCounts(in_progress=1, completed=7, failed=2),
        (),
        latest_completed=completed(7, 1_000, 1_450),
    )
    m = job_metrics(snap, restarts=3)
    assert (m.numberOfCompletedCheckpoints, m.numberOfFailedCheckpoints, m.numRestarts) == (7, 2, 3)
    assert m.lastCheckpointDuration == 450 and m.lastCheckpointSize == 0
    with pytest.raises(KeyError, match="unknown job metric 'nope'"):
        m.value("nope")


def facts() -> MetricsFacts:
    reports = {key(0, 0): SOURCE_NOW, key(1, 0): TaskMetrics(11_000, 11_000, False, 6_000.0)}
    previous = {key(0, 0): SOURCE_BEFORE}
    return MetricsFacts(
        "j1",
        'sums "<b>"',
        {0: "source", 1: "sum"},
        all_subtask_metrics(reports, previous),
        job_metrics(None, 0),
    )


def test_prometheus_text_parses_back_with_flinks_names_and_labels() -> None:
    families = {f.name: f for f in text_string_to_metric_families(render(facts).decode())}
    for name in SUBTASK_METRICS:
        assert "cairn_taskmanager_job_task_" + name in families
    for name in JOB_METRICS:
        assert "cairn_jobmanager_job_" + name in families
    [src, _sum] = families["cairn_taskmanager_job_task_backPressuredTimeMsPerSecond"].samples
    assert src.labels == {
        "job_id": "j1",
        "job_name": 'sums "<b>"',  # quotes escaped in the text, restored by the parser
        "task_name": "source",
        "subtask_index": "0",
    }
    assert src.value == pytest.approx(700.0)
    [restarts] = families["cairn_jobmanager_job_numRestarts"].samples
    assert restarts.value == 0.0


def test_rest_bodies_list_ids_or_values_as_flink_does() -> None:
    f = facts()
    ids = metric_views.vertex_metric_values(f, 0, None)
    assert {"id": "0.busyTimeMsPerSecond"} in ids and all(set(i) == {"id"} for i in ids)
    values = metric_views.vertex_metric_values(f, 0, ["0.numRecordsIn", "0.unknown"])
    assert values == [{"id": "0.numRecordsIn", "value": "12000"}]
    body = metric_views.backpressure(f, 0, now_ms=5)
    assert body["backpressureLevel"] == "high" and body["end-timestamp"] == 5
    [sub] = body["subtasks"]
    assert sub == {
        "subtask": 0,
        "backpressureLevel": "high",
        "ratio": 0.7,
        "idleRatio": 0.1,
        "busyRatio": 0.2,
    }
    assert metric_views.backpressure(f, 1, 0)["backpressureLevel"] == "ok"


def test_the_progress_line_names_the_most_backpressured_subtask() -> None:
    shares = {"source (1/1)": subtask_metrics(SOURCE_NOW, SOURCE_BEFORE)}
    assert time_shares(shares) == "busy 20% bp 70% idle 10% (max bp source (1/1) 70%)"


def test_bytes_give_flinks_byte_counters_and_rates_and_the_vertex_io_block() -> None:
    """numBytesIn/Out are the cumulative pickled bytes of remote batches; the per-second
    rates come from two reports; /jobs/:jobid sums a vertex's subtasks into Flink's
    ``metrics`` block and says whether every subtask reported."""
    before = TaskMetrics(100, 100, elapsed_ms=1_000.0, busy_ms=100.0, bytes_in=4_000, bytes_out=0)
    now = TaskMetrics(
        300, 300, elapsed_ms=3_000.0, busy_ms=600.0, backpressured_ms=400.0, bytes_in=10_000
    )
    m = subtask_metrics(now, before)
    assert (m.numBytesIn, m.numBytesOut) == (10_000, 0)
    assert m.numBytesInPerSecond == pytest.approx(3_000.0) and m.numBytesOutPerSecond == 0.0
    other = subtask_metrics(TaskMetrics(50, 40, elapsed_ms=3_000.0, bytes_in=500, bytes_out=70))
    f = MetricsFacts("j", "n", {1: "sum"}, {key(1, 0): m, key(1, 1): other}, job_metrics(None, 0))
    text = render(lambda: f).decode()
    families = {x.name: x for x in text_string_to_metric_families(text)}
    values = {s.labels["subtask_index"]: s.value for s in families[
        "cairn_taskmanager_job_task_numBytesIn"].samples}  # fmt: skip
    assert values == {"0": 10_000.0, "1": 500.0}
    io = metric_views.vertex_io_metrics(f, {1: 2, 2: 3})
    assert io[1] == {
        "read-bytes": 10_500,
        "read-bytes-complete": True,
        "write-bytes": 70,
        "write-bytes-complete": True,
        "read-records": 350,
        "read-records-complete": True,
        "write-records": 340,
        "write-records-complete": True,
        "accumulated-backpressured-time": 400,
        "accumulated-idle-time": 2_000 + 3_000,
        "accumulated-busy-time": 600,
    }
    assert io[2]["read-bytes"] == 0 and io[2]["read-bytes-complete"] is False  # none reported
    ids = metric_views.vertex_metric_values(f, 1, ["1.numBytesOut", "0.numBytesInPerSecond"])
    assert ids == [
        {"id": "1.numBytesOut", "value": "70"},
        {"id": "0.numBytesInPerSecond", "value": "3000"},
    ]
