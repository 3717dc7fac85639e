"""Seams of the barrier handlers: what the task implements and what it may call.

Invariant: a handler closes every checkpoint it has seen exactly once: aligned ones by
``trigger_checkpoint`` or ``abort_checkpoint``; unaligned ones trigger at their first barrier and
then close by ``all_barriers_received`` or ``abort_checkpoint`` (late events are ignored).
"""

from __future__ import annotations

import enum
from collections.abc import Container
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.events import (
    AlignmentMode,
    CancelCheckpointMarker,
    CheckpointBarrier,
)
from cairn.ids import CheckpointId


class IllegalBarrierEventError(RuntimeError):
    """An event that cannot happen in a correct pipeline (a bug in the task or upstream).

    Examples: an event on a channel after its end of partition, a barrier id that does not
    increase on its channel, any event on a channel the task should not have polled
    (blocked). The handler is left unchanged when this is raised.
    """


class Announcement(enum.Enum):
    """What the task does with an announced priority barrier (``on_barrier_announced``).

    An announced barrier sits in its channel at its position (behind the entries sent before
    it), and ``InputGate.poll`` returns it there unless the task takes it out of turn.
    """

    OVERTAKE = "overtake"
    """Take it now (``InputGate.overtake``) and deliver it with the batches it overtook."""
    IN_ORDER = "in order"
    """Leave it in its place; ask again when the signal is raised or at ``next_timeout_ms``."""
    OBSOLETE = "obsolete"
    """Its checkpoint is over here (or the channel delivered a newer barrier): drop it."""


@dataclass(frozen=True, slots=True)
class AlignmentStats:
    """Timing of one checkpoint on one task, handed over with the trigger.

    ``start_delay_ms``: barrier creation by the coordinator -> first barrier here (>= 0).
    ``alignment_duration_ms``: first barrier -> trigger here: the last barrier when aligned
    (0 with one channel), the switch when an aligned checkpoint timed out, 0 when unaligned
    from the start. ``unaligned``: the snapshot was taken unaligned (in-flight data recorded).

    >>> AlignmentStats(CheckpointId(3), first_barrier_ms=1_050,
    ...                alignment_duration_ms=20, start_delay_ms=50).alignment_duration_ms
    20
    """

    checkpoint_id: CheckpointId
    first_barrier_ms: int  # handler clock when the first barrier of this checkpoint arrived
    alignment_duration_ms: int
    start_delay_ms: int
    unaligned: bool = False

    @classmethod
    def at_trigger(
        cls,
        barrier: CheckpointBarrier,
        first_barrier_ms: int,
        now_ms: int,
        *,
        unaligned: bool = False,
    ) -> AlignmentStats:
        """The stats of ``barrier``'s checkpoint triggering at ``now_ms``; a negative span
        (clock skew between coordinator and task) counts as 0.

        >>> barrier = CheckpointBarrier(CheckpointId(3), timestamp_ms=1_000)
        >>> stats = AlignmentStats.at_trigger(barrier, first_barrier_ms=1_050, now_ms=1_070)
        >>> stats.start_delay_ms, stats.alignment_duration_ms
        (50, 20)
        """
        return cls(
            checkpoint_id=barrier.checkpoint_id,
            first_barrier_ms=first_barrier_ms,
            alignment_duration_ms=max(0, now_ms - first_barrier_ms),
            start_delay_ms=max(0, first_barrier_ms - barrier.timestamp_ms),
            unaligned=unaligned,
        )


class BarrierHandlerActions(Protocol):
    """What the task does on the handler's decisions (the only way out of a handler; the
    task's ``SubtaskCheckpointCoordinator`` implements it).

    Implementations must not call back into the handler's event methods from these calls.
    """

    def trigger_checkpoint(self, barrier: CheckpointBarrier, stats: AlignmentStats) -> None:
        """All barriers of ``barrier.checkpoint_id`` arrived (or their channels finished).

        The task takes the synchronous part of its snapshot and forwards ``barrier``
        downstream before processing any further input.
        """

    def abort_checkpoint(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None:
        """The checkpoint cannot complete here.

        The task forwards ``CancelCheckpointMarker(checkpoint_id)`` downstream and declines
        the checkpoint to the coordinator with ``reason``.
        """


@runtime_checkable
class UnalignedBarrierHandlerActions(BarrierHandlerActions, Protocol):
    """The data plane of unaligned checkpoints, on top of ``BarrierHandlerActions``.

    For an unaligned checkpoint n the handler calls, in this order and once each:
    ``init_inputs_checkpoint(barrier, recording)``, ``trigger_checkpoint(barrier, stats)`` (with
    ``barrier.options.alignment is UNALIGNED`` and ``stats.unaligned``), then either
    ``all_barriers_received(n)`` or ``abort_checkpoint(n, reason)``. Between the first and
    the last call, every record batch the task takes from a channel in
    ``handler.recording_view`` belongs to n's channel state: persist it, then process it.
    Aligned checkpoints of the same handler never call the two methods below.
    """

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier, recording: frozenset[int]) -> None:
        """Take checkpoint ``barrier.checkpoint_id`` unaligned, starting now.

        The task opens the channel state of this checkpoint: the output buffers that the
        forwarded barrier overtakes (persisted during the ``trigger_checkpoint`` that follows
        immediately) and, for each channel in ``recording`` (open, barrier not arrived yet),
        the input it delivers before its barrier.
        """

    def all_barriers_received(self, checkpoint_id: CheckpointId) -> None:
        """Every channel of ``checkpoint_id`` delivered its barrier or finished.

        Recording stopped: the task completes the channel state and may acknowledge the
        checkpoint once the asynchronous part of its snapshot is done too.
        """


