"""Choosing the barrier handler of a task from the job's alignment mode.

Invariant: every task with at least one input channel gets exactly one handler, created
here; tasks without inputs (sources) get none and are triggered by the coordinator.
"""

from __future__ import annotations

from cairn.runtime.barriers.aligned import AlignedBarrierHandler
from cairn.runtime.barriers.api import BarrierHandler, BarrierHandlerActions
from cairn.runtime.barriers.clock import Clock, SystemClock
from cairn.runtime.barriers.tracker import BarrierTracker
from cairn.runtime.events import AlignmentMode


def create_barrier_handler(
    mode: AlignmentMode,
    num_channels: int,
    actions: BarrierHandlerActions,
    clock: Clock | None = None,
) -> BarrierHandler:
    """Build the handler for ``mode`` over channels ``0..num_channels-1``.

    Raises ``ValueError`` for ``num_channels < 1`` and ``NotImplementedError`` for
    ``AlignmentMode.UNALIGNED`` (issue 4).

    >>> class Actions:
    ...     def trigger_checkpoint(self, barrier, stats): ...
    ...     def abort_checkpoint(self, checkpoint_id, reason): ...
    >>> create_barrier_handler(AlignmentMode.AT_LEAST_ONCE, 3, Actions()).mode
    <AlignmentMode.AT_LEAST_ONCE: 'at_least_once'>
    """
    clock = SystemClock() if clock is None else clock
    if mode is AlignmentMode.ALIGNED:
        return AlignedBarrierHandler(num_channels, actions, clock)
    if mode is AlignmentMode.AT_LEAST_ONCE:
        return BarrierTracker(num_channels, actions, clock)
    raise NotImplementedError(f"{mode.value} checkpoints are not supported yet (issue 4)")
