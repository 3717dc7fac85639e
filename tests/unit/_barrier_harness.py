"""Barrier handlers driven by scripts (Flink's barrier-handler test style): a harness feeds
tokens to a handler and a recorder stands for the task, logging what the handler told it.

Script tokens, separated by spaces:
  ``c:R``        a record on channel c (asserts the task may poll c; the handler never sees it)
  ``c:B<n>``     barrier n on channel c; ``c:B<n>@<ts>`` also fixes the barrier's timestamp
  ``c:C<n>``     CancelCheckpointMarker(n) on channel c
  ``c:E``        end of partition on channel c
  ``+<ms>``      advance the manual clock
  ``X<n>``       external abort of checkpoint n (coordinator: expired)
``feed`` returns the blocked channels after every token; ``log`` lists what the task was told:
``T<n>`` (trigger) and ``A<n>/<reason>`` (abort).

``UnalignedHarness`` (the unaligned / alternating handler) adds:
  ``c:<label>``  a record batch on channel c (lowercase label); asserts c is not blocked and,
                 if the handler says c is recording, adds ``c:<label>`` to the channel state
  ``!``          the task's loop calls ``check_alignment_timeout()``
  ``c:A<n>``     channel c announces priority barrier n (``c:A<n>@<ts>``: with timestamp ts);
                 ``announced`` collects the handler's answers (``OVERTAKE``, ``IN_ORDER``,
                 ``OBSOLETE``); the script then delivers the barrier with ``c:B<n>`` itself
and its ``log`` adds ``I<n>[channels]`` (init_inputs_checkpoint with the recording channels)
and ``D<n>`` (all_barriers_received) to ``T<n>`` / ``A<n>/<reason>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cairn.events import (
    AlignmentMode,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
)
from cairn.ids import CheckpointId
from cairn.runtime.barriers import (
    AlignmentStats,
    BarrierHandler,
    CheckpointFailureReason,
    ManualClock,
    create_barrier_handler,
)
from cairn.runtime.barriers.unaligned import UnalignedBarrierHandler

__all__ = [
    "ALIGNED",
    "AT_LEAST_ONCE",
    "SAVEPOINT",
    "UNALIGNED",
    "BarrierHandlerHarness",
    "Recorder",
    "UnalignedHarness",
    "UnalignedRecorder",
    "unaligned_harness",
]

ALIGNED = AlignmentMode.ALIGNED
AT_LEAST_ONCE = AlignmentMode.AT_LEAST_ONCE
UNALIGNED = AlignmentMode.UNALIGNED
SAVEPOINT = CheckpointOptions(type=CheckpointType.SAVEPOINT)

SHORT_REASONS = {
    CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED: "subsumed",
    CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER: "cancelled",
    CheckpointFailureReason.CHECKPOINT_EXPIRED: "expired",
}
_EVENT = re.compile(r"(\d+):(?:(R)|(E)|B(\d+)(?:@(\d+))?|C(\d+))$")


@dataclass
class Recorder:
    """The task side: records every decision of the handler."""

    log: list[str] = field(default_factory=list)
    stats: dict[int, AlignmentStats] = field(default_factory=dict)

    def trigger_checkpoint(self, barrier: CheckpointBarrier, stats: AlignmentStats) -> None:
        assert stats.checkpoint_id == barrier.checkpoint_id
        self.log.append(f"T{barrier.checkpoint_id}")
        self.stats[barrier.checkpoint_id] = stats

    def abort_checkpoint(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None:
        self.log.append(f"A{checkpoint_id}/{SHORT_REASONS.get(reason, reason.name)}")


@dataclass
class BarrierHandlerHarness:
    """A barrier handler fed scripts (``feed``); checks its blocked-channel views each step."""

    handler: BarrierHandler
    actions: Recorder
    clock: ManualClock
    barriers: dict[int, CheckpointBarrier] = field(default_factory=dict)

    @property
    def log(self) -> list[str]:
        return self.actions.log

    def barrier(self, checkpoint_id: int, timestamp_ms: int = 0) -> CheckpointBarrier:
        """The same barrier value every time an id is mentioned, as the network delivers."""
        if checkpoint_id not in self.barriers:
            self.barriers[checkpoint_id] = CheckpointBarrier(
                CheckpointId(checkpoint_id), timestamp_ms
            )
        return self.barriers[checkpoint_id]

    def feed(self, script: str) -> list[set[int]]:
        blocked_after_each: list[set[int]] = []
        for token in script.split():
            self._step(token)
            blocked = self.handler.blocked_channels
            # is_blocked (the per-poll query) must agree with the set at every step.
            assert {
                c for c in range(self.handler.num_channels) if self.handler.is_blocked(c)
            } == blocked
            view = self.handler.blocked_view
            assert {c for c in range(self.handler.num_channels) if c in view} == blocked
            blocked_after_each.append(set(blocked))
        return blocked_after_each

    def _step(self, token: str) -> None:
        if token.startswith("+"):
            self.clock.advance(int(token[1:]))
            return
        if token.startswith("X"):
            self.handler.abort_current(
                CheckpointId(int(token[1:])), CheckpointFailureReason.CHECKPOINT_EXPIRED
            )
            return
        match = _EVENT.match(token)
        assert match, f"bad script token {token!r}"
        channel = int(match[1])
        if match[2]:
            assert not self.handler.is_blocked(channel), f"script polls blocked channel {channel}"
        elif match[3]:
            self.handler.on_end_of_partition(channel)
        elif match[4]:
            ts = int(match[5]) if match[5] else 0
            self.handler.on_barrier(channel, self.barrier(int(match[4]), ts))
        else:
            self.handler.on_cancel_marker(
                channel, CancelCheckpointMarker(CheckpointId(int(match[6])))
            )


_DATA = re.compile(r"(\d+):([a-z]\w*)$")
_ANNOUNCE = re.compile(r"(\d+):A(\d+)(?:@(\d+))?$")


@dataclass
class UnalignedRecorder(Recorder):
    """The task side of unaligned checkpoints; checks the handler's views at every call."""

    handler: UnalignedBarrierHandler | None = None
    triggered: dict[int, CheckpointBarrier] = field(default_factory=dict)
    recording: dict[int, frozenset[int]] = field(default_factory=dict)

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier, recording: frozenset[int]) -> None:
        assert barrier.options.alignment is UNALIGNED
        if self.handler is not None:
            assert self.handler.recording_channels == recording
            assert self.handler.recording_checkpoint_id == barrier.checkpoint_id
        self.recording[barrier.checkpoint_id] = recording
        self.log.append(f"I{barrier.checkpoint_id}{sorted(recording)}".replace(" ", ""))

    def trigger_checkpoint(self, barrier: CheckpointBarrier, stats: AlignmentStats) -> None:
        # The task forwards exactly this barrier; unaligned ones must say so downstream.
        assert stats.unaligned == (barrier.options.alignment is UNALIGNED)
        self.triggered[barrier.checkpoint_id] = barrier
        super().trigger_checkpoint(barrier, stats)

    def abort_checkpoint(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None:
        if self.handler is not None:
            assert self.handler.recording_checkpoint_id is None
            assert not self.handler.recording_channels
        super().abort_checkpoint(checkpoint_id, reason)

    def all_barriers_received(self, checkpoint_id: CheckpointId) -> None:
        if self.handler is not None:
            assert self.handler.recording_checkpoint_id is None
            assert not self.handler.recording_channels
            assert not self.handler.is_aligning
        self.log.append(f"D{checkpoint_id}")


@dataclass
class UnalignedHarness(BarrierHandlerHarness):
    actions: UnalignedRecorder
    channel_state: dict[int, list[str]] = field(default_factory=dict)
    switched: list[bool] = field(default_factory=list)
    announced: list[str] = field(default_factory=list)

    @property
    def unaligned(self) -> UnalignedBarrierHandler:
        assert isinstance(self.handler, UnalignedBarrierHandler)
        return self.handler

    def _step(self, token: str) -> None:
        handler = self.unaligned
        data = _DATA.match(token)
        announcement = _ANNOUNCE.match(token)
        if token == "!":
            self.switched.append(handler.check_alignment_timeout())
        elif announcement:
            ts = int(announcement[3]) if announcement[3] else 0
            barrier = self.barrier(int(announcement[2]), ts)
            answer = handler.on_barrier_announced(int(announcement[1]), barrier)
            self.announced.append(answer.name)
        elif data:
            channel = int(data[1])
            assert not handler.is_blocked(channel), f"script polls blocked channel {channel}"
            if channel in handler.recording_view:
                checkpoint_id = handler.recording_checkpoint_id
                assert checkpoint_id is not None
                self.channel_state.setdefault(checkpoint_id, []).append(token)
        else:
            super()._step(token)
        # The per-poll view, the query and the snapshot agree at every step.
        recording = handler.recording_channels
        assert {c for c in range(handler.num_channels) if c in handler.recording_view} == recording
        assert {c for c in range(handler.num_channels) if handler.is_recording(c)} == recording
        assert not recording or handler.recording_checkpoint_id is not None


def unaligned_harness(
    num_channels: int,
    mode: AlignmentMode = UNALIGNED,
    aligned_timeout_ms: int | None = None,
    start_ms: int = 0,
) -> UnalignedHarness:
    actions, clock = UnalignedRecorder(), ManualClock(start_ms)
    handler = create_barrier_handler(
        mode, num_channels, actions, clock, aligned_timeout_ms=aligned_timeout_ms
    )
    assert isinstance(handler, UnalignedBarrierHandler)
    actions.handler = handler
    return UnalignedHarness(handler, actions, clock)
