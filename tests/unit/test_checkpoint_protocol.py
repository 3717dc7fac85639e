"""Pure checkpoint protocol decisions: no storage, no clock, no I/O."""

from __future__ import annotations

import pytest

from cairn.checkpoint.handles import OperatorSubtaskState, pickle_inline
from cairn.checkpoint.messages import (
    AckResult,
    CheckpointFailureReason,
    TaskAcknowledgement,
    TaskKey,
)
from cairn.checkpoint.pending import PendingCheckpoint
from cairn.checkpoint.protocol import (
    Blocked,
    CheckpointFailureManager,
    FailJob,
    FallbackRefused,
    FallbackRule,
    FallbackToPrevious,
    NothingUsable,
    RestoreCandidate,
    RestoreFrom,
    TerminalJobStatus,
    Tolerated,
    TriggerFacts,
    TriggerNow,
    TriggerPolicy,
    WaitUntil,
    checkpoint_options,
    checkpoints_to_discard,
    choose_restore,
    decide_trigger,
    discard_on_termination,
    expired_checkpoints,
)
from cairn.common.config_options import ALLOW_FALLBACK_PAST_COMMITTED
from cairn.events import AlignmentMode, CheckpointOptions, CheckpointType
from cairn.ids import CheckpointId, OperatorUid, SubtaskIndex, VertexId
from cairn.settings import CheckpointSettings, RetentionPolicy

C = CheckpointId
R = CheckpointFailureReason


def facts(
    now: int,
    pending: int = 0,
    last_trigger: int | None = None,
    last_completion: int | None = None,
    next_id: int = 7,
) -> TriggerFacts:
    return TriggerFacts(
        now,
        C(next_id),
        pending,
        started_ms=0,
        last_trigger_ms=last_trigger,
        last_completion_ms=last_completion,
    )


# --- trigger ------------------------------------------------------------------------------------


def test_periodic_trigger_is_due_one_interval_after_start_and_after_each_trigger() -> None:
    policy = TriggerPolicy(interval_ms=100)
    assert decide_trigger(policy, facts(99), periodic=True) == WaitUntil(
        100, "checkpoint interval of 100 ms"
    )
    assert decide_trigger(policy, facts(100), periodic=True) == TriggerNow(C(7))
    d = decide_trigger(policy, facts(250, last_trigger=200, last_completion=210), periodic=True)
    assert isinstance(d, WaitUntil) and d.time_ms == 300


def test_min_pause_is_measured_from_the_last_completion_not_the_trigger() -> None:
    policy = TriggerPolicy(interval_ms=100, min_pause_ms=500)
    # Interval long passed, but the last checkpoint completed only 100 ms ago.
    d = decide_trigger(policy, facts(1000, last_trigger=300, last_completion=900), periodic=True)
    assert isinstance(d, WaitUntil) and d.time_ms == 1400
    d = decide_trigger(policy, facts(1400, last_trigger=300, last_completion=900), periodic=True)
    assert d == TriggerNow(C(7))


def test_max_concurrent_blocks_and_force_ignores_every_limit() -> None:
    policy = TriggerPolicy(interval_ms=100, min_pause_ms=10_000, max_concurrent=2)
    assert isinstance(decide_trigger(policy, facts(500, pending=2), periodic=True), Blocked)
    assert decide_trigger(policy, facts(500, pending=1), periodic=True) == TriggerNow(C(7))
    busy = facts(1, pending=5, last_trigger=0, last_completion=1)
    assert decide_trigger(policy, busy, periodic=True, force=True) == TriggerNow(C(7))


def test_disabled_periodic_checkpointing_still_allows_manual_triggers() -> None:
    policy = TriggerPolicy(interval_ms=-1)
    assert decide_trigger(policy, facts(10**9), periodic=True) == Blocked(
        "periodic checkpointing is disabled"
    )
    assert decide_trigger(policy, facts(5), periodic=False) == TriggerNow(C(7))


def test_expired_checkpoints_are_those_past_their_timeout_oldest_first() -> None:
    trig = {C(3): 250, C(1): 0, C(2): 100}
    assert expired_checkpoints(trig, now_ms=200, timeout_ms=100) == [1, 2]
    assert expired_checkpoints(trig, now_ms=99, timeout_ms=100) == []


def test_barrier_options_follow_settings_and_savepoints_are_aligned() -> None:
    alo = CheckpointSettings(mode=AlignmentMode.AT_LEAST_ONCE)
    assert checkpoint_options(alo).alignment is AlignmentMode.AT_LEAST_ONCE
    sp = checkpoint_options(alo, savepoint=True)
    assert (sp.type, sp.alignment) == (CheckpointType.SAVEPOINT, AlignmentMode.ALIGNED)
    assert checkpoint_options(CheckpointSettings(unaligned=True)).alignment is (
        AlignmentMode.UNALIGNED
    )


# --- pending checkpoint --------------------------------------------------------------------------

T0, T1 = TaskKey(VertexId(0), SubtaskIndex(0)), TaskKey(VertexId(0), SubtaskIndex(1))
STRANGER = TaskKey(VertexId(9), SubtaskIndex(0))


