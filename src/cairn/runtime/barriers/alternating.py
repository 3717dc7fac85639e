"""States of a handler that may take a checkpoint unaligned (Flink's ``Alternating*`` states).

Invariant: a checkpoint is aligned until it turns unaligned (planned so, an upstream task
switched, or its aligned timeout passed) and never back; the unaligned snapshot is triggered
exactly once, at that switch, and from then on no channel is blocked.

    AlternatingWaitingForFirstBarrier --barrier--> AlternatingCollectingBarriers
        | unaligned / timed out                        | timed out / unaligned barrier
        v                                              v
    AlternatingWaitingForFirstBarrierUnaligned --> AlternatingCollectingBarriersUnaligned
        (snapshot at the first barrier)                (snapshot taken, recording)

Every state returns to ``AlternatingWaitingForFirstBarrier`` when its checkpoint completes or
aborts. Flink's strictly unaligned ``WaitingForFirstBarrierUnaligned`` and
``CollectingBarriersUnaligned`` are the two ``*Unaligned`` states here: savepoints must stay
aligned even in unaligned jobs, so a Cairn handler always alternates (as Flink's does when
unaligned checkpoints are enabled).

An announced priority barrier (``barrier_announced``) is taken out of turn once its checkpoint
is unaligned here (planned so, switched, or timed out); until then it keeps its place, as Flink
keeps an announced barrier until ``alignmentTimeout`` prioritizes it.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod

from cairn.events import AlignmentMode, CheckpointBarrier
from cairn.ids import CheckpointId
from cairn.runtime.barriers.handler_states import BarrierHandlerState, StateController


def as_unaligned(barrier: CheckpointBarrier) -> CheckpointBarrier:
    """``barrier`` as forwarded by a task that snapshots unaligned (Flink's ``asUnaligned``).

    >>> from cairn.events import CheckpointOptions
    >>> timed = CheckpointBarrier(CheckpointId(4), 10, CheckpointOptions(aligned_timeout_ms=50))
    >>> as_unaligned(timed).options.alignment, as_unaligned(timed).options.aligned_timeout_ms
    (<AlignmentMode.UNALIGNED: 'unaligned'>, None)
    """
    options = barrier.options
    if options.alignment is AlignmentMode.UNALIGNED and options.aligned_timeout_ms is None:
        return barrier
    unaligned = dataclasses.replace(
        options, alignment=AlignmentMode.UNALIGNED, aligned_timeout_ms=None
    )
    return dataclasses.replace(barrier, options=unaligned)


def _take_if_unaligned(
    controller: StateController, channel: int, barrier: CheckpointBarrier
) -> None:
    """The shared rule for an announced barrier of a checkpoint still aligned here."""
    if controller.is_unaligned(barrier) or controller.is_timed_out(barrier):
        controller.take_out_of_turn(channel)


def _snapshot_unaligned(controller: StateController) -> None:
    """Start recording and trigger; the shared first step of every switch to unaligned."""
    barrier = as_unaligned(controller.pending_barrier())
    controller.init_inputs_checkpoint(barrier)
    controller.trigger_global_checkpoint(barrier)


class AbstractAlternatingAlignedState(BarrierHandlerState):
    """Aligned phase: block each channel at its barrier, unless the checkpoint turns unaligned."""

    __slots__ = ()

    def barrier_received(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        if controller.is_unaligned(barrier):
            # Never blocked: the barrier overtook the data in front of it upstream.
            return self.alignment_timed_out(controller, barrier).barrier_received(
                controller, channel, barrier
            )
        self.channels.block(channel)
        if controller.all_barriers_received():
            return self._finish_alignment(controller)
        if controller.is_timed_out(barrier):
            # The switch unblocks every channel, this one included.
            return self.alignment_timed_out(controller, barrier).barrier_received(
                controller, channel, barrier
            )
        return self._after_barrier_received()

    def end_of_partition_received(
        self, controller: StateController, channel: int
    ) -> BarrierHandlerState:
        if controller.all_barriers_received():
            return self._finish_alignment(controller)
        return self

    def barrier_announced(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        _take_if_unaligned(controller, channel, barrier)
        return self

    def abort(self, checkpoint_id: CheckpointId) -> BarrierHandlerState:
        self.channels.unblock_all()
        return AlternatingWaitingForFirstBarrier(self.channels)

    def _finish_alignment(self, controller: StateController) -> BarrierHandlerState:
        # The pending barrier carries the resolved options the task forwards downstream.
        controller.trigger_global_checkpoint(controller.pending_barrier())
        self.channels.unblock_all()
        return AlternatingWaitingForFirstBarrier(self.channels)

    @abstractmethod
    def _after_barrier_received(self) -> BarrierHandlerState: ...


class AlternatingWaitingForFirstBarrier(AbstractAlternatingAlignedState):
    """No barrier of a pending checkpoint seen yet; nothing blocked, nothing recorded."""

    __slots__ = ()

    def alignment_timed_out(
        self, controller: StateController, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        return AlternatingWaitingForFirstBarrierUnaligned(self.channels)

    def _after_barrier_received(self) -> BarrierHandlerState:
        return AlternatingCollectingBarriers(self.channels)


class AlternatingCollectingBarriers(AbstractAlternatingAlignedState):
    """Aligned, some barriers seen: the channels that delivered theirs are blocked."""

    __slots__ = ()

    def alignment_timed_out(
        self, controller: StateController, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        _snapshot_unaligned(controller)
        # After the snapshot, what waits behind a barrier is ordinary post-checkpoint input.
        self.channels.unblock_all()
        return AlternatingCollectingBarriersUnaligned(self.channels)

    def _after_barrier_received(self) -> BarrierHandlerState:
        return self


class AbstractAlternatingUnalignedState(BarrierHandlerState):
    """Unaligned phase: every barrier of the checkpoint overtakes the data in front of it."""

    __slots__ = ()

    def barrier_announced(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        if controller.is_pending(barrier):
            controller.take_out_of_turn(channel)
        else:  # a newer checkpoint: aligned here until it turns unaligned itself
            _take_if_unaligned(controller, channel, barrier)
        return self

    def abort(self, checkpoint_id: CheckpointId) -> BarrierHandlerState:
        return AlternatingWaitingForFirstBarrier(self.channels)


class AlternatingWaitingForFirstBarrierUnaligned(AbstractAlternatingUnalignedState):
    """Unaligned, snapshot not taken yet: the next barrier of the checkpoint takes it."""

    __slots__ = ()

    def barrier_received(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        _snapshot_unaligned(controller)
        # Only a barrier that just timed out in the aligned phase can have blocked its channel.
        self.channels.unblock_all()
        if controller.all_barriers_received():
            return AlternatingWaitingForFirstBarrier(self.channels)
        return AlternatingCollectingBarriersUnaligned(self.channels)

    def end_of_partition_received(
        self, controller: StateController, channel: int
    ) -> BarrierHandlerState:
        return self  # no barrier seen: nothing to record, nothing to complete


class AlternatingCollectingBarriersUnaligned(AbstractAlternatingUnalignedState):
    """Unaligned snapshot taken; channels without their barrier are recording, none blocked."""

    __slots__ = ()

    def barrier_received(
        self, controller: StateController, channel: int, barrier: CheckpointBarrier
    ) -> BarrierHandlerState:
        return self._after_channel_done(controller)

    def end_of_partition_received(
        self, controller: StateController, channel: int
    ) -> BarrierHandlerState:
        # Everything the channel sent before its end is in the channel state already.
        return self._after_channel_done(controller)

    def _after_channel_done(self, controller: StateController) -> BarrierHandlerState:
        if controller.all_barriers_received():
            return AlternatingWaitingForFirstBarrier(self.channels)
        return self
