"""Aligned exactly-once barrier handling (Flink's ``SingleCheckpointBarrierHandler``).

Invariant: at most one checkpoint is in progress; a channel is blocked from the moment it
delivers that checkpoint's barrier until the checkpoint triggers or aborts, so no record
behind a barrier is processed before the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Protocol

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.clock import Clock
from cairn.events import AlignmentMode, CancelCheckpointMarker, CheckpointBarrier
from cairn.ids import CheckpointId
from cairn.runtime.barriers.api import (
    AlignmentStats,
    BarrierHandlerActions,
    IllegalBarrierEventError,
)
from cairn.runtime.barriers.handler_states import (
    BarrierHandlerState,
    ChannelState,
    WaitingForFirstBarrier,
)
from cairn.runtime.barriers.inputs import InputChannels

_NONE = CheckpointId(-1)  # "no checkpoint yet"; real ids are >= 0


class AlignedBarrierHandler:
    """Blocks channels until every open channel delivered the barrier, then triggers.

    >>> from cairn.clock import ManualClock
    >>> class Actions:
    ...     def trigger_checkpoint(self, barrier, stats): print("trigger", barrier.checkpoint_id)
    ...     def abort_checkpoint(self, checkpoint_id, reason): print("abort", checkpoint_id)
    >>> handler = AlignedBarrierHandler(2, Actions(), ManualClock())
    >>> barrier = CheckpointBarrier(CheckpointId(1), timestamp_ms=0)
    >>> handler.on_barrier(0, barrier)
    >>> handler.blocked_channels
    frozenset({0})
    >>> handler.on_barrier(1, barrier)
    trigger 1
    >>> handler.blocked_channels
    frozenset()
    """

    def __init__(self, num_channels: int, actions: BarrierHandlerActions, clock: Clock) -> None:
        self._inputs = InputChannels(num_channels)
        self._actions = actions
        self._clock = clock
        self._channels = ChannelState()
        self._controller = AlignedController(self)
        self._state: BarrierHandlerState = WaitingForFirstBarrier(self._channels)
        # Books of the checkpoint in progress (Flink names). It is pending while
        # current id != last closed (completed or aborted) id.
        self._current_id = _NONE
        self._last_closed_id = _NONE
        self._pending_barrier: CheckpointBarrier | None = None
        self._aligned: set[int] = set()  # channels that delivered the barrier or finished
        self._target_count = 0  # open channels when the checkpoint started
        self._first_barrier_ms = 0

    # -- queries ------------------------------------------------------------------------

    @property
    def mode(self) -> AlignmentMode:
        return AlignmentMode.ALIGNED

    @property
    def num_channels(self) -> int:
        return self._inputs.num_channels

    @property
    def num_open_channels(self) -> int:
        return self._inputs.num_open

    @property
    def latest_checkpoint_id(self) -> CheckpointId | None:
        return None if self._current_id == _NONE else self._current_id

    @property
    def is_aligning(self) -> bool:
        return self._current_id != self._last_closed_id

    @property
    def blocked_channels(self) -> frozenset[int]:
        return self._channels.blocked

    def is_blocked(self, channel: int) -> bool:
        return self._channels.is_blocked(channel)

    def last_barrier_id(self, channel: int) -> CheckpointId:
        return self._inputs.last_barrier_id(channel)

    @property
    def blocked_view(self) -> Container[int]:
        return self._channels.live_view

    @property
    def all_aligned(self) -> bool:
        """Every channel open at the start of the pending checkpoint delivered its barrier
        or finished."""
        return len(self._aligned) == self._target_count

    @property
    def pending_barrier(self) -> CheckpointBarrier | None:
        """The first barrier of the checkpoint in progress, None if there is none."""
        return self._pending_barrier

    @property
    def state(self) -> BarrierHandlerState:
        """The current state (for tests and diagnostics)."""
        return self._state

    # -- events -------------------------------------------------------------------------

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> None:
        # barrier.options is not consulted: this handler aligns every checkpoint (the
        # subclass UnalignedBarrierHandler reads the options through its controller).
        self._check_not_blocked(channel, f"barrier {barrier.checkpoint_id}")
        self._inputs.accept_barrier(channel, barrier)
        barrier_id = barrier.checkpoint_id
        if barrier_id < self._current_id or (
            barrier_id == self._current_id and not self.is_aligning
        ):
            return  # late barrier of a triggered or aborted checkpoint: it never blocks
        if barrier_id > self._current_id:
            self._start_checkpoint(barrier)
        self._mark_aligned(channel)
        self._transform(lambda state: state.barrier_received(self._controller, channel, barrier))

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> None:
        cancelled_id = marker.checkpoint_id
        self._check_not_blocked(channel, f"cancel marker {cancelled_id}")
        self._inputs.check_open(channel, f"cancel marker {cancelled_id}")
        self._abort_up_to(
            cancelled_id, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER
        )

    def on_end_of_partition(self, channel: int) -> None:
        self._check_not_blocked(channel, "end of partition")
        self._inputs.finish(channel)
        if not self.is_aligning:
            return
        self._mark_aligned(channel)
        self._transform(lambda state: state.end_of_partition_received(self._controller, channel))

    def abort_current(self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason) -> None:
        self._abort_up_to(checkpoint_id, reason)

    # -- books ----------------------------------------------------------------------------

    def _check_not_blocked(self, channel: int, event: str) -> None:
        if self._channels.is_blocked(channel):
            raise IllegalBarrierEventError(
                f"{event} on channel {channel}, which is blocked by the alignment of "
                f"checkpoint {self._current_id}: the task must not poll it"
            )

    def _start_checkpoint(self, barrier: CheckpointBarrier) -> None:
        if self.is_aligning:
            self._abort(self._current_id, CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED)
        self._current_id = barrier.checkpoint_id
        self._pending_barrier = barrier
        self._aligned.clear()
        self._target_count = self._inputs.num_open
        self._first_barrier_ms = self._clock.now_ms()

    def _mark_aligned(self, channel: int) -> None:
        """``channel`` delivered the pending checkpoint's barrier or its end of partition."""
        self._aligned.add(channel)

    def _transform(self, event: Callable[[BarrierHandlerState], BarrierHandlerState]) -> None:
        self._state = event(self._state)
        if self.all_aligned:
            self._close()

    def _close(self) -> None:
        """Every channel of the pending checkpoint is aligned: it is no longer pending."""
        self._last_closed_id = self._current_id
        self._pending_barrier = None
        self._aligned.clear()

    def _abort_up_to(self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason) -> None:
        """Abort ``checkpoint_id`` unless already closed; a pending older one is subsumed."""
        if checkpoint_id < self._current_id or (
            checkpoint_id == self._current_id and not self.is_aligning
        ):
            return  # already triggered or aborted here
        if checkpoint_id > self._current_id and self.is_aligning:
            # Flink drops the older one silently; declining it spares the coordinator a timeout.
            self._abort(self._current_id, CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED)
        self._abort(checkpoint_id, reason)

    def _abort(self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason) -> None:
        # Raising current id with no aligned channel makes later barriers of it obsolete.
        self._current_id = max(self._current_id, checkpoint_id)
        self._last_closed_id = max(self._last_closed_id, checkpoint_id)
        self._pending_barrier = None
        self._aligned.clear()
        self._target_count = 0
        self._state = self._state.abort(checkpoint_id)
        self._actions.abort_checkpoint(checkpoint_id, reason)

    def trigger_global_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Let the task snapshot and forward ``barrier`` (a state's decision, through the
        controller)."""
        now = self._clock.now_ms()
        stats = AlignmentStats.at_trigger(barrier, self._first_barrier_ms, now)
        self._actions.trigger_checkpoint(barrier, stats)

    def __repr__(self) -> str:
        return (
            f"AlignedBarrierHandler(current={self._current_id}, aligning={self.is_aligning}, "
            f"aligned={sorted(self._aligned)}/{self._target_count}, state={self._state!r})"
        )


class AlignedBooks(Protocol):
    """What the controller reads and asks of its handler: the books of the pending checkpoint."""

    @property
    def is_aligning(self) -> bool: ...

    @property
    def latest_checkpoint_id(self) -> CheckpointId | None: ...

    @property
    def all_aligned(self) -> bool: ...

    @property
    def pending_barrier(self) -> CheckpointBarrier | None: ...

    def trigger_global_checkpoint(self, barrier: CheckpointBarrier) -> None: ...


class AlignedController:
    """What states may ask of the handler; keeps the handler itself out of their reach."""

    __slots__ = ("_handler",)

    def __init__(self, handler: AlignedBooks) -> None:
        self._handler = handler

    def all_barriers_received(self) -> bool:
        return self._handler.all_aligned

    def pending_barrier(self) -> CheckpointBarrier:
        barrier = self._handler.pending_barrier
        if barrier is None:
            raise IllegalBarrierEventError("no checkpoint is in progress")
        return barrier

    def trigger_global_checkpoint(self, barrier: CheckpointBarrier) -> None:
        self._handler.trigger_global_checkpoint(barrier)

    def is_pending(self, barrier: CheckpointBarrier) -> bool:
        handler = self._handler
        return barrier.checkpoint_id == handler.latest_checkpoint_id and handler.is_aligning

    def is_unaligned(self, barrier: CheckpointBarrier) -> bool:
        return False  # this handler aligns every checkpoint

    def is_timed_out(self, barrier: CheckpointBarrier) -> bool:
        return False

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier) -> None:
        raise IllegalBarrierEventError(
            f"checkpoint {barrier.checkpoint_id}: an aligned handler takes no unaligned snapshot"
        )

    def take_out_of_turn(self, channel: int) -> None:
        raise IllegalBarrierEventError(
            f"channel {channel}: an aligned handler takes every barrier in its place"
        )