class BarrierHandler(Protocol):
    """Common interface of the per-mode handlers; one instance per task with inputs.

    Single-threaded: the task thread calls every method. Records never reach the handler;
    only ``is_blocked`` is on the per-poll path and it is O(1).
    """

    @property
    def mode(self) -> AlignmentMode: ...

    @property
    def num_channels(self) -> int: ...

    @property
    def num_open_channels(self) -> int:
        """Channels that have not delivered their end of partition yet."""
        ...

    @property
    def latest_checkpoint_id(self) -> CheckpointId | None:
        """Highest checkpoint id seen (barrier, cancel marker or abort); None before any."""
        ...

    @property
    def is_aligning(self) -> bool:
        """True while a checkpoint has received some, but not all, of its barriers."""
        ...

    @property
    def blocked_channels(self) -> frozenset[int]: ...

    def is_blocked(self, channel: int) -> bool:
        """True if the task must not poll ``channel`` now."""
        ...

    def last_barrier_id(self, channel: int) -> CheckpointId:
        """The highest barrier id ``channel`` delivered (-1 before any): the one record of
        it. A barrier not above it is stale (an unaligned barrier overtook it); delivering
        one raises ``IllegalBarrierEventError``."""
        ...

    @property
    def blocked_view(self) -> Container[int]:
        """Live read-only view of the blocked channels for the input gate's poll loop.

        ``channel in handler.blocked_view`` equals ``handler.is_blocked(channel)`` at any
        time, without a method call; never mutate it.
        """
        ...

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> None: ...

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> None: ...

    def on_end_of_partition(self, channel: int) -> None: ...

    def abort_current(self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason) -> None:
        """External abort (e.g. the coordinator expired the checkpoint): unblock everything.

        A no-op for a checkpoint this handler already closed (triggered aligned, received
        every barrier of, or aborted); an id not seen yet is remembered so its barriers are
        ignored when they arrive. An unaligned checkpoint still recording is aborted.
        """
        ...


class RecordingBarrierHandler(BarrierHandler, Protocol):
    """A ``BarrierHandler`` that may take unaligned snapshots (``UnalignedBarrierHandler``).

    The task polls ``recording_view`` per record batch (O(1)), tells the handler of every
    announced priority barrier (``on_barrier_announced``) and does what it answers, and drives
    the aligned timeouts: it calls ``check_alignment_timeout()`` from its loop, at the latest
    at ``next_timeout_ms``.
    """

    @property
    def recording_checkpoint_id(self) -> CheckpointId | None:
        """The unaligned checkpoint whose in-flight input is being recorded, if any."""
        ...

    @property
    def recording_channels(self) -> frozenset[int]: ...

    def is_recording(self, channel: int) -> bool:
        """True if a record batch taken from ``channel`` now belongs to the channel state."""
        ...

    @property
    def recording_view(self) -> Container[int]:
        """Live read-only view of the recording channels (like ``blocked_view``)."""
        ...

    @property
    def next_timeout_ms(self) -> int | None:
        """Clock time of the next aligned timeout: the checkpoint in progress turns unaligned,
        or a barrier announced ``IN_ORDER`` may overtake; None if neither is waiting."""
        ...

    def on_barrier_announced(self, channel: int, barrier: CheckpointBarrier) -> Announcement:
        """Event: ``channel`` announced the priority barrier ``barrier``, still at its position.

        The task calls it for the oldest announcement of each channel it may poll, again
        whenever something changed; the handler never delivers the barrier itself (the task
        does, with ``on_barrier``, after an ``OVERTAKE``). Raises ``IllegalBarrierEventError``
        on a blocked or finished channel.
        """
        ...

    def check_alignment_timeout(self, now_ms: int | None = None) -> bool:
        """Event: the clock reached ``next_timeout_ms`` (``now_ms`` defaults to the handler's).

        The checkpoint in progress switches to unaligned if its aligned timeout passed (the
        handler then called ``init_inputs_checkpoint`` and ``trigger_checkpoint``); barriers
        announced ``IN_ORDER`` whose timeout passed may now overtake. Returns True if either
        happened: the task then looks at its announced barriers again.
        """
        ...
