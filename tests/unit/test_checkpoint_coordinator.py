"""CheckpointCoordinator with real storage (tmp_path and memory://), a manual clock and a
recording gateway standing in for the network edge: triggering, completion, failures and
shutdown (restore, fallback and savepoints: test_checkpoint_coordinator_restore)."""

from __future__ import annotations

import enum
from pathlib import Path

import pytest

from cairn.checkpoint.inspection import verify
from cairn.checkpoint.messages import (
    AckResult,
    CheckpointFailureReason,
    TaskAcknowledgement,
    TaskDecline,
    TaskKey,
)
from cairn.checkpoint.protocol import (
    Blocked,
    TerminalJobStatus,
    TriggerNow,
    WaitUntil,
)
from cairn.checkpoint.storage import load_checkpoint
from cairn.events import AlignmentMode
from cairn.ids import CheckpointId, OperatorUid, SubtaskIndex, VertexId
from cairn.settings import RetentionPolicy
from tests.unit._coordinator_harness import (
    AGG,
    SRC0,
    SRC1,
    T0,
    TASKS,
    exists,
    make,
)

# --- triggering ---------------------------------------------------------------------------------


def test_periodic_ticks_trigger_barriers_with_increasing_ids(root: str) -> None:
    h = make(root)
    assert h.coord.tick() == WaitUntil(T0 + 100, "checkpoint interval of 100 ms")
    assert h.gateway.barriers == []
    h.clock.advance(100)
    assert h.coord.tick() == TriggerNow(CheckpointId(1))
    h.ack_all(1)
    h.clock.advance(100)
    h.coord.tick()
    assert [(b.checkpoint_id, b.timestamp_ms) for b in h.gateway.barriers] == [
        (1, T0 + 100),
        (2, T0 + 200),
    ]
    assert h.gateway.barriers[0].options.alignment is AlignmentMode.ALIGNED
    assert h.coord.next_tick_ms() == T0 + 300


def test_min_pause_counts_from_completion(root: str) -> None:
    h = make(root, min_pause_ms=500)
    h.clock.advance(100)
    h.coord.tick()
    h.clock.advance(50)
    h.ack_all(1)  # completes at T0+150
    h.clock.advance(50)
    assert h.coord.tick() == WaitUntil(
        T0 + 650, "min pause of 500 ms after the last completed checkpoint"
    )
    h.clock.advance_to(T0 + 649)
    h.coord.tick()
    assert len(h.gateway.barriers) == 1
    h.clock.advance_to(T0 + 650)
    assert h.coord.tick() == TriggerNow(CheckpointId(2))


@pytest.mark.parametrize("max_concurrent", [1, 2])
def test_max_concurrent_checkpoints(root: str, max_concurrent: int) -> None:
    h = make(root, max_concurrent=max_concurrent)
    h.clock.advance(100)
    h.coord.tick()
    h.clock.advance(100)
    decision = h.coord.tick()
    if max_concurrent == 1:
        assert isinstance(decision, Blocked) and "too many concurrent" in decision.reason
        assert h.coord.pending_checkpoint_ids() == [1]
    else:
        assert decision == TriggerNow(CheckpointId(2))
        assert h.coord.pending_checkpoint_ids() == [1, 2]


def test_forced_final_checkpoint_ignores_pause_interval_and_concurrency(root: str) -> None:
    h = make(root, min_pause_ms=10_000, interval_ms=-1)
    assert h.checkpoint() == 1
    assert isinstance(h.coord.trigger_checkpoint(), WaitUntil)  # min pause holds for manual
    h.coord.trigger_checkpoint(force=True)
    assert h.coord.trigger_checkpoint(force=True) == TriggerNow(CheckpointId(3))
    assert isinstance(h.coord.tick(), Blocked)  # periodic disabled


# --- completion ---------------------------------------------------------------------------------