def test_pending_checkpoint_ack_accounting() -> None:
    p = PendingCheckpoint(C(1), 0, CheckpointOptions(), [T0, T1])
    assert p.acknowledge(TaskAcknowledgement(C(1), T0), 5) is AckResult.SUCCESS
    assert not p.is_fully_acknowledged and p.not_yet_acknowledged == {T1}
    assert p.acknowledge(TaskAcknowledgement(C(1), T0), 6) is AckResult.DUPLICATE
    assert p.acknowledge(TaskAcknowledgement(C(1), STRANGER), 6) is AckResult.UNKNOWN
    assert not p.is_fully_acknowledged
    assert p.acknowledge(TaskAcknowledgement(C(1), T1), 9) is AckResult.SUCCESS
    assert p.is_fully_acknowledged and p.latest_ack_ms == 9


def test_discarded_pending_checkpoint_discards_later_acks() -> None:
    p = PendingCheckpoint(C(1), 0, CheckpointOptions(), [T0])
    p.discard()
    assert p.acknowledge(TaskAcknowledgement(C(1), T0), 1) is AckResult.DISCARDED
    assert not p.is_fully_acknowledged
    with pytest.raises(ValueError, match="checkpoint 2"):
        p.acknowledge(TaskAcknowledgement(C(2), T0), 1)


def test_pending_operator_states_by_subtask_drop_empty_ones() -> None:
    uid = OperatorUid("op")
    full = OperatorSubtaskState(inline=pickle_inline({"pos": 3}))
    p = PendingCheckpoint(C(1), 0, CheckpointOptions(), [T0, T1])
    p.acknowledge(TaskAcknowledgement(C(1), T0, {uid: OperatorSubtaskState()}), 1)
    p.acknowledge(TaskAcknowledgement(C(1), T1, {uid: full}), 1)
    assert p.operator_states() == {uid: {1: full}}


# --- subsumption, restore choice ----------------------------------------------------------------


def test_checkpoints_to_discard_keeps_the_newest_retained() -> None:
    assert checkpoints_to_discard([4, 2, 5, 1, 3], retained=2) == [1, 2, 3]
    assert checkpoints_to_discard([1, 2], retained=3) == []
    with pytest.raises(ValueError):
        checkpoints_to_discard([1], retained=0)


def test_choose_restore_takes_newest_usable_and_reports_skipped() -> None:
    good3, good2 = RestoreCandidate("c3", 3), RestoreCandidate("c2", 2)
    bad3 = RestoreCandidate("c3", 3, "checksum mismatch")
    assert choose_restore([good3, good2]) == RestoreFrom(good3)
    assert choose_restore([bad3, good2]) == FallbackToPrevious(good2, (bad3,))
    bad2 = RestoreCandidate("c2", 2, "missing file x")
    decision = choose_restore([bad3, bad2])
    assert decision == NothingUsable((bad3, bad2))
    assert isinstance(decision, NothingUsable)
    assert "c3: checksum mismatch" in decision.describe()
    assert "c2: missing file x" in decision.describe()
    assert choose_restore([]) == NothingUsable(())


# A checkpoint whose _metadata was truncated after its completion had been announced.
ANNOUNCED_BAD = RestoreCandidate("/c/chk-5", 5, "/c/chk-5/_metadata: truncated", committed=True)
OLDER_GOOD = RestoreCandidate("/c/chk-4", 4, committed=True)
SINKS = FallbackRule(committing_sinks=("file-sink",))


def test_fallback_past_an_announced_checkpoint_is_refused_with_committing_sinks() -> None:
    decision = choose_restore([ANNOUNCED_BAD, OLDER_GOOD], SINKS)
    assert decision == FallbackRefused(OLDER_GOOD, (ANNOUNCED_BAD,), ("file-sink",))
    assert isinstance(decision, FallbackRefused)
    message = decision.describe()
    assert "checkpoint 5 (/c/chk-5)" in message and "/c/chk-5/_metadata: truncated" in message
    assert "'file-sink'" in message
    assert "after checkpoint 4 (up to checkpoint 5) a second time" in message
    assert f"{ALLOW_FALLBACK_PAST_COMMITTED.key}: true" in message


def test_fallback_past_an_announced_checkpoint_is_allowed_on_request() -> None:
    rule = FallbackRule(("file-sink",), allow_past_committed=True)
    decision = choose_restore([ANNOUNCED_BAD, OLDER_GOOD], rule)
    assert decision == FallbackToPrevious(OLDER_GOOD, (ANNOUNCED_BAD,))
    assert isinstance(decision, FallbackToPrevious)
    assert decision.past_committed == (ANNOUNCED_BAD,)


