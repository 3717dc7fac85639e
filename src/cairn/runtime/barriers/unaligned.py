"""Exactly-once barrier handling that may snapshot unaligned (Flink's alternating
``SingleCheckpointBarrierHandler``): unaligned checkpoints and the aligned-checkpoint timeout.

Invariant: one checkpoint at a time; once its unaligned snapshot is taken, nothing is blocked
and a channel is recording exactly while it was open at the checkpoint's start and has
delivered neither the barrier nor its end of partition. Every aligned-timeout decision, for a
checkpoint in progress or announced, is taken here against ``alignment_deadline_ms``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container
from typing import Protocol

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.clock import Clock
from cairn.events import AlignmentMode, CheckpointBarrier, CheckpointOptions
from cairn.ids import CheckpointId
from cairn.runtime.barriers.aligned import AlignedBarrierHandler, AlignedBooks, AlignedController
from cairn.runtime.barriers.alternating import AlternatingWaitingForFirstBarrier
from cairn.runtime.barriers.api import (
    AlignmentStats,
    Announcement,
    IllegalBarrierEventError,
    UnalignedBarrierHandlerActions,
)

_NONE = CheckpointId(-1)
_ALIGNED = AlignmentMode.ALIGNED
_UNALIGNED = AlignmentMode.UNALIGNED


def resolve_options(
    options: CheckpointOptions, mode: AlignmentMode, aligned_timeout_ms: int | None
) -> CheckpointOptions:
    """How a handler configured with ``mode`` / ``aligned_timeout_ms`` takes a checkpoint.

    First rule that applies: a savepoint is aligned, never timing out; a barrier asking for
    ``UNALIGNED`` is unaligned; a timeout ``t`` (the barrier's, else the handler's) means
    unaligned from the start if ``t <= 0``, else aligned until ``t`` ms after the checkpoint
    started (the barrier's timestamp, as in Flink); with no timeout anywhere the handler's
    ``mode`` decides.

    >>> resolve_options(CheckpointOptions(), AlignmentMode.UNALIGNED, None).alignment
    <AlignmentMode.UNALIGNED: 'unaligned'>
    >>> resolve_options(CheckpointOptions(), AlignmentMode.ALIGNED, 500).aligned_timeout_ms
    500
    >>> zero = CheckpointOptions(aligned_timeout_ms=0)
    >>> resolve_options(zero, AlignmentMode.ALIGNED, None).alignment
    <AlignmentMode.UNALIGNED: 'unaligned'>
    """
    if options.is_savepoint:
        alignment, timeout = _ALIGNED, None
    elif options.alignment is _UNALIGNED:
        alignment, timeout = _UNALIGNED, None
    else:
        timeout = options.aligned_timeout_ms
        if timeout is None:
            timeout = aligned_timeout_ms
        if timeout is None:
            alignment = _UNALIGNED if mode is _UNALIGNED else _ALIGNED
        elif timeout <= 0:
            alignment, timeout = _UNALIGNED, None
        else:
            alignment = _ALIGNED
    if options.alignment is alignment and options.aligned_timeout_ms == timeout:
        return options
    return dataclasses.replace(options, alignment=alignment, aligned_timeout_ms=timeout)


def alignment_deadline_ms(barrier: CheckpointBarrier) -> int | None:
    """When the aligned phase of ``barrier``'s checkpoint ends (``barrier`` as resolved by
    ``resolve_options``): its timeout after the checkpoint started, None if it never does.

    >>> timed = CheckpointBarrier(CheckpointId(2), 1_000, CheckpointOptions(aligned_timeout_ms=50))
    >>> alignment_deadline_ms(timed), alignment_deadline_ms(CheckpointBarrier(CheckpointId(2), 0))
    (1050, None)
    """
    options = barrier.options
    timeout = options.aligned_timeout_ms
    if options.alignment is not _ALIGNED or timeout is None:
        return None
    return barrier.timestamp_ms + timeout


class UnalignedBarrierHandler(AlignedBarrierHandler):
    """Triggers at the first barrier (unaligned) or aligns until a timeout, then switches.

    The task implements ``UnalignedBarrierHandlerActions``, records every record batch it
    takes from a channel in ``recording_view``, asks ``on_barrier_announced`` what to do with
    each announced priority barrier, and calls ``check_alignment_timeout()`` from its loop (at
    the latest at ``next_timeout_ms``).

    >>> from cairn.clock import ManualClock
    >>> class Actions:
    ...     def trigger_checkpoint(self, barrier, stats): print("trigger", barrier.checkpoint_id)
    ...     def abort_checkpoint(self, checkpoint_id, reason): print("abort", checkpoint_id)
    ...     def init_inputs_checkpoint(self, barrier, recording): print("record", set(recording))
    ...     def all_barriers_received(self, checkpoint_id): print("done", checkpoint_id)
    >>> handler = UnalignedBarrierHandler(2, Actions(), ManualClock())
    >>> barrier = CheckpointBarrier(CheckpointId(1), timestamp_ms=0)
    >>> handler.on_barrier(0, barrier)
    record {1}
    trigger 1
    >>> handler.blocked_channels, handler.is_recording(1)
    (frozenset(), True)
    >>> handler.on_barrier(1, barrier)
    done 1
    """

    def __init__(
        self,
        num_channels: int,
        actions: UnalignedBarrierHandlerActions,
        clock: Clock,
        *,
        mode: AlignmentMode = AlignmentMode.UNALIGNED,
        aligned_timeout_ms: int | None = None,
    ) -> None:
        if mode is not _ALIGNED and mode is not _UNALIGNED:
            raise ValueError(f"an unaligned handler is exactly-once, got {mode.value}")
        if aligned_timeout_ms is not None and aligned_timeout_ms < 0:
            raise ValueError(f"aligned_timeout_ms must be >= 0 or None, got {aligned_timeout_ms}")
        super().__init__(num_channels, actions, clock)
        self._unaligned_actions = actions
        self._mode = mode
        self._default_timeout_ms = aligned_timeout_ms
        self._unaligned_controller = UnalignedController(self, clock)
        self._controller = self._unaligned_controller
        self._state = AlternatingWaitingForFirstBarrier(self._channels)
        self._deadline_ms: int | None = None  # aligned phase of the pending checkpoint ends
        # Earliest timeout of a barrier announced IN_ORDER for a checkpoint not started here.
        self._announced_deadline_ms: int | None = None
        # Channels whose input is channel state of _recording_id; the set object never
        # changes, so recording_view stays live.
        self._recording: set[int] = set()
        self._recording_id = _NONE

    # -- queries ------------------------------------------------------------------------

    @property
    def mode(self) -> AlignmentMode:
        return self._mode

    @property
    def aligned_timeout_ms(self) -> int | None:
        """Default timeout for barriers that carry none (None: the mode decides)."""
        return self._default_timeout_ms

    @property
    def recording_checkpoint_id(self) -> CheckpointId | None:
        return None if self._recording_id == _NONE else self._recording_id

    @property
    def recording_channels(self) -> frozenset[int]:
        return frozenset(self._recording)

    def is_recording(self, channel: int) -> bool:
        return channel in self._recording

    @property
    def recording_view(self) -> Container[int]:
        return self._recording

    @property
    def pending_deadline_ms(self) -> int | None:
        """When the aligned phase of the pending checkpoint ends, None if it never does."""
        return self._deadline_ms

    @property
    def next_timeout_ms(self) -> int | None:
        deadline, announced = self._deadline_ms, self._announced_deadline_ms
        if announced is None or (deadline is not None and deadline <= announced):
            return deadline
        return announced

    # -- events -------------------------------------------------------------------------

    def on_barrier_announced(self, channel: int, barrier: CheckpointBarrier) -> Announcement:
        """Decide what the task does with the priority barrier ``channel`` announced.

        >>> from cairn.clock import ManualClock
        >>> class Actions:
        ...     def trigger_checkpoint(self, barrier, stats): ...
        ...     def abort_checkpoint(self, checkpoint_id, reason): ...
        ...     def init_inputs_checkpoint(self, barrier, recording): ...
        ...     def all_barriers_received(self, checkpoint_id): ...
        >>> handler = UnalignedBarrierHandler(2, Actions(), ManualClock(), mode=_ALIGNED)
        >>> timed = CheckpointOptions(aligned_timeout_ms=100)
        >>> handler.on_barrier_announced(0, CheckpointBarrier(CheckpointId(1), 0, timed)).name
        'IN_ORDER'
        >>> handler.next_timeout_ms
        100
        """
        event = f"announcement of barrier {barrier.checkpoint_id}"
        self._check_not_blocked(channel, event)
        self._inputs.check_open(channel, event)
        barrier_id = barrier.checkpoint_id
        if (
            barrier_id <= self._inputs.last_barrier_id(channel)
            or barrier_id < self._current_id
            or (barrier_id == self._current_id and not self.is_aligning)
        ):
            return Announcement.OBSOLETE
        barrier = self.resolve(barrier)
        controller = self._unaligned_controller
        controller.out_of_turn = False
        self._state = self._state.barrier_announced(controller, channel, barrier)
        if controller.out_of_turn:
            return Announcement.OVERTAKE
        if not controller.is_pending(barrier):
            # Not started here yet: the task must look at it again when it may overtake.
            due = alignment_deadline_ms(barrier)
            announced = self._announced_deadline_ms
            if due is not None and (announced is None or due < announced):
                self._announced_deadline_ms = due
        return Announcement.IN_ORDER

    def check_alignment_timeout(self, now_ms: int | None = None) -> bool:
        """Event: time passed. The aligned checkpoint in progress switches to unaligned if
        its timeout passed; barriers announced ``IN_ORDER`` whose timeout passed may now
        overtake (the task asks again). Cheap when nothing waits; True if either happened.
        """
        deadline, announced = self._deadline_ms, self._announced_deadline_ms
        if deadline is None and announced is None:
            return False
        now = self._clock.now_ms() if now_ms is None else now_ms
        due = announced is not None and now >= announced
        if due:
            self._announced_deadline_ms = None
        if deadline is None or now < deadline:
            return due
        self._deadline_ms = None
        barrier = self._controller.pending_barrier()
        self._transform(lambda state: state.alignment_timed_out(self._controller, barrier))
        return True

    # -- books ----------------------------------------------------------------------------

    def resolve(self, barrier: CheckpointBarrier) -> CheckpointBarrier:
        """``barrier`` with the options this handler takes its checkpoint with."""
        options = resolve_options(barrier.options, self._mode, self._default_timeout_ms)
        if options is barrier.options:
            return barrier
        return dataclasses.replace(barrier, options=options)

    def _start_checkpoint(self, barrier: CheckpointBarrier) -> None:
        barrier = self.resolve(barrier)
        super()._start_checkpoint(barrier)  # may abort the pending one first
        self._deadline_ms = alignment_deadline_ms(barrier)

    def _mark_aligned(self, channel: int) -> None:
        super()._mark_aligned(channel)
        self._recording.discard(channel)

    def _close(self) -> None:
        recording_id = self._recording_id
        super()._close()
        self._deadline_ms = None
        if recording_id != _NONE:
            self._recording_id = _NONE
            self._recording.clear()
            self._unaligned_actions.all_barriers_received(recording_id)

    def _abort(self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason) -> None:
        # Stop recording before the task hears of the abort, so it sees a consistent handler.
        self._deadline_ms = None
        self._recording_id = _NONE
        self._recording.clear()
        super()._abort(checkpoint_id, reason)

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Start the unaligned snapshot of the pending checkpoint (a state's decision,
        through the controller): channels without its barrier start recording."""
        if self._recording_id != _NONE:
            raise IllegalBarrierEventError(
                f"checkpoint {barrier.checkpoint_id}: unaligned snapshot taken twice"
            )
        self._deadline_ms = None
        inputs, aligned = self._inputs, self._aligned
        self._recording.update(
            c for c in range(inputs.num_channels) if inputs.is_open(c) and c not in aligned
        )
        self._recording_id = barrier.checkpoint_id
        self._unaligned_actions.init_inputs_checkpoint(barrier, frozenset(self._recording))

    def trigger_global_checkpoint(self, barrier: CheckpointBarrier) -> None:
        now = self._clock.now_ms()
        unaligned = self._recording_id == barrier.checkpoint_id
        stats = AlignmentStats.at_trigger(barrier, self._first_barrier_ms, now, unaligned=unaligned)
        self._actions.trigger_checkpoint(barrier, stats)

    def __repr__(self) -> str:
        return (
            f"UnalignedBarrierHandler(mode={self._mode.value}, current={self._current_id}, "
            f"aligning={self.is_aligning}, aligned={sorted(self._aligned)}/{self._target_count}, "
            f"recording={sorted(self._recording)}, deadline={self._deadline_ms}, "
            f"announced_deadline={self._announced_deadline_ms}, state={self._state!r})"
        )