def test_metadata_is_written_only_after_every_ack(root: str) -> None:
    h = make(root)
    h.coord.trigger_checkpoint()
    assert h.ack(1, SRC0) is AckResult.SUCCESS
    assert h.ack(1, AGG) is AckResult.SUCCESS
    chk = h.storage.checkpoint_dir(1)
    assert exists(chk) and not exists(chk + "/_metadata")
    assert h.coord.completed_checkpoints() == [] and h.gateway.completed == []
    h.clock.advance(30)
    assert h.ack(1, SRC1) is AckResult.SUCCESS
    assert exists(chk + "/_metadata")
    assert h.gateway.completed == [1]
    cp = load_checkpoint(chk)
    assert h.coord.latest_completed() == cp
    verify(cp.metadata, cp.directory, check_crc=True)
    src = cp.metadata.operators[OperatorUid("src")]
    assert (src.parallelism, sorted(src.subtasks)) == (2, [0, 1])
    assert src.subtasks[1].inline_value("offset") == 10
    assert cp.metadata.duration_ms == 30 and cp.metadata.stats.num_subtasks == 3
    stats = h.coord.stats.get(CheckpointId(1))
    assert stats is not None and stats.end_to_end_duration_ms == 30
    assert stats.subtasks[AGG].metrics.sync_duration_ms == 1


def test_retained_count_subsumes_old_checkpoints(root: str) -> None:
    h = make(root, retained=2)
    for _ in range(3):
        h.checkpoint()
    assert [cp.checkpoint_id for cp in h.coord.completed_checkpoints()] == [2, 3]
    assert not exists(h.storage.checkpoint_dir(1))
    assert exists(h.storage.checkpoint_dir(2) + "/_metadata")
    assert h.gateway.completed == [1, 2, 3]


def test_completion_subsumes_older_pending_checkpoint(root: str) -> None:
    h = make(root, max_concurrent=2, tolerable_failures=0)
    h.coord.trigger_checkpoint()
    h.ack(1, SRC0)
    h.coord.trigger_checkpoint()
    h.ack_all(2)
    assert h.gateway.completed == [2]
    assert [(c, r.split(":")[0]) for c, r in h.gateway.aborted] == [(1, "CHECKPOINT_SUBSUMED")]
    assert not exists(h.storage.checkpoint_dir(1)) and h.gateway.failures == []


def test_ack_results_are_typed(root: str) -> None:
    h = make(root)
    h.coord.trigger_checkpoint(force=True)
    assert h.ack(1, SRC0) is AckResult.SUCCESS
    assert h.ack(1, SRC0) is AckResult.DUPLICATE
    stranger = TaskKey(VertexId(7), SubtaskIndex(0))
    assert h.coord.receive_ack(TaskAcknowledgement(CheckpointId(1), stranger)) is (
        AckResult.UNKNOWN
    )
    assert h.coord.receive_ack(TaskAcknowledgement(CheckpointId(99), SRC0)) is AckResult.UNKNOWN
    h.ack(1, SRC1)
    h.ack(1, AGG)
    assert h.ack(1, AGG) is AckResult.DUPLICATE  # after completion
    assert h.gateway.completed == [1]


# --- failures -----------------------------------------------------------------------------------


def test_timeout_aborts_and_removes_files_and_late_ack_is_discarded(root: str) -> None:
    h = make(root, tolerable_failures=5, interval_ms=-1)
    h.coord.trigger_checkpoint()
    h.ack(1, SRC0)
    assert exists(h.storage.checkpoint_dir(1))
    h.clock.advance(999)
    h.coord.tick()
    assert h.coord.pending_checkpoint_ids() == [1]
    h.clock.advance(1)
    h.coord.tick()
    assert h.coord.pending_checkpoint_ids() == []
    assert h.coord.wait_for_cleanup(10.0)  # its files go in the background, in order
    assert not exists(h.storage.checkpoint_dir(1))
    ((cid, reason),) = h.gateway.aborted
    assert cid == 1 and reason.startswith("CHECKPOINT_EXPIRED")
    assert "vertex 0 subtask 1" in reason and "vertex 1 subtask 0" in reason  # who was missing
    stats = h.coord.stats.get(CheckpointId(1))
    assert stats is not None and stats.failure_reason == "CHECKPOINT_EXPIRED"
    # A slow task finishes writing after the abort: its files must not linger.
    assert h.ack(1, SRC1) is AckResult.DISCARDED
    assert not exists(h.storage.checkpoint_dir(1))
    assert h.gateway.failures == []


def test_consecutive_failures_beyond_tolerance_fail_the_job(root: str) -> None:
    h = make(root, tolerable_failures=1, timeout_ms=100, interval_ms=-1)
    h.coord.trigger_checkpoint()
    h.clock.advance(100)
    h.coord.tick()
    assert h.gateway.failures == []
    h.checkpoint()  # a success resets the count
    h.coord.trigger_checkpoint()
    h.clock.advance(100)
    h.coord.tick()
    assert h.gateway.failures == []
    h.coord.trigger_checkpoint()
    h.clock.advance(100)
    h.coord.tick()
    assert len(h.gateway.failures) == 1
    assert "tolerable failure threshold" in h.gateway.failures[0]


