"""At-least-once barrier handling (Flink's ``CheckpointBarrierTracker``).

Invariant: no channel is ever blocked; a checkpoint triggers once every channel open at its
first barrier delivered it or finished, and triggered ids strictly increase (when one
triggers, every older pending checkpoint is declined as subsumed).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.clock import Clock
from cairn.events import AlignmentMode, CancelCheckpointMarker, CheckpointBarrier
from cairn.ids import CheckpointId
from cairn.runtime.barriers.api import AlignmentStats, BarrierHandlerActions
from cairn.runtime.barriers.inputs import InputChannels

MAX_CHECKPOINTS_TO_TRACK = 50
"""Pending checkpoints kept at most (Flink's bound); the oldest is declined beyond it."""

_NONE = CheckpointId(-1)
_NOTHING_BLOCKED: frozenset[int] = frozenset()
_SUBSUMED = CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED
_CANCELLED = CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER


@dataclass(slots=True)
class _PendingCheckpoint:
    """Channels heard from for one checkpoint; aborted entries only absorb stragglers."""

    checkpoint_id: CheckpointId
    target_count: int  # open channels when the entry was created
    barrier: CheckpointBarrier | None  # None for an entry created by a cancel or an abort
    first_barrier_ms: int = 0
    aborted: bool = False
    seen: set[int] = field(default_factory=set)

    @property
    def is_complete(self) -> bool:
        return len(self.seen) >= self.target_count


class BarrierTracker:
    """Counts barriers per checkpoint id without blocking; several may be pending.

    >>> from cairn.clock import ManualClock
    >>> class Actions:
    ...     def trigger_checkpoint(self, barrier, stats): print("trigger", barrier.checkpoint_id)
    ...     def abort_checkpoint(self, checkpoint_id, reason): print("abort", checkpoint_id)
    >>> tracker = BarrierTracker(2, Actions(), ManualClock())
    >>> tracker.on_barrier(0, CheckpointBarrier(CheckpointId(1), timestamp_ms=0))
    >>> tracker.on_barrier(0, CheckpointBarrier(CheckpointId(2), timestamp_ms=0))
    >>> tracker.is_blocked(0)
    False
    >>> tracker.on_barrier(1, CheckpointBarrier(CheckpointId(2), timestamp_ms=0))
    abort 1
    trigger 2
    """

    def __init__(
        self,
        num_channels: int,
        actions: BarrierHandlerActions,
        clock: Clock,
        max_pending: int = MAX_CHECKPOINTS_TO_TRACK,
    ) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self._inputs = InputChannels(num_channels)
        self._actions = actions
        self._clock = clock
        self._max_pending = max_pending
        self._pending: dict[
            CheckpointId, _PendingCheckpoint
        ] = {}  # ascending ids (insertion order)
        self._latest_id = _NONE  # highest id seen by barrier, cancel marker or abort
        self._last_triggered_id = _NONE

    # -- queries ------------------------------------------------------------------------

    @property
    def mode(self) -> AlignmentMode:
        return AlignmentMode.AT_LEAST_ONCE

    @property
    def num_channels(self) -> int:
        return self._inputs.num_channels

    @property
    def num_open_channels(self) -> int:
        return self._inputs.num_open

    @property
    def latest_checkpoint_id(self) -> CheckpointId | None:
        return None if self._latest_id == _NONE else self._latest_id

    @property
    def is_aligning(self) -> bool:
        return any(not entry.aborted for entry in self._pending.values())

    @property
    def pending_checkpoint_ids(self) -> tuple[CheckpointId, ...]:
        """Checkpoints that saw some but not all barriers and are not aborted, ascending."""
        return tuple(e.checkpoint_id for e in self._pending.values() if not e.aborted)

    @property
    def blocked_channels(self) -> frozenset[int]:
        return frozenset()

    def is_blocked(self, channel: int) -> bool:
        return False

    def last_barrier_id(self, channel: int) -> CheckpointId:
        return self._inputs.last_barrier_id(channel)

    @property
    def blocked_view(self) -> Container[int]:
        return _NOTHING_BLOCKED

    # -- events -------------------------------------------------------------------------

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> None:
        self._inputs.accept_barrier(channel, barrier)
        barrier_id = barrier.checkpoint_id
        if barrier_id <= self._last_triggered_id:
            return  # late barrier of a checkpoint triggered (or subsumed) here
        entry = self._pending.get(barrier_id)
        if entry is None:
            if barrier_id <= self._latest_id:
                return  # dropped already: it can no longer complete
            entry = self._add(barrier_id, barrier)
        entry.seen.add(channel)
        if entry.is_complete:
            self._complete(entry)

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> None:
        cancelled_id = marker.checkpoint_id
        self._inputs.check_open(channel, f"cancel marker {cancelled_id}")
        if cancelled_id <= self._last_triggered_id:
            return
        # As in Flink: once an input cancels n, nothing older is expected to complete.
        self._drop_older_than(cancelled_id)
        entry = self._pending.get(cancelled_id)
        if entry is None:
            if cancelled_id <= self._latest_id:
                return  # trailing marker of a checkpoint already dropped
            entry = self._add(cancelled_id, None)
        if not entry.aborted:
            entry.aborted = True
            self._actions.abort_checkpoint(cancelled_id, _CANCELLED)
        # Still count the channel, so the entry goes away once every channel reported.
        entry.seen.add(channel)
        if entry.is_complete:
            del self._pending[cancelled_id]

    def on_end_of_partition(self, channel: int) -> None:
        self._inputs.finish(channel)
        # A finished channel has no record left behind a barrier: it counts as delivered.
        for checkpoint_id in list(self._pending):
            entry = self._pending.get(checkpoint_id)
            if entry is None:
                continue  # subsumed by a newer entry completed in this loop
            entry.seen.add(channel)
            if entry.is_complete:
                self._complete(entry)

    def abort_current(self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason) -> None:
        if checkpoint_id <= self._last_triggered_id:
            return
        entry = self._pending.get(checkpoint_id)
        if entry is None:
            if checkpoint_id <= self._latest_id:
                return  # never tracked here, or dropped already
            entry = self._add(checkpoint_id, None)
        if not entry.aborted:
            entry.aborted = True
            self._actions.abort_checkpoint(checkpoint_id, reason)

    # -- books ----------------------------------------------------------------------------

    def _add(
        self, checkpoint_id: CheckpointId, barrier: CheckpointBarrier | None
    ) -> _PendingCheckpoint:
        entry = _PendingCheckpoint(
            checkpoint_id=checkpoint_id,
            target_count=self._inputs.num_open,
            barrier=barrier,
            first_barrier_ms=self._clock.now_ms(),
        )
        self._pending[checkpoint_id] = entry
        self._latest_id = checkpoint_id
        if len(self._pending) > self._max_pending:
            oldest = self._pending.pop(next(iter(self._pending)))
            if not oldest.aborted:
                self._actions.abort_checkpoint(oldest.checkpoint_id, _SUBSUMED)
        return entry

    def _drop_older_than(self, checkpoint_id: CheckpointId) -> None:
        for older_id in list(self._pending):
            if older_id >= checkpoint_id:
                break
            older = self._pending.pop(older_id)
            if not older.aborted:
                self._actions.abort_checkpoint(older_id, _SUBSUMED)

    def _complete(self, entry: _PendingCheckpoint) -> None:
        del self._pending[entry.checkpoint_id]
        barrier = entry.barrier
        if entry.aborted or barrier is None:
            return  # every channel reported on an aborted checkpoint: forget it
        self._drop_older_than(entry.checkpoint_id)
        self._last_triggered_id = entry.checkpoint_id
        now = self._clock.now_ms()
        stats = AlignmentStats.at_trigger(barrier, entry.first_barrier_ms, now)
        self._actions.trigger_checkpoint(barrier, stats)

    def __repr__(self) -> str:
        pending = ", ".join(
            f"{e.checkpoint_id}{'(aborted)' if e.aborted else ''}:{sorted(e.seen)}/{e.target_count}"
            for e in self._pending.values()
        )
        return f"BarrierTracker(last_triggered={self._last_triggered_id}, pending=[{pending}])"
