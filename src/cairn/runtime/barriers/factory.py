"""Choosing the barrier handler of a task from the job's alignment mode.

Invariant: every task with at least one input channel gets exactly one handler, created
here; tasks without inputs (sources) get none and are triggered by the coordinator.
"""

from __future__ import annotations

from cairn.clock import Clock, SystemClock
from cairn.events import AlignmentMode
from cairn.runtime.barriers.aligned import AlignedBarrierHandler
from cairn.runtime.barriers.api import (
    BarrierHandler,
    BarrierHandlerActions,
    UnalignedBarrierHandlerActions,
)
from cairn.runtime.barriers.tracker import BarrierTracker
from cairn.runtime.barriers.unaligned import UnalignedBarrierHandler


def create_barrier_handler(
    mode: AlignmentMode,
    num_channels: int,
    actions: BarrierHandlerActions,
    clock: Clock | None = None,
    *,
    aligned_timeout_ms: int | None = None,
) -> BarrierHandler:
    """Build the handler for ``mode`` over channels ``0..num_channels-1``.

    - ``AT_LEAST_ONCE``: ``BarrierTracker`` (``aligned_timeout_ms`` does not apply).
    - ``ALIGNED`` without ``aligned_timeout_ms``: ``AlignedBarrierHandler``.
    - ``UNALIGNED``, or ``ALIGNED`` with ``aligned_timeout_ms`` (0: unaligned from the start):
      ``UnalignedBarrierHandler``; each barrier's own options take precedence
      (see ``unaligned.resolve_options``); ``actions`` must implement
      ``UnalignedBarrierHandlerActions``, otherwise ``NotImplementedError``.

    Raises ``ValueError`` for ``num_channels < 1`` or a negative timeout.

    >>> class Actions:
    ...     def trigger_checkpoint(self, barrier, stats): ...
    ...     def abort_checkpoint(self, checkpoint_id, reason): ...
    >>> create_barrier_handler(AlignmentMode.AT_LEAST_ONCE, 3, Actions()).mode
    <AlignmentMode.AT_LEAST_ONCE: 'at_least_once'>
    """
    clock = SystemClock() if clock is None else clock
    if mode is AlignmentMode.AT_LEAST_ONCE:
        return BarrierTracker(num_channels, actions, clock)
    if mode is AlignmentMode.ALIGNED and aligned_timeout_ms is None:
        return AlignedBarrierHandler(num_channels, actions, clock)
    if not isinstance(actions, UnalignedBarrierHandlerActions):
        raise NotImplementedError(
            f"{mode.value} checkpoints (aligned timeout {aligned_timeout_ms}) need actions "
            "implementing UnalignedBarrierHandlerActions (init_inputs_checkpoint, "
            f"all_barriers_received); {type(actions).__name__} does not"
        )
    return UnalignedBarrierHandler(
        num_channels, actions, clock, mode=mode, aligned_timeout_ms=aligned_timeout_ms
    )
