"""Scripted sequences for the announcement events of the unaligned / alternating handler.

The task asks ``on_barrier_announced`` about every priority barrier a channel announced and
does what it answers; ``check_alignment_timeout`` tells it when an announced barrier waiting
in its place may overtake. Script tokens: those of ``_barrier_harness.UnalignedHarness``
(``c:A<n>``, ``!``, ...).
"""

from __future__ import annotations

from cairn.events import AlignmentMode, CheckpointBarrier, CheckpointOptions
from cairn.ids import CheckpointId
from cairn.runtime.barriers import ManualClock, create_barrier_handler
from cairn.runtime.barriers.alternating import AlternatingCollectingBarriersUnaligned
from cairn.runtime.barriers.api import Announcement
from tests.unit._barrier_harness import (
    ALIGNED,
    SAVEPOINT,
    UNALIGNED,
    UnalignedRecorder,
    unaligned_harness,
)


def test_announced_barriers_of_an_unaligned_checkpoint_overtake() -> None:
    h = unaligned_harness(3)
    h.feed("0:A1 0:B1 1:A1 1:B1")
    assert h.announced == ["OVERTAKE", "OVERTAKE"]
    assert h.log == ["I1[1,2]", "T1"]
    assert h.unaligned.next_timeout_ms is None


def test_announced_barrier_keeps_its_place_until_its_timeout_then_overtakes() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    assert h.feed("+20 0:A1@0 +79 ! 0:A1") == [set()] * 5
    assert h.announced == ["IN_ORDER", "IN_ORDER"]
    assert h.switched == [False]
    assert h.unaligned.next_timeout_ms == 100  # counted from the checkpoint's start
    h.feed("+1 !")
    assert h.switched == [False, True]  # nothing switched here: the announcement is due
    assert h.unaligned.next_timeout_ms is None and h.log == []
    h.feed("0:A1 0:B1")
    assert h.announced[-1] == "OVERTAKE"
    assert h.log == ["I1[1]", "T1"]  # delivered after its timeout: unaligned at once


def test_announced_barrier_of_an_aligning_checkpoint_overtakes_once_it_switches() -> None:
    h = unaligned_harness(3, ALIGNED, aligned_timeout_ms=100)
    h.feed("0:B1 1:A1")
    assert h.announced == ["IN_ORDER"]
    assert h.unaligned.next_timeout_ms == 100  # the checkpoint's own timeout, booked once
    assert h.feed("+100 ! 1:A1 1:B1 2:A1") == [{0}, set(), set(), set(), set()]
    assert h.switched == [True]
    assert h.announced == ["IN_ORDER", "OVERTAKE", "OVERTAKE"]
    assert h.log == ["I1[1,2]", "T1"]
    assert type(h.unaligned.state) is AlternatingCollectingBarriersUnaligned


def test_announced_barrier_of_an_aligning_checkpoint_from_a_switched_upstream_overtakes() -> None:
    h = unaligned_harness(3, ALIGNED, aligned_timeout_ms=10_000)
    h.feed("0:B1")
    switched = CheckpointBarrier(CheckpointId(1), 0, CheckpointOptions(alignment=UNALIGNED))
    assert h.unaligned.on_barrier_announced(1, switched) is Announcement.OVERTAKE
    assert h.log == []  # the switch happens when the task delivers it


def test_announced_barrier_of_a_newer_checkpoint_is_judged_on_its_own_options() -> None:
    h = unaligned_harness(3, ALIGNED, aligned_timeout_ms=100)
    h.feed("0:B1 +100 !")  # checkpoint 1 switched: channels 1 and 2 record
    assert h.log == ["I1[1,2]", "T1"]
    h.barriers[2] = CheckpointBarrier(
        CheckpointId(2), 100, CheckpointOptions(aligned_timeout_ms=50)
    )
    h.feed("0:A2")
    assert h.announced == ["IN_ORDER"]
    assert h.unaligned.next_timeout_ms == 150
    switched = CheckpointBarrier(CheckpointId(2), 100, CheckpointOptions(alignment=UNALIGNED))
    assert h.unaligned.on_barrier_announced(1, switched) is Announcement.OVERTAKE
    h.feed("+49 ! +1 ! 0:A2")
    assert h.switched == [True, False, True]
    assert h.announced[-1] == "OVERTAKE"
    assert h.log == ["I1[1,2]", "T1"]  # announcements alone change no checkpoint


def test_announced_barriers_of_checkpoints_over_here_are_obsolete() -> None:
    h = unaligned_harness(3)
    h.feed("0:B1 0:A1 X1 1:A1")  # delivered on that channel already; aborted here
    h.feed("0:B2 1:C2 2:A2 2:A1")  # cancelled here; older than the latest
    assert h.announced == ["OBSOLETE"] * 4
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    h.feed("0:B1 1:B1 0:A2 1:A1")  # completed aligned; a newer one is not obsolete
    assert h.announced == ["IN_ORDER", "OBSOLETE"]


def test_savepoint_announcement_keeps_its_place_and_sets_no_timeout() -> None:
    h = unaligned_harness(2, UNALIGNED, aligned_timeout_ms=0)
    h.barriers[1] = CheckpointBarrier(CheckpointId(1), 0, SAVEPOINT)
    h.feed("0:A1 +10000 ! 0:A1")
    assert h.announced == ["IN_ORDER", "IN_ORDER"]
    assert h.switched == [False] and h.unaligned.next_timeout_ms is None


def test_last_barrier_id_is_every_handlers_one_record_per_channel() -> None:
    for mode in (ALIGNED, AlignmentMode.AT_LEAST_ONCE, UNALIGNED):
        handler = create_barrier_handler(mode, 2, UnalignedRecorder(), ManualClock())
        handler.on_barrier(0, CheckpointBarrier(CheckpointId(3), 0))
        assert (handler.last_barrier_id(0), handler.last_barrier_id(1)) == (3, -1), mode
