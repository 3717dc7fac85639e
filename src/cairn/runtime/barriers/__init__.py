"""Checkpoint-barrier handling of a task: when to block channels, when to snapshot.

Invariant: the handler sees only events (barriers, cancel markers, end of partition), never
records; it reports each checkpoint it sees exactly once, as a trigger or as an abort.

Layers, bottom up:
- ``reasons`` (``CheckpointFailureReason``, shared with the checkpoint layer), ``clock``;
- ``api``: the seams (``BarrierHandlerActions`` implemented by the task, the ``BarrierHandler``
  interface, ``AlignmentStats``, ``IllegalBarrierEventError``); ``inputs``: per-channel checks;
- ``states``: Flink's state machine (``WaitingForFirstBarrier`` <-> ``CollectingBarriers``);
- ``aligned`` (``AlignedBarrierHandler``, exactly-once) and ``tracker`` (``BarrierTracker``,
  at-least-once); ``factory.create_barrier_handler`` picks one per task.

Where issue 4 plugs in (not implemented): unaligned checkpoints add
``WaitingForFirstBarrierUnaligned``/``CollectingBarriersUnaligned`` states (trigger on the
first barrier, persist in-flight data, block nothing), and aligned checkpoints with a timeout
add the ``Alternating*`` states plus an ``alignment_timed_out(controller, barrier)`` event on
``BarrierHandlerState``, fired by a timer the handler registers in ``_start_checkpoint``.
``StateController`` then grows ``init_inputs_checkpoint(barrier)``; the factory maps
``AlignmentMode.UNALIGNED`` / ``CheckpointOptions.aligned_timeout_ms`` to those initial states.
"""

from cairn.runtime.barriers.aligned import AlignedBarrierHandler
from cairn.runtime.barriers.api import (
    AlignmentStats,
    BarrierHandler,
    BarrierHandlerActions,
    IllegalBarrierEventError,
)
from cairn.runtime.barriers.clock import Clock, ManualClock, SystemClock
from cairn.runtime.barriers.factory import create_barrier_handler
from cairn.runtime.barriers.reasons import CheckpointFailureReason
from cairn.runtime.barriers.tracker import BarrierTracker

__all__ = [
    "AlignedBarrierHandler",
    "AlignmentStats",
    "BarrierHandler",
    "BarrierHandlerActions",
    "BarrierTracker",
    "CheckpointFailureReason",
    "Clock",
    "IllegalBarrierEventError",
    "ManualClock",
    "SystemClock",
    "create_barrier_handler",
]
