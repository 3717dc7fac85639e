"""States of the single-checkpoint barrier handler (Flink's ``BarrierHandlerState``).

Invariant: a state decides, the handler keeps the books; each event method returns the next
state, and states reach the outside only through ``StateController`` and ``ChannelState``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Container
from typing import Protocol

from cairn.events import CheckpointBarrier
from cairn.ids import CheckpointId


class StateController(Protocol):
    """What states may ask of the handler (Flink: ``BarrierHandlerState.Controller``)."""

    def all_barriers_received(self) -> bool:
        """Every channel open at the start of the checkpoint delivered its barrier or finished."""
        ...

    def pending_barrier(self) -> CheckpointBarrier:
        """The first barrier of the checkpoint in progress."""
        ...

    def trigger_global_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Let the task snapshot and forward ``barrier``."""
        ...

    def is_pending(self, barrier: CheckpointBarrier) -> bool:
        """``barrier`` belongs to the checkpoint in progress (not to a newer one)."""
        ...

    def is_unaligned(self, barrier: CheckpointBarrier) -> bool:
        """``barrier``'s checkpoint must go unaligned now: it was planned unaligned, or
        ``barrier`` comes from an upstream task that already switched. Never for savepoints."""
        ...

    def is_timed_out(self, barrier: CheckpointBarrier) -> bool:
        """The aligned phase of ``barrier``'s checkpoint outlived its aligned timeout."""
        ...

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Start the unaligned snapshot: channels without their barrier start recording."""
        ...

    def take_out_of_turn(self, channel: int) -> None:
        """The task takes ``channel``'s announced barrier now, ahead of the data in front of it
        (Flink: ``convertToPriorityEvent``)."""
        ...


class ChannelState:
    """Blocked channels; shared by the states of one handler.

    ``is_blocked`` is a set lookup; ``blocked`` caches its frozenset until the next change.
    """

    __slots__ = ("_blocked", "_frozen")

    def __init__(self) -> None:
        self._blocked: set[int] = set()
        self._frozen: frozenset[int] | None = frozenset()

    def block(self, channel: int) -> None:
        self._blocked.add(channel)
        self._frozen = None

    def unblock_all(self) -> None:
        if self._blocked:
            self._blocked.clear()
            self._frozen = frozenset()

    def is_blocked(self, channel: int) -> bool:
        return channel in self._blocked

    @property
    def live_view(self) -> Container[int]:
        """The blocked set itself, read-only by type: ``in`` on it is the cheapest poll check."""
        return self._blocked

    @property
    def blocked(self) -> frozenset[int]:
        frozen = self._frozen
        if frozen is None:
            frozen = self._frozen = frozenset(self._blocked)
        return frozen


class BarrierHandlerState(ABC):
    """One state of the handler; every event returns the state to continue with.

    The handler calls ``barrier_received`` only for barriers of the checkpoint in progress
    (older ones are filtered out), ``end_of_partition_received`` only while a checkpoint is
    in progress, ``alignment_timed_out`` only while one is in progress and not yet unaligned,
    ``barrier_announced`` for announcements of the checkpoint in progress or a newer one (on a
    channel that is neither blocked nor finished), and ``abort`` whenever it drops the
    checkpoint in progress.
    """

    __slots__ = ("channels",)

    def __init__(self, channels: ChannelState) -> None:
        self.channels = channels

    @abstractmethod
    def barrier_received(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState: ...

    @abstractmethod
    def end_of_partition_received(
        self, controller: StateController, channel: int
    ) -> BarrierHandlerState: ...

    @abstractmethod
    def abort(self, checkpoint_id: CheckpointId) -> BarrierHandlerState: ...

    def alignment_timed_out(
        self, controller: StateController, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        """The aligned timeout of ``barrier``'s checkpoint passed; only alternating states care."""
        return self

    def barrier_announced(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        """``channel`` announced the priority barrier ``barrier`` (options resolved), still at
        its position; a state that wants it now calls ``controller.take_out_of_turn``. Aligned
        states take every barrier in its place: only alternating states care."""
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(blocked={sorted(self.channels.blocked)})"


class AbstractAlignedBarrierHandlerState(BarrierHandlerState):
    """Aligned exactly-once: block each channel at its barrier, release all at the last."""

    __slots__ = ()

    def barrier_received(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        self.channels.block(channel)
        if controller.all_barriers_received():
            return self._finish_alignment(controller, barrier)
        return self._after_barrier_received()

    def end_of_partition_received(
        self, controller: StateController, channel: int
    ) -> BarrierHandlerState:
        # A finished channel has no record left behind a barrier, so it counts as aligned.
        if controller.all_barriers_received():
            return self._finish_alignment(controller, controller.pending_barrier())
        return self

    def abort(self, checkpoint_id: CheckpointId) -> BarrierHandlerState:
        self.channels.unblock_all()
        return WaitingForFirstBarrier(self.channels)

    def _finish_alignment(
        self, controller: StateController, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        # Trigger before unblocking: no record behind a barrier may reach the snapshot.
        controller.trigger_global_checkpoint(barrier)
        self.channels.unblock_all()
        return WaitingForFirstBarrier(self.channels)

    @abstractmethod
    def _after_barrier_received(self) -> BarrierHandlerState:
        """The state to continue with after a barrier that did not complete the alignment."""


class WaitingForFirstBarrier(AbstractAlignedBarrierHandlerState):
    """Aligned; no barrier of a pending checkpoint seen yet. Nothing is blocked."""

    __slots__ = ()

    def _after_barrier_received(self) -> BarrierHandlerState:
        return CollectingBarriers(self.channels)


class CollectingBarriers(AbstractAlignedBarrierHandlerState):
    """Aligned; at least one barrier seen, channels that delivered it are blocked."""

    __slots__ = ()

    def _after_barrier_received(self) -> BarrierHandlerState:
        return self
