"""Checkpoint-barrier handling of a task: when to block channels, when to snapshot.

Invariant: the handler sees only events (barriers, their announcements, cancel markers, end of
partition, timeouts), never records; it closes each checkpoint it sees exactly once (see
``api``: an unaligned one triggers first and closes when its last barrier arrives or it aborts).

Layers, bottom up:
- ``cairn.checkpoint.failure.CheckpointFailureReason`` and ``cairn.clock`` (re-exported here);
- ``api``: the seams (``BarrierHandlerActions``, plus ``UnalignedBarrierHandlerActions`` for
  the in-flight data of unaligned checkpoints: what the task offers, implemented by its
  ``runtime.subtask_checkpoint.SubtaskCheckpointCoordinator``; the ``BarrierHandler`` /
  ``RecordingBarrierHandler`` interfaces the task drives, ``Announcement``,
  ``AlignmentStats``, ``IllegalBarrierEventError``); ``inputs``: per-channel checks;
- ``handler_states``: Flink's state machine (``WaitingForFirstBarrier`` <-> ``CollectingBarriers``);
  ``alternating``: the ``Alternating*`` states that switch a checkpoint to unaligned;
- ``aligned`` (``AlignedBarrierHandler``, exactly-once), ``unaligned``
  (``UnalignedBarrierHandler``: unaligned checkpoints and the aligned-checkpoint timeout) and
  ``tracker`` (``BarrierTracker``, at-least-once); ``factory.create_barrier_handler`` picks one
  per task (``UNALIGNED``, or ``ALIGNED`` with ``aligned_timeout_ms``, build the unaligned one).

The unaligned names are imported from their modules (``cairn.runtime.barriers.unaligned``,
``cairn.runtime.barriers.api``); this package's exports are pinned by a test.
"""

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.clock import Clock, ManualClock, SystemClock
from cairn.runtime.barriers.aligned import AlignedBarrierHandler
from cairn.runtime.barriers.api import (
    AlignmentStats,
    BarrierHandler,
    BarrierHandlerActions,
    IllegalBarrierEventError,
)
from cairn.runtime.barriers.factory import create_barrier_handler
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