def test_fallbacks_that_cannot_duplicate_committed_output_are_allowed() -> None:
    # No committing sink: nothing was committed, whatever was announced.
    assert choose_restore([ANNOUNCED_BAD, OLDER_GOOD]) == FallbackToPrevious(
        OLDER_GOOD, (ANNOUNCED_BAD,)
    )
    # A skipped checkpoint that was never announced: no sink committed its output.
    never_announced = RestoreCandidate("/c/chk-5", 5, "state file is missing")
    assert choose_restore([never_announced, OLDER_GOOD], SINKS) == FallbackToPrevious(
        OLDER_GOOD, (never_announced,)
    )
    # The newest is usable: no fallback, nothing to refuse; nothing usable: nothing to refuse.
    assert choose_restore([OLDER_GOOD, ANNOUNCED_BAD], SINKS) == RestoreFrom(OLDER_GOOD)
    assert choose_restore([ANNOUNCED_BAD], SINKS) == NothingUsable((ANNOUNCED_BAD,))


def test_refusal_names_the_newest_announced_checkpoint_skipped() -> None:
    unannounced = RestoreCandidate("/c/chk-6", 6, "CRC-32 mismatch")
    decision = choose_restore([unannounced, ANNOUNCED_BAD, OLDER_GOOD], SINKS)
    assert isinstance(decision, FallbackRefused)
    assert decision.skipped == (unannounced, ANNOUNCED_BAD)
    assert decision.describe().startswith("refusing to fall back past checkpoint 5 (/c/chk-5)")


# --- failure manager ----------------------------------------------------------------------------


def test_zero_tolerable_failures_fails_the_job_on_the_first_counted_failure() -> None:
    fm = CheckpointFailureManager(0)
    assert fm.on_failure(C(1), R.CHECKPOINT_SUBSUMED) == Tolerated(0, counted=False)
    assert fm.on_failure(C(2), R.JOB_FAILOVER_REGION) == Tolerated(0, counted=False)
    verdict = fm.on_failure(C(3), R.CHECKPOINT_DECLINED)
    assert isinstance(verdict, FailJob) and "CHECKPOINT_DECLINED" in verdict.reason


def test_consecutive_failures_beyond_tolerance_fail_and_success_resets() -> None:
    fm = CheckpointFailureManager(2)
    assert fm.on_failure(C(1), R.CHECKPOINT_EXPIRED) == Tolerated(1, counted=True)
    assert fm.on_failure(C(2), R.IO_EXCEPTION) == Tolerated(2, counted=True)
    fm.on_success(C(3))
    assert fm.consecutive_failures == 0
    assert fm.on_failure(C(4), R.CHECKPOINT_EXPIRED) == Tolerated(1, counted=True)
    assert fm.on_failure(C(5), R.CHECKPOINT_ASYNC_EXCEPTION) == Tolerated(2, counted=True)
    assert isinstance(fm.on_failure(C(6), R.CHECKPOINT_DECLINED), FailJob)


def test_failures_counted_once_per_checkpoint_and_not_before_last_success() -> None:
    fm = CheckpointFailureManager(1)
    fm.on_success(C(5))
    assert fm.on_failure(C(4), R.CHECKPOINT_EXPIRED) == Tolerated(0, counted=False)
    assert fm.on_failure(C(6), R.CHECKPOINT_DECLINED) == Tolerated(1, counted=True)
    assert fm.on_failure(C(6), R.CHECKPOINT_EXPIRED) == Tolerated(1, counted=False)


def test_savepoint_failures_count_only_when_a_task_reports_them() -> None:
    fm = CheckpointFailureManager(0)
    assert fm.on_failure(C(1), R.CHECKPOINT_EXPIRED, is_savepoint=True) == Tolerated(0, False)
    verdict = fm.on_failure(C(2), R.CHECKPOINT_DECLINED, is_savepoint=True, reported_by_task=True)
    assert isinstance(verdict, FailJob)


def test_decline_reason_strings_map_to_reasons() -> None:
    assert R.parse("CHECKPOINT_DECLINED_TASK_NOT_READY") is R.CHECKPOINT_DECLINED_TASK_NOT_READY
    assert not R.CHECKPOINT_DECLINED_TASK_NOT_READY.counts_as_failure
    assert R.parse("disk on fire") is R.CHECKPOINT_DECLINED
    assert R.CHECKPOINT_DECLINED.counts_as_failure


# --- retention ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "status", "discard"),
    [
        (RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS, TerminalJobStatus.FAILED, True),
        (RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS, TerminalJobStatus.CANCELED, True),
        (RetentionPolicy.DELETE_ON_CANCELLATION, TerminalJobStatus.CANCELED, True),
        (RetentionPolicy.DELETE_ON_CANCELLATION, TerminalJobStatus.FAILED, False),
        (RetentionPolicy.RETAIN_ON_CANCELLATION, TerminalJobStatus.CANCELED, False),
        (RetentionPolicy.RETAIN_ON_CANCELLATION, TerminalJobStatus.FAILED, False),
        (RetentionPolicy.RETAIN_ON_CANCELLATION, TerminalJobStatus.FINISHED, True),
    ],
)
def test_retention_follows_flink_checkpoint_properties(
    policy: RetentionPolicy, status: TerminalJobStatus, discard: bool
) -> None:
    assert discard_on_termination(policy, status) is discard
