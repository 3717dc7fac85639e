"""Scripted barrier sequences against both handlers (Flink's barrier-handler test style);
the script language is ``_barrier_harness``'s."""

from __future__ import annotations

import pytest

import cairn.runtime.barriers as barriers
from cairn.events import (
    AlignmentMode,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
)
from cairn.ids import CheckpointId
from cairn.runtime.barriers import (
    AlignedBarrierHandler,
    AlignmentStats,
    BarrierTracker,
    CheckpointFailureReason,
    IllegalBarrierEventError,
    ManualClock,
    create_barrier_handler,
)
from cairn.runtime.barriers.handler_states import CollectingBarriers, WaitingForFirstBarrier

from ._barrier_harness import ALIGNED, AT_LEAST_ONCE, BarrierHandlerHarness, Recorder


def harness(mode: AlignmentMode, num_channels: int, start_ms: int = 0) -> BarrierHandlerHarness:
    actions, clock = Recorder(), ManualClock(start_ms)
    return BarrierHandlerHarness(
        create_barrier_handler(mode, num_channels, actions, clock), actions, clock
    )


# -- aligned exactly-once ------------------------------------------------------------------


def test_aligned_single_channel_triggers_on_each_barrier_without_staying_blocked() -> None:
    h = harness(ALIGNED, 1)
    assert h.feed("0:R 0:B1 0:R 0:B2") == [set(), set(), set(), set()]
    assert h.log == ["T1", "T2"]
    assert h.actions.stats[1].alignment_duration_ms == 0


def test_aligned_handler_aligns_barriers_that_ask_for_unaligned_until_issue_4() -> None:
    h = harness(ALIGNED, 2)
    unaligned = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)
    h.barriers[1] = CheckpointBarrier(CheckpointId(1), 0, unaligned)
    assert h.feed("0:B1 1:B1") == [{0}, set()]
    assert h.log == ["T1"]


def test_aligned_two_channels_block_until_the_last_barrier() -> None:
    h = harness(ALIGNED, 2)
    assert h.feed("0:B1 1:R 1:R 1:B1 0:R") == [{0}, {0}, {0}, set(), set()]
    assert h.log == ["T1"]
    assert not h.handler.is_aligning


def test_aligned_three_channels_trigger_once_after_all_barriers() -> None:
    h = harness(ALIGNED, 3)
    blocked = h.feed("1:R 0:B1 1:R 2:B1 1:R 1:B1")
    assert blocked == [set(), {0}, {0}, {0, 2}, {0, 2}, set()]
    assert h.log == ["T1"]
    assert h.handler.latest_checkpoint_id == 1


def test_aligned_state_machine_moves_waiting_collecting_waiting() -> None:
    h = harness(ALIGNED, 2)
    handler = h.handler
    assert isinstance(handler, AlignedBarrierHandler)
    assert type(handler.state) is WaitingForFirstBarrier
    h.feed("0:B1")
    assert type(handler.state) is CollectingBarriers
    assert handler.is_aligning
    h.feed("1:B1")
    assert type(handler.state) is WaitingForFirstBarrier
    h.feed("1:B2 0:B2")
    assert h.log == ["T1", "T2"]


def test_aligned_newer_barrier_subsumes_checkpoint_in_progress() -> None:
    h = harness(ALIGNED, 3)
    assert h.feed("0:B1 1:B2") == [{0}, {1}]
    assert h.log == ["A1/subsumed"]
    assert h.feed("0:B2 2:B2") == [{0, 1}, set()]
    assert h.log == ["A1/subsumed", "T2"]


def test_aligned_late_barrier_of_subsumed_checkpoint_is_ignored_and_never_blocks() -> None:
    h = harness(ALIGNED, 3)
    assert h.feed("0:B1 1:B2 2:B1 2:R") == [{0}, {1}, {1}, {1}]
    assert h.log == ["A1/subsumed"]
    h.feed("0:B2 2:B2")
    assert h.log == ["A1/subsumed", "T2"]