def test_decline_aborts_and_counts_as_failure(root: str) -> None:
    h = make(root, tolerable_failures=0)
    h.coord.trigger_checkpoint()
    h.ack(1, SRC0)
    declined = h.coord.receive_decline(
        TaskDecline(CheckpointId(1), AGG, CheckpointFailureReason.CHECKPOINT_DECLINED, "disk full")
    )
    assert declined and h.coord.wait_for_cleanup(10.0)
    assert not exists(h.storage.checkpoint_dir(1))
    assert "disk full" in h.gateway.aborted[0][1]
    assert len(h.gateway.failures) == 1
    assert not h.coord.receive_decline(
        TaskDecline(CheckpointId(1), SRC1, CheckpointFailureReason.CHECKPOINT_DECLINED)
    )


def test_decline_by_a_task_not_ready_is_not_counted(root: str) -> None:
    h = make(root, tolerable_failures=0)
    h.coord.trigger_checkpoint()
    h.coord.receive_decline(
        TaskDecline(
            CheckpointId(1),
            SRC1,
            CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY,
            "starting",
        )
    )
    assert h.gateway.aborted[0][0] == 1 and h.gateway.failures == []


def test_failover_aborts_pending_without_counting_and_ids_keep_increasing(root: str) -> None:
    h = make(root, tolerable_failures=0, max_concurrent=2)
    h.coord.trigger_checkpoint()
    h.coord.trigger_checkpoint()
    h.coord.abort_all_pending("task failed: boom")
    assert [c for c, _ in h.gateway.aborted] == [1, 2] and h.gateway.failures == []
    assert h.checkpoint() == 3


def test_metadata_write_failure_aborts_as_io_error(tmp_path: Path) -> None:
    h = make(str(tmp_path), tolerable_failures=0)
    (tmp_path / "job-1").mkdir()
    (tmp_path / "job-1" / "chk-1").write_text("a file where the directory should be")
    h.coord.trigger_checkpoint()
    for task in TASKS:
        h.coord.receive_ack(TaskAcknowledgement(CheckpointId(1), task))
    assert h.gateway.completed == [] and h.coord.completed_checkpoints() == []
    assert h.gateway.aborted[0][1].startswith("IO_EXCEPTION")
    assert len(h.gateway.failures) == 1


# --- shutdown -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "status", "kept"),
    [
        (RetentionPolicy.DELETE_ON_CANCELLATION, TerminalJobStatus.CANCELED, False),
        (RetentionPolicy.DELETE_ON_CANCELLATION, TerminalJobStatus.FAILED, True),
        (RetentionPolicy.RETAIN_ON_CANCELLATION, TerminalJobStatus.CANCELED, True),
        (RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS, TerminalJobStatus.FAILED, False),
    ],
)
def test_shutdown_applies_retention_policy(
    root: str, policy: RetentionPolicy, status: TerminalJobStatus, kept: bool
) -> None:
    h = make(root, retention=policy)
    h.checkpoint()
    h.coord.trigger_checkpoint(force=True)
    h.coord.shutdown(status)
    assert exists(h.storage.checkpoint_dir(1) + "/_metadata") is kept
    assert exists(h.storage.job_dir) is kept
    assert not exists(h.storage.checkpoint_dir(2))  # the pending one is always aborted
    assert h.gateway.aborted[0][1].startswith("CHECKPOINT_COORDINATOR_SHUTDOWN")
    assert isinstance(h.coord.tick(), Blocked)
    assert h.ack(2, SRC0) is AckResult.DISCARDED


class JobStatus(enum.Enum):  # shaped like cairn.common.JobStatus (Flink's names)
    RUNNING = 2
    FAILED = 4


def test_shutdown_accepts_job_status_enums_by_name(root: str) -> None:
    h = make(root, retention=RetentionPolicy.DELETE_ON_CANCELLATION)
    h.checkpoint()
    with pytest.raises(ValueError, match="RUNNING is not a terminal job status"):
        h.coord.shutdown(JobStatus.RUNNING)
    h.coord.shutdown(JobStatus.FAILED)
    assert exists(h.storage.checkpoint_dir(1) + "/_metadata")  # kept: the job failed
    assert h.coord.latest_completed_id() == 1 and not h.coord.has_pending()
