"""Scripted sequences against the unaligned / alternating barrier handler (issue 4), in the
script language of ``_barrier_harness`` (``UnalignedHarness``)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from cairn.events import (
    AlignmentMode,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
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
from cairn.runtime.barriers.alternating import (
    AlternatingCollectingBarriers,
    AlternatingCollectingBarriersUnaligned,
    AlternatingWaitingForFirstBarrier,
)
from cairn.runtime.barriers.api import RecordingBarrierHandler
from cairn.runtime.barriers.unaligned import UnalignedBarrierHandler, resolve_options
from tests.unit._barrier_harness import (
    ALIGNED,
    SAVEPOINT,
    UNALIGNED,
    Recorder,
    UnalignedRecorder,
    unaligned_harness,
)

# -- unaligned from the first barrier --------------------------------------------------------


def test_first_barrier_triggers_at_once_and_blocks_nothing() -> None:
    h = unaligned_harness(3)
    assert h.feed("1:a 0:B1") == [set(), set()]
    assert h.log == ["I1[1,2]", "T1"]
    assert h.unaligned.recording_channels == {1, 2}
    assert h.actions.triggered[1].options.alignment is UNALIGNED
    stats = h.actions.stats[1]
    assert stats.unaligned and stats.alignment_duration_ms == 0


def test_recording_stops_per_channel_at_its_barrier_and_completes_at_the_last() -> None:
    h = unaligned_harness(3)
    blocked = h.feed("0:B1 0:a 1:b 2:c 1:B1 1:d 2:e 0:f 2:B1 2:g")
    assert blocked == [set()] * 10
    assert h.channel_state == {1: ["1:b", "2:c", "2:e"]}
    assert h.log == ["I1[1,2]", "T1", "D1"]
    assert not h.handler.is_aligning
    assert h.unaligned.recording_checkpoint_id is None


def test_single_channel_snapshots_unaligned_and_completes_in_the_same_event() -> None:
    h = unaligned_harness(1)
    h.feed("0:a 0:B1 0:b")
    assert h.log == ["I1[]", "T1", "D1"]
    assert h.channel_state == {}


def test_unaligned_state_machine_moves_through_the_alternating_states() -> None:
    h = unaligned_harness(2)
    handler = h.unaligned
    assert type(handler.state) is AlternatingWaitingForFirstBarrier
    h.feed("1:B1")
    assert type(handler.state) is AlternatingCollectingBarriersUnaligned
    assert handler.is_aligning
    h.feed("0:B1")
    assert type(handler.state) is AlternatingWaitingForFirstBarrier
    h.feed("0:B2 1:B2")
    assert h.log == ["I1[0]", "T1", "D1", "I2[1]", "T2", "D2"]


def test_late_barrier_of_a_completed_unaligned_checkpoint_and_abort_are_ignored() -> None:
    h = unaligned_harness(2)
    h.feed("0:B1 1:B1 X1 0:B2 X1 1:C1")
    assert h.log == ["I1[1]", "T1", "D1", "I2[1]", "T2"]
    assert h.unaligned.is_recording(1)


# -- aligned-checkpoint timeout (alternating) ------------------------------------------------


def test_aligned_until_the_timeout_then_switch_releases_blocked_and_records_the_rest() -> None:
    h = unaligned_harness(3, ALIGNED, aligned_timeout_ms=100)
    handler = h.unaligned
    assert h.feed("0:B1 +40 1:a 2:B1 +59 !") == [{0}, {0}, {0}, {0, 2}, {0, 2}, {0, 2}]
    assert h.switched == [False]
    assert type(handler.state) is AlternatingCollectingBarriers
    assert handler.next_timeout_ms == 100
    assert h.log == []
    assert h.feed("+1 !") == [{0, 2}, set()]
    assert h.switched == [False, True]
    assert h.log == ["I1[1]", "T1"]
    assert handler.next_timeout_ms is None
    assert type(handler.state) is AlternatingCollectingBarriersUnaligned
    # Behind the barriers of 0 and 2 is post-checkpoint input: processed, not recorded.
    h.feed("0:b 2:c 1:d 1:B1 1:e")
    assert h.channel_state == {1: ["1:d"]}
    assert h.log == ["I1[1]", "T1", "D1"]
    assert h.actions.stats[1] == AlignmentStats(CheckpointId(1), 0, 100, 0, unaligned=True)


def test_alignment_completing_before_the_timeout_stays_aligned() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    assert h.feed("0:B1 +99 ! 1:B1 +500 !") == [{0}, {0}, {0}, set(), set(), set()]
    assert h.switched == [False, False]
    assert h.log == ["T1"]
    stats = h.actions.stats[1]
    assert not stats.unaligned and stats.alignment_duration_ms == 99
    # The forwarded barrier carries the resolved options, so downstream times out alike.
    assert h.actions.triggered[1].options == CheckpointOptions(aligned_timeout_ms=100)
    assert h.unaligned.next_timeout_ms is None


def test_timeout_counts_from_the_checkpoint_start_like_flink() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100, start_ms=1_000)
    h.feed("+20 0:B1@950")
    assert h.unaligned.next_timeout_ms == 1_050
    assert h.feed("+29 ! +1 !") == [{0}, {0}, {0}, set()]
    assert h.log == ["I1[1]", "T1"]
    assert h.actions.stats[1] == AlignmentStats(CheckpointId(1), 1_020, 30, 70, unaligned=True)


def test_first_barrier_arriving_after_the_timeout_is_unaligned_at_once() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    assert h.feed("+150 0:B1@0 1:a") == [set(), set(), set()]
    assert h.log == ["I1[1]", "T1"]
    assert h.channel_state == {1: ["1:a"]}
    assert h.actions.stats[1] == AlignmentStats(CheckpointId(1), 150, 0, 150, unaligned=True)


def test_barrier_arriving_after_the_deadline_switches_unless_it_is_the_last() -> None:
    h = unaligned_harness(3, ALIGNED, aligned_timeout_ms=100)
    assert h.feed("0:B1 +100 1:B1 2:a") == [{0}, {0}, set(), set()]
    assert h.log == ["I1[2]", "T1"]
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    assert h.feed("0:B1 +200 1:B1") == [{0}, {0}, set()]
    assert h.log == ["T1"]  # all barriers in: Flink triggers aligned even when late
    assert not h.actions.stats[1].unaligned


def test_unaligned_barrier_from_an_upstream_that_timed_out_switches_at_once() -> None:
    h = unaligned_harness(3, ALIGNED, aligned_timeout_ms=10_000)
    h.feed("0:B1")
    upstream_switched = CheckpointBarrier(
        CheckpointId(1), 0, CheckpointOptions(alignment=UNALIGNED)
    )
    h.handler.on_barrier(1, upstream_switched)
    assert h.handler.blocked_channels == frozenset()
    assert h.log == ["I1[2]", "T1"]


def test_zero_timeout_means_unaligned_from_the_start() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=0)
    assert h.feed("0:B1") == [set()]
    assert h.log == ["I1[1]", "T1"]
    # A barrier's own zero timeout wins over the handler's default.
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=500)
    h.barriers[1] = CheckpointBarrier(CheckpointId(1), 0, CheckpointOptions(aligned_timeout_ms=0))
    assert h.feed("0:B1") == [set()]
    assert h.log == ["I1[1]", "T1"]


@pytest.mark.parametrize(("mode", "timeout"), [(UNALIGNED, None), (ALIGNED, 100), (UNALIGNED, 0)])
def test_savepoints_are_always_aligned(mode: AlignmentMode, timeout: int | None) -> None:
    h = unaligned_harness(2, mode, aligned_timeout_ms=timeout)
    h.barriers[1] = CheckpointBarrier(CheckpointId(1), 0, SAVEPOINT)
    assert h.feed("0:B1 +10000 ! 1:B1") == [{0}, {0}, {0}, set()]
    assert h.switched == [False]
    assert h.log == ["T1"]
    assert not h.actions.stats[1].unaligned
    assert h.actions.triggered[1].options.is_savepoint
    # An upstream barrier claiming unaligned cannot turn a savepoint unaligned either.
    h.barriers[2] = CheckpointBarrier(CheckpointId(2), 0, SAVEPOINT)
    h.feed("0:B2")
    unaligned = CheckpointOptions(type=CheckpointType.SAVEPOINT, alignment=UNALIGNED)
    h.handler.on_barrier(1, CheckpointBarrier(CheckpointId(2), 0, unaligned))
    assert h.log == ["T1", "T2"]


def test_abort_during_the_aligned_phase_cancels_the_timer() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    assert h.feed("0:B1 X1 +500 !") == [{0}, set(), set(), set()]
    assert h.switched == [False]
    assert h.log == ["A1/expired"]
    assert h.unaligned.next_timeout_ms is None


# -- aborts and end of input during an unaligned checkpoint ----------------------------------


def test_newer_barrier_subsumes_the_unaligned_checkpoint_and_starts_its_own() -> None:
    h = unaligned_harness(3)
    h.feed("0:B1 1:a 1:B2")
    assert h.log == ["I1[1,2]", "T1", "A1/subsumed", "I2[0,2]", "T2"]
    # Late barrier 1 on channel 2 leaves its recording for checkpoint 2 running.
    h.feed("2:b 2:B1 2:c 0:d 0:B2 2:B2 2:e")
    assert h.log[-1] == "D2"
    assert h.channel_state == {1: ["1:a"], 2: ["2:b", "2:c", "0:d"]}


def test_newer_barrier_during_aligned_phase_subsumes_and_resets_the_timer() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    h.feed("0:B1 +50")
    h.barriers[2] = CheckpointBarrier(CheckpointId(2), 50)
    assert h.feed("1:B2 +99 !") == [{1}, {1}, {1}]
    assert h.unaligned.next_timeout_ms == 150
    assert h.feed("+1 !") == [{1}, set()]
    assert h.log == ["A1/subsumed", "I2[0]", "T2"]


def test_cancel_marker_stops_recording_and_ignores_the_rest_of_that_checkpoint() -> None:
    h = unaligned_harness(3)
    h.feed("0:B1 1:a 1:C1 1:b 2:B1 2:c")
    assert h.log == ["I1[1,2]", "T1", "A1/cancelled"]
    assert h.channel_state == {1: ["1:a"]}
    h.feed("0:B2 1:B2 2:B2")
    assert h.log[-3:] == ["I2[1,2]", "T2", "D2"]


def test_cancel_marker_of_a_newer_checkpoint_aborts_both() -> None:
    h = unaligned_harness(2)
    h.feed("0:B1 1:C2 0:B2 1:B2")
    assert h.log == ["I1[1]", "T1", "A1/subsumed", "A2/cancelled"]
    assert not h.handler.is_aligning


def test_external_abort_of_a_recording_checkpoint() -> None:
    h = unaligned_harness(2)
    h.feed("0:B1 1:a X1 1:b 1:B1")
    assert h.log == ["I1[1]", "T1", "A1/expired"]
    assert h.channel_state == {1: ["1:a"]}
    assert h.unaligned.recording_checkpoint_id is None


def test_end_of_partition_closes_a_channels_recording() -> None:
    h = unaligned_harness(3)
    assert h.feed("0:B1 1:a 1:E 2:b") == [set()] * 4
    assert h.unaligned.recording_channels == {2}
    h.feed("2:E")
    assert h.log == ["I1[1,2]", "T1", "D1"]
    assert h.channel_state == {1: ["1:a", "2:b"]}
    assert h.handler.num_open_channels == 1


def test_channel_finished_before_the_checkpoint_is_not_recorded() -> None:
    h = unaligned_harness(3)
    h.feed("2:E 0:B1")
    assert h.log == ["I1[1]", "T1"]
    h.feed("1:B1")
    assert h.log[-1] == "D1"


def test_end_of_partition_completes_an_aligned_phase() -> None:
    h = unaligned_harness(2, ALIGNED, aligned_timeout_ms=100)
    assert h.feed("0:B1 1:E") == [{0}, set()]
    assert h.log == ["T1"]
    assert not h.actions.stats[1].unaligned


# -- illegal events ---------------------------------------------------------------------------

ILLEGAL = {
    "barrier after end of partition": (UNALIGNED, "0:B1 1:E", "1:B2"),
    "same barrier twice while recording": (UNALIGNED, "0:B1", "0:B1"),
    "barrier id going backwards": (UNALIGNED, "0:B3 1:a", "0:B2"),
    "cancel marker after end of partition": (UNALIGNED, "1:E 0:B1", "1:C1"),
    "end of partition twice": (UNALIGNED, "0:B1 1:E", "1:E"),
    "channel out of range": (UNALIGNED, "0:B1", "3:B1"),
    "barrier on a blocked channel before the timeout": (ALIGNED, "0:B1", "0:B2"),
    "cancel marker on a blocked channel": (ALIGNED, "0:B1", "0:C1"),
    "end of partition on a blocked channel": (ALIGNED, "0:B1", "0:E"),
    "announcement on a blocked channel": (ALIGNED, "0:B1 1:A2", "0:A2"),
    "announcement after end of partition": (UNALIGNED, "1:E", "1:A1"),
    "announcement on a channel out of range": (UNALIGNED, "0:B1", "3:A2"),
}


@pytest.mark.parametrize("case", list(ILLEGAL))
def test_illegal_event_raises_and_leaves_the_handler_unchanged(case: str) -> None:
    mode, prefix, event = ILLEGAL[case]
    h = unaligned_harness(3, mode, aligned_timeout_ms=100 if mode is ALIGNED else None)
    h.feed(prefix)
    handler = h.unaligned

    def books() -> tuple[object, ...]:
        return (
            handler.blocked_channels,
            handler.recording_channels,
            handler.recording_checkpoint_id,
            handler.is_aligning,
            handler.num_open_channels,
            handler.next_timeout_ms,
            type(handler.state),
        )

    before, log_before = books(), list(h.log)
    with pytest.raises(IllegalBarrierEventError):
        h.feed(event)
    assert books() == before
    assert h.log == log_before


# -- options, factory ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "mode", "default", "expected"),
    [
        (CheckpointOptions(), UNALIGNED, None, (UNALIGNED, None)),
        (CheckpointOptions(), ALIGNED, None, (ALIGNED, None)),
        (CheckpointOptions(), ALIGNED, 300, (ALIGNED, 300)),
        (CheckpointOptions(), UNALIGNED, 300, (ALIGNED, 300)),
        (CheckpointOptions(), ALIGNED, 0, (UNALIGNED, None)),
        (CheckpointOptions(aligned_timeout_ms=50), UNALIGNED, 300, (ALIGNED, 50)),
        (CheckpointOptions(aligned_timeout_ms=0), ALIGNED, 300, (UNALIGNED, None)),
        (CheckpointOptions(alignment=UNALIGNED), ALIGNED, 300, (UNALIGNED, None)),
        (
            CheckpointOptions(alignment=AlignmentMode.AT_LEAST_ONCE),
            UNALIGNED,
            None,
            (UNALIGNED, None),
        ),
        (SAVEPOINT, UNALIGNED, 0, (ALIGNED, None)),
        (CheckpointOptions(CheckpointType.SAVEPOINT, UNALIGNED, 5), UNALIGNED, 0, (ALIGNED, None)),
    ],
)
def test_resolve_options(
    options: CheckpointOptions,
    mode: AlignmentMode,
    default: int | None,
    expected: tuple[AlignmentMode, int | None],
) -> None:
    resolved = resolve_options(options, mode, default)
    assert (resolved.alignment, resolved.aligned_timeout_ms) == expected
    assert resolved.type is options.type


def test_factory_builds_the_unaligned_handler_only_when_asked_and_able() -> None:
    actions = UnalignedRecorder()
    unaligned = create_barrier_handler(UNALIGNED, 2, actions)
    assert isinstance(unaligned, UnalignedBarrierHandler) and unaligned.mode is UNALIGNED
    timed = create_barrier_handler(ALIGNED, 2, actions, aligned_timeout_ms=250)
    assert isinstance(timed, UnalignedBarrierHandler) and timed.mode is ALIGNED
    assert timed.aligned_timeout_ms == 250
    assert type(create_barrier_handler(ALIGNED, 2, actions)) is AlignedBarrierHandler
    tracker = create_barrier_handler(AlignmentMode.AT_LEAST_ONCE, 2, actions, aligned_timeout_ms=5)
    assert isinstance(tracker, BarrierTracker)
    with pytest.raises(NotImplementedError, match="UnalignedBarrierHandlerActions"):
        create_barrier_handler(ALIGNED, 2, Recorder(), aligned_timeout_ms=250)
    with pytest.raises(ValueError):
        create_barrier_handler(UNALIGNED, 2, actions, aligned_timeout_ms=-1)
    with pytest.raises(ValueError):
        create_barrier_handler(UNALIGNED, 0, actions)
    with pytest.raises(ValueError):
        UnalignedBarrierHandler(2, actions, ManualClock(), mode=AlignmentMode.AT_LEAST_ONCE)
    handler: RecordingBarrierHandler = unaligned  # the runtime's typed view
    assert handler.next_timeout_ms is None and not handler.check_alignment_timeout()


def test_aligned_controller_refuses_unaligned_snapshots() -> None:
    handler = AlignedBarrierHandler(2, Recorder(), ManualClock())
    with pytest.raises(IllegalBarrierEventError):
        handler._controller.init_inputs_checkpoint(CheckpointBarrier(CheckpointId(1), 0))
    with pytest.raises(IllegalBarrierEventError):
        handler._controller.take_out_of_turn(0)


# -- exactly-once over random interleavings ---------------------------------------------------


@dataclass
class _Task:
    """A task that processes records and keeps the channel state the handler asks for."""

    handler: UnalignedBarrierHandler | None = None
    processed: list[str] = field(default_factory=list)
    snapshot: dict[int, set[str]] = field(default_factory=dict)
    unaligned: set[int] = field(default_factory=set)
    channel_state: dict[int, list[str]] = field(default_factory=dict)
    completed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)

    def trigger_checkpoint(self, barrier: CheckpointBarrier, stats: AlignmentStats) -> None:
        checkpoint_id = barrier.checkpoint_id
        self.snapshot[checkpoint_id] = set(self.processed)
        if not stats.unaligned:
            self.completed.add(checkpoint_id)

    def abort_checkpoint(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None:
        self.aborted.add(checkpoint_id)

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier, recording: frozenset[int]) -> None:
        self.unaligned.add(barrier.checkpoint_id)
        self.channel_state[barrier.checkpoint_id] = []

    def all_barriers_received(self, checkpoint_id: CheckpointId) -> None:
        self.completed.add(checkpoint_id)


def _streams(rng: random.Random, num_channels: int, num_checkpoints: int) -> list[list[str]]:
    """Per channel: records, barrier 1, records, barrier 2, ...; some channels end early."""
    streams = []
    for channel in range(num_channels):
        stream: list[str] = []
        for checkpoint_id in range(1, num_checkpoints + 1):
            stream += [f"{channel}:{checkpoint_id}.{i}" for i in range(rng.randint(0, 4))]
            if rng.random() < 0.1:
                break  # this channel ends before barrier checkpoint_id
            stream.append(f"B{checkpoint_id}")
        else:
            stream += [f"{channel}:tail.{i}" for i in range(rng.randint(0, 3))]
        stream.append("E")
        streams.append(stream)
    return streams


def _records_before(streams: list[list[str]], barrier: str) -> set[str]:
    """Records sent before ``barrier`` (all of a channel's records if it never sent it)."""
    before: set[str] = set()
    for stream in streams:
        end = stream.index(barrier) if barrier in stream else len(stream)
        before.update(item for item in stream[:end] if item[0].isdigit())
    return before


@pytest.mark.parametrize(("mode", "timeout"), [(UNALIGNED, None), (ALIGNED, 30), (ALIGNED, 0)])
def test_snapshot_plus_channel_state_is_exactly_the_input_before_the_barriers(
    mode: AlignmentMode, timeout: int | None
) -> None:
    kinds = {"aligned": 0, "unaligned": 0}
    for seed in range(300):
        rng = random.Random(seed)
        num_channels = rng.randint(1, 4)
        streams = _streams(rng, num_channels, num_checkpoints=3)
        task, clock = _Task(), ManualClock()
        handler = UnalignedBarrierHandler(
            num_channels, task, clock, mode=mode, aligned_timeout_ms=timeout
        )
        positions = [0] * num_channels
        while True:
            ready = [
                c
                for c in range(num_channels)
                if positions[c] < len(streams[c]) and not handler.is_blocked(c)
            ]
            if not ready:
                break
            channel = rng.choice(ready)
            item = streams[channel][positions[channel]]
            positions[channel] += 1
            if item == "E":
                handler.on_end_of_partition(channel)
            elif item.startswith("B"):
                # Stamped at delivery: the first delivery starts the checkpoint's timeout.
                barrier = CheckpointBarrier(CheckpointId(int(item[1:])), clock.now_ms())
                handler.on_barrier(channel, barrier)
            else:
                if channel in handler.recording_view:
                    recording_id = handler.recording_checkpoint_id
                    assert recording_id is not None
                    task.channel_state[recording_id].append(item)
                task.processed.append(item)
            clock.advance(rng.randint(0, 10))
            handler.check_alignment_timeout()
        assert all(p == len(s) for p, s in zip(positions, streams, strict=True)), seed
        for checkpoint_id in task.completed:
            before = _records_before(streams, f"B{checkpoint_id}")
            state = task.channel_state.get(checkpoint_id, [])
            assert len(state) == len(set(state)), seed
            assert task.snapshot[checkpoint_id] | set(state) == before, seed
            assert not task.snapshot[checkpoint_id] & set(state), seed
            kinds["unaligned" if checkpoint_id in task.unaligned else "aligned"] += 1
        assert not task.completed & task.aborted, seed
        assert task.completed | task.aborted == set(task.snapshot) | task.aborted, seed
    # The scenarios exercised what they claim to.
    assert kinds["unaligned"] > 100
    assert (kinds["aligned"] > 50) == (mode is ALIGNED and timeout != 0)