def test_aligned_cancel_marker_of_current_checkpoint_unblocks_and_ignores_its_barriers() -> None:
    h = harness(ALIGNED, 3)
    assert h.feed("0:B1 1:C1 2:B1 1:B2") == [{0}, set(), set(), {1}]
    assert h.log == ["A1/cancelled"]
    h.feed("0:B2 2:B2")
    assert h.log == ["A1/cancelled", "T2"]


def test_aligned_cancel_marker_of_unseen_newer_id_aborts_both_and_remembers_it() -> None:
    h = harness(ALIGNED, 2)
    assert h.feed("0:B1 1:C2 0:B2 1:B2") == [{0}, set(), set(), set()]
    assert h.log == ["A1/subsumed", "A2/cancelled"]
    assert h.handler.latest_checkpoint_id == 2
    assert not h.handler.is_aligning


def test_aligned_cancel_markers_from_every_channel_abort_only_once() -> None:
    h = harness(ALIGNED, 3)
    h.feed("0:C4 1:C4 2:C4")
    assert h.log == ["A4/cancelled"]


def test_aligned_cancel_marker_after_completion_is_ignored() -> None:
    h = harness(ALIGNED, 2)
    h.feed("0:B1 1:B1 0:C1 1:C0")
    assert h.log == ["T1"]


def test_aligned_end_of_partition_before_alignment_shrinks_the_channel_set() -> None:
    h = harness(ALIGNED, 2)
    assert h.feed("0:E 1:B1") == [set(), set()]
    assert h.log == ["T1"]
    assert h.handler.num_open_channels == 1


def test_aligned_end_of_partition_while_aligning_completes_when_rest_delivered() -> None:
    h = harness(ALIGNED, 3, start_ms=1_000)
    assert h.feed("0:B1@900 1:E +40") == [{0}, {0}, {0}]
    assert h.log == []
    assert h.feed("2:E") == [set()]
    assert h.log == ["T1"]
    assert h.actions.stats[1] == AlignmentStats(CheckpointId(1), 1_000, 40, 100)


def test_aligned_end_of_partition_on_all_unblocked_channels_triggers() -> None:
    h = harness(ALIGNED, 2)
    h.feed("1:B3 0:E")
    assert h.log == ["T3"]
    assert h.handler.num_open_channels == 1
    h.feed("1:B4")
    assert h.log == ["T3", "T4"]


def test_aligned_external_abort_unblocks_and_later_barriers_are_ignored() -> None:
    h = harness(ALIGNED, 2)
    assert h.feed("0:B1 X1 1:B1 1:R") == [{0}, set(), set(), set()]
    assert h.log == ["A1/expired"]
    h.feed("X1 X0")  # already aborted / older: no-ops
    assert h.log == ["A1/expired"]


def test_aligned_external_abort_of_future_id_and_of_completed_id() -> None:
    h = harness(ALIGNED, 2)
    h.feed("0:B1 1:B1 X1 X3 0:B3 1:B3 0:B4 1:B4")
    assert h.log == ["T1", "A3/expired", "T4"]


def test_aligned_stats_start_delay_and_alignment_duration() -> None:
    h = harness(ALIGNED, 3, start_ms=10_000)
    h.feed("+5 1:B7@9_950 +20 0:B7 +15 2:B7".replace("_", ""))
    assert h.actions.stats[7] == AlignmentStats(
        checkpoint_id=CheckpointId(7),
        first_barrier_ms=10_005,
        alignment_duration_ms=35,
        start_delay_ms=55,
    )


def test_aligned_start_delay_is_clamped_when_barrier_clock_is_ahead() -> None:
    h = harness(ALIGNED, 1, start_ms=500)
    h.feed("0:B1@800")
    assert h.actions.stats[1].start_delay_ms == 0


