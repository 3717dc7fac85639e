"""Checkpoint statistics tracker: statuses, per-subtask metrics, bounded history, summaries."""

from __future__ import annotations

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.checkpoint.stats import CheckpointCounts, CheckpointStatsTracker, CheckpointStatus
from cairn.ids import CheckpointId, SubtaskIndex, VertexId

C = CheckpointId
T0, T1 = TaskKey(VertexId(0), SubtaskIndex(0)), TaskKey(VertexId(1), SubtaskIndex(0))


def test_lifecycle_of_one_checkpoint_with_subtask_metrics() -> None:
    t = CheckpointStatsTracker()
    t.report_pending(C(1), trigger_ms=1000, num_subtasks=2)
    t.report_ack(C(1), T0, SubtaskCheckpointMetrics(sync_duration_ms=3, state_size=100), 1010)
    s = t.get(C(1))
    assert s is not None and s.status is CheckpointStatus.IN_PROGRESS
    assert s.num_acknowledged_subtasks == 1 and s.end_to_end_duration_ms == 10
    t.report_ack(
        C(1), T1, SubtaskCheckpointMetrics(state_size=50, persisted_bytes=7, unaligned=True), 1040
    )
    t.report_completed(C(1), end_ms=1050, path="/c/chk-1")
    s = t.get(C(1))
    assert s is not None and s.status is CheckpointStatus.COMPLETED
    assert (s.end_to_end_duration_ms, s.state_size, s.checkpointed_size) == (50, 150, 150)
    assert s.persisted_bytes == 7 and s.unaligned and s.path == "/c/chk-1"
    assert s.subtasks[T0].metrics.sync_duration_ms == 3
    assert t.counts == CheckpointCounts(in_progress=0, completed=1, failed=0)


def test_failed_checkpoint_keeps_reason_and_counts() -> None:
    t = CheckpointStatsTracker()
    t.report_pending(C(1), 0, 2)
    t.report_pending(C(2), 5, 2)
    t.report_failed(C(1), 600, "CHECKPOINT_EXPIRED", "timeout")
    snap = t.snapshot()
    assert snap.counts == CheckpointCounts(in_progress=1, completed=0, failed=1)
    assert snap.latest_failed is not None and snap.latest_failed.failure_reason == (
        "CHECKPOINT_EXPIRED"
    )
    assert [s.checkpoint_id for s in snap.history] == [2, 1]
    assert snap.to_dict()["latest"]["failed"]["failure_message"] == "timeout"


def test_history_is_bounded_and_summary_has_percentiles() -> None:
    t = CheckpointStatsTracker(history_size=3)
    for i in range(1, 101):
        t.report_pending(C(i), trigger_ms=0, num_subtasks=1)
        t.report_completed(C(i), end_ms=i)  # durations 1..100 ms
    snap = t.snapshot()
    assert [s.checkpoint_id for s in snap.history] == [100, 99, 98]
    d = snap.end_to_end_duration
    assert (d.count, d.min, d.p50, d.p99, d.max) == (100, 1, 50, 99, 100)
    assert snap.counts.completed == 100
    assert t.get(C(1)) is None  # fell out of the bounded history
