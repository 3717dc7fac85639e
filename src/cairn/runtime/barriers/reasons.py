"""Why a checkpoint failed: one typed reason shared by tasks and the checkpoint coordinator.

Invariant: every failed or declined checkpoint carries exactly one of these members; names
and messages follow Flink's ``CheckpointFailureReason`` so logs read the same.
"""

from __future__ import annotations

import enum


@enum.unique
class CheckpointFailureReason(enum.Enum):
    """Reason a checkpoint was aborted, declined or never started (Flink names).

    The value is the human-readable message. Reasons raised by the barrier handlers:
    ``CHECKPOINT_DECLINED_SUBSUMED`` (a newer checkpoint took over),
    ``CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER`` (an upstream task sent a
    ``CancelCheckpointMarker``). ``abort_current`` passes through whatever the caller gives,
    typically ``CHECKPOINT_EXPIRED`` or ``CHECKPOINT_COORDINATOR_SHUTDOWN``.

    >>> CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED.message
    'Checkpoint was canceled because a barrier from newer checkpoint was received.'
    >>> CheckpointFailureReason.TOO_MANY_CONCURRENT_CHECKPOINTS.is_pre_flight
    True
    """

    # Pre-flight: the coordinator gave up before any task saw the checkpoint.
    PERIODIC_SCHEDULER_SHUTDOWN = "Periodic checkpoint scheduler is shut down."
    TOO_MANY_CONCURRENT_CHECKPOINTS = "The maximum number of concurrent checkpoints is exceeded."
    MINIMUM_TIME_BETWEEN_CHECKPOINTS = (
        "The minimum time between checkpoints is still pending. "
        "Checkpoint will be triggered after the minimum time."
    )
    NOT_ALL_REQUIRED_TASKS_RUNNING = "Not all required tasks are currently running."
    EXCEPTION = "An Exception occurred while triggering the checkpoint."

    # In flight: tasks already received the trigger or the barrier.
    CHECKPOINT_EXPIRED = "Checkpoint expired before completing."
    CHECKPOINT_SUBSUMED = "Checkpoint has been subsumed."
    CHECKPOINT_DECLINED = "Checkpoint was declined."
    CHECKPOINT_DECLINED_TASK_NOT_READY = "Checkpoint was declined (tasks not ready)."
    CHECKPOINT_DECLINED_TASK_CLOSING = "Checkpoint was declined (task is closing)."
    CHECKPOINT_DECLINED_SUBSUMED = (
        "Checkpoint was canceled because a barrier from newer checkpoint was received."
    )
    CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER = (
        "Task received cancellation from one of its inputs."
    )
    CHECKPOINT_DECLINED_INPUT_END_OF_STREAM = (
        "Checkpoint was declined because one input stream is finished."
    )
    CHECKPOINT_COORDINATOR_SHUTDOWN = "CheckpointCoordinator shutdown."
    JOB_FAILURE = "The job has failed."
    TASK_FAILURE = "Task has failed."
    TASK_CHECKPOINT_FAILURE = "Task local checkpoint failure."
    FINALIZE_CHECKPOINT_FAILURE = "Failure to finalize checkpoint."
    TRIGGER_CHECKPOINT_FAILURE = "Trigger checkpoint failure."
    IO_EXCEPTION = "An Exception occurred while writing or reading checkpoint data."

    @property
    def message(self) -> str:
        return str(self.value)

    @property
    def is_pre_flight(self) -> bool:
        """True if the failure happened before the checkpoint reached any task."""
        return self in _PRE_FLIGHT


_PRE_FLIGHT = frozenset(
    {
        CheckpointFailureReason.PERIODIC_SCHEDULER_SHUTDOWN,
        CheckpointFailureReason.TOO_MANY_CONCURRENT_CHECKPOINTS,
        CheckpointFailureReason.MINIMUM_TIME_BETWEEN_CHECKPOINTS,
        CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING,
        CheckpointFailureReason.EXCEPTION,
    }
)