ILLEGAL_ALIGNED = {
    "barrier after end of partition": ("0:E", lambda h: h.handler.on_barrier(0, h.barrier(1))),
    "same barrier twice from a blocked channel": (
        "0:B1",
        lambda h: h.handler.on_barrier(0, h.barrier(1)),
    ),
    "same barrier twice after completion": (
        "0:B1 1:B1",
        lambda h: h.handler.on_barrier(0, h.barrier(1)),
    ),
    "barrier id going backwards on a channel": (
        "0:B2 1:B2",
        lambda h: h.handler.on_barrier(1, h.barrier(1)),
    ),
    "cancel marker on a blocked channel": (
        "0:B1",
        lambda h: h.handler.on_cancel_marker(0, CancelCheckpointMarker(CheckpointId(1))),
    ),
    "end of partition on a blocked channel": ("0:B1", lambda h: h.handler.on_end_of_partition(0)),
    "end of partition twice": ("1:E", lambda h: h.handler.on_end_of_partition(1)),
    "channel out of range": ("", lambda h: h.handler.on_barrier(2, h.barrier(1))),
}


@pytest.mark.parametrize("case", list(ILLEGAL_ALIGNED))
def test_aligned_illegal_event_raises_and_leaves_handler_unchanged(case: str) -> None:
    prefix, event = ILLEGAL_ALIGNED[case]
    h = harness(ALIGNED, 2)
    h.feed(prefix)
    handler = h.handler

    def books() -> tuple[object, ...]:
        return (handler.blocked_channels, handler.is_aligning, handler.num_open_channels)

    before, log_before = books(), list(h.log)
    with pytest.raises(IllegalBarrierEventError):
        event(h)
    assert books() == before
    assert h.log == log_before


# -- at-least-once ---------------------------------------------------------------------------


def test_tracker_never_blocks_and_triggers_when_all_channels_delivered() -> None:
    h = harness(AT_LEAST_ONCE, 3)
    assert h.feed("0:B1 0:R 2:B1 0:R 1:R 1:B1") == [set()] * 6
    assert h.log == ["T1"]


def test_tracker_tracks_several_pending_checkpoints() -> None:
    h = harness(AT_LEAST_ONCE, 2)
    h.feed("0:B1 0:B2 0:B3")
    handler = h.handler
    assert isinstance(handler, BarrierTracker)
    assert handler.pending_checkpoint_ids == (1, 2, 3)
    assert handler.is_aligning
    h.feed("1:B1")
    assert h.log == ["T1"]
    h.feed("1:B2 1:B3")
    assert h.log == ["T1", "T2", "T3"]
    assert not handler.is_aligning


def test_tracker_newer_checkpoint_completing_subsumes_older_pending_ones() -> None:
    h = harness(AT_LEAST_ONCE, 3)
    h.feed("0:B1 0:B2 1:B2 1:B3 2:B2")
    assert h.log == ["A1/subsumed", "T2"]
    assert isinstance(h.handler, BarrierTracker)
    assert h.handler.pending_checkpoint_ids == (3,)


def test_tracker_cancel_marker_aborts_that_id_and_drops_older_ones() -> None:
    h = harness(AT_LEAST_ONCE, 3)
    h.feed("0:B1 1:C2 2:C2 2:B1 0:B2 0:B3 1:B3 2:B3")
    # B1 on channel 2 comes after 1 was dropped; B2 on channel 0 belongs to the aborted 2.
    assert h.log == ["A1/subsumed", "A2/cancelled", "T3"]
    assert h.handler.latest_checkpoint_id == 3


def test_tracker_end_of_partition_completes_pending_checkpoints_in_order() -> None:
    h = harness(AT_LEAST_ONCE, 3)
    h.feed("0:B1 1:B1 0:B2 1:B2 2:E")
    assert h.log == ["T1", "T2"]
    assert h.handler.num_open_channels == 2
    h.feed("0:B3 1:B3")
    assert h.log == ["T1", "T2", "T3"]