class UnalignedBooks(AlignedBooks, Protocol):
    """The aligned books plus how the handler resolves barriers and its unaligned switch."""

    @property
    def pending_deadline_ms(self) -> int | None: ...

    def resolve(self, barrier: CheckpointBarrier) -> CheckpointBarrier: ...

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier) -> None: ...


class UnalignedController(AlignedController):
    """The aligned controller plus the unaligned switch and the timeout.

    ``out_of_turn`` is the states' answer to the announcement being handled: the handler
    clears it before asking them and reads it after.
    """

    __slots__ = ("_clock", "_unaligned", "out_of_turn")

    def __init__(self, handler: UnalignedBooks, clock: Clock) -> None:
        super().__init__(handler)
        self._unaligned = handler
        self._clock = clock
        self.out_of_turn = False

    def is_unaligned(self, barrier: CheckpointBarrier) -> bool:
        if self.is_pending(barrier):
            planned = self.pending_barrier().options
        else:  # an announced barrier of a newer checkpoint
            planned = self._unaligned.resolve(barrier).options
        if planned.is_savepoint:
            return False
        return planned.alignment is _UNALIGNED or barrier.options.alignment is _UNALIGNED

    def is_timed_out(self, barrier: CheckpointBarrier) -> bool:
        handler = self._unaligned
        if self.is_pending(barrier):
            deadline = handler.pending_deadline_ms
        else:
            deadline = alignment_deadline_ms(handler.resolve(barrier))
        return deadline is not None and self._clock.now_ms() >= deadline

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier) -> None:
        self._unaligned.init_inputs_checkpoint(barrier)

    def take_out_of_turn(self, channel: int) -> None:
        self.out_of_turn = True