def test_tracker_external_abort_absorbs_the_barriers_of_that_checkpoint() -> None:
    h = harness(AT_LEAST_ONCE, 2)
    h.feed("0:B1 X1 1:B1 X2 0:B2 1:B2 0:B3 1:B3 X3")
    assert h.log == ["A1/expired", "A2/expired", "T3"]
    assert not h.handler.is_aligning


def test_tracker_bounds_the_number_of_pending_checkpoints() -> None:
    actions, clock = Recorder(), ManualClock()
    tracker = BarrierTracker(2, actions, clock, max_pending=2)
    h = BarrierHandlerHarness(tracker, actions, clock)
    h.feed("0:B1 0:B2 0:B3 1:B1")  # 1 was evicted: its last barrier is ignored
    assert h.log == ["A1/subsumed"]
    assert tracker.pending_checkpoint_ids == (2, 3)


def test_tracker_stats_measure_first_to_last_barrier() -> None:
    h = harness(AT_LEAST_ONCE, 2, start_ms=2_000)
    h.feed("1:B5@1990 +7 1:B6@1995 +3 0:B5")
    assert h.actions.stats[5] == AlignmentStats(CheckpointId(5), 2_000, 10, 10)
    assert h.log == ["T5"]


@pytest.mark.parametrize(
    ("prefix", "event"),
    [
        ("0:E", "0:B1"),
        ("0:B1", "0:B1"),
        ("0:B3", "0:B2"),
        ("1:E", "1:C1"),
        ("1:E", "1:E"),
        ("", "3:B1"),
    ],
)
def test_tracker_illegal_event_raises(prefix: str, event: str) -> None:
    h = harness(AT_LEAST_ONCE, 3)
    h.feed(prefix)
    with pytest.raises(IllegalBarrierEventError):
        h.feed(event)
    assert h.log == []


# -- both modes ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [ALIGNED, AT_LEAST_ONCE])
def test_both_modes_newer_barrier_wins_over_an_older_incomplete_one(mode: AlignmentMode) -> None:
    h = harness(mode, 2)
    h.feed("0:B1 0:B2 1:B2" if mode is AT_LEAST_ONCE else "0:B1 1:B2 0:B2")
    assert h.log == ["A1/subsumed", "T2"]
    assert h.handler.latest_checkpoint_id == 2
    assert not h.handler.is_aligning


def test_factory_builds_one_handler_per_mode_and_rejects_the_rest() -> None:
    actions = Recorder()
    assert isinstance(create_barrier_handler(ALIGNED, 2, actions), AlignedBarrierHandler)
    assert isinstance(create_barrier_handler(AT_LEAST_ONCE, 2, actions), BarrierTracker)
    assert create_barrier_handler(ALIGNED, 1, actions).mode is ALIGNED
    with pytest.raises(NotImplementedError):
        create_barrier_handler(AlignmentMode.UNALIGNED, 2, actions)
    with pytest.raises(ValueError):
        create_barrier_handler(ALIGNED, 0, actions)


def test_failure_reasons_and_manual_clock() -> None:
    assert CheckpointFailureReason.CHECKPOINT_EXPIRED.message.startswith("Checkpoint expired")
    assert CheckpointFailureReason.TOO_MANY_CONCURRENT_CHECKPOINTS.is_pre_flight
    assert not CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED.is_pre_flight
    clock = ManualClock(5)
    clock.advance(0)
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.now_ms() == 5


def test_public_api_is_pinned() -> None:
    assert sorted(barriers.__all__) == [
        "AlignedBarrierHandler",
        "AlignmentStats",
        "BarrierHandler",
        "BarrierHandlerActions",
        "BarrierTracker",
        "CheckpointFailureReason",
        "Clock",
        "IllegalBarrierEventError",
        "ManualClock",
        "SystemClock",
        "create_barrier_handler",
    ]
