"""Why a checkpoint failed: the one reason type of barrier handlers, tasks and the coordinator.

Invariant: every aborted, declined or failed checkpoint carries exactly one member, as a value
from where it is decided to where it is counted and shown (handler -> task decline ->
coordinator -> failure manager, statistics, abort notifications); names and messages are
Flink's ``CheckpointFailureReason``.
"""

from __future__ import annotations

import enum


@enum.unique
class CheckpointFailureReason(str, enum.Enum):
    """Reason a checkpoint was aborted, declined or never started (Flink names).

    The value is the name (statistics and logs show it); :attr:`message` is Flink's text.
    Barrier handlers raise ``CHECKPOINT_DECLINED_SUBSUMED`` (a newer checkpoint took over) and
    ``CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER`` (an upstream task sent a
    ``CancelCheckpointMarker``); a task whose snapshot fails declines with
    ``CHECKPOINT_ASYNC_EXCEPTION``; the coordinator aborts with the others.

    >>> CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED.message
    'Checkpoint was canceled because a barrier from newer checkpoint was received.'
    >>> CheckpointFailureReason.TOO_MANY_CONCURRENT_CHECKPOINTS.is_pre_flight
    True
    >>> CheckpointFailureReason.CHECKPOINT_EXPIRED.counts_as_failure
    True
    """

    # Pre-flight: the coordinator gave up before any task saw the checkpoint.
    PERIODIC_SCHEDULER_SHUTDOWN = "PERIODIC_SCHEDULER_SHUTDOWN"
    TOO_MANY_CONCURRENT_CHECKPOINTS = "TOO_MANY_CONCURRENT_CHECKPOINTS"
    MINIMUM_TIME_BETWEEN_CHECKPOINTS = "MINIMUM_TIME_BETWEEN_CHECKPOINTS"
    NOT_ALL_REQUIRED_TASKS_RUNNING = "NOT_ALL_REQUIRED_TASKS_RUNNING"
    EXCEPTION = "EXCEPTION"

    # In flight: tasks already received the trigger or the barrier.
    CHECKPOINT_EXPIRED = "CHECKPOINT_EXPIRED"
    CHECKPOINT_SUBSUMED = "CHECKPOINT_SUBSUMED"
    CHECKPOINT_DECLINED = "CHECKPOINT_DECLINED"
    CHECKPOINT_ASYNC_EXCEPTION = "CHECKPOINT_ASYNC_EXCEPTION"
    CHECKPOINT_DECLINED_TASK_NOT_READY = "CHECKPOINT_DECLINED_TASK_NOT_READY"
    CHECKPOINT_DECLINED_TASK_CLOSING = "CHECKPOINT_DECLINED_TASK_CLOSING"
    CHECKPOINT_DECLINED_SUBSUMED = "CHECKPOINT_DECLINED_SUBSUMED"
    CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER = "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER"
    CHECKPOINT_DECLINED_INPUT_END_OF_STREAM = "CHECKPOINT_DECLINED_INPUT_END_OF_STREAM"
    CHECKPOINT_DECLINED_ALIGNMENT_LIMIT_EXCEEDED = "CHECKPOINT_DECLINED_ALIGNMENT_LIMIT_EXCEEDED"
    CHECKPOINT_COORDINATOR_SHUTDOWN = "CHECKPOINT_COORDINATOR_SHUTDOWN"
    JOB_FAILURE = "JOB_FAILURE"
    JOB_FAILOVER_REGION = "JOB_FAILOVER_REGION"
    TASK_FAILURE = "TASK_FAILURE"
    TASK_CHECKPOINT_FAILURE = "TASK_CHECKPOINT_FAILURE"
    FINALIZE_CHECKPOINT_FAILURE = "FINALIZE_CHECKPOINT_FAILURE"
    TRIGGER_CHECKPOINT_FAILURE = "TRIGGER_CHECKPOINT_FAILURE"
    IO_EXCEPTION = "IO_EXCEPTION"

    @property
    def message(self) -> str:
        """Flink's human-readable text for this reason."""
        return _MESSAGES[self]

    @property
    def is_pre_flight(self) -> bool:
        """True if the failure happened before the checkpoint reached any task."""
        return self in _PRE_FLIGHT

    @property
    def counts_as_failure(self) -> bool:
        """True if it counts against the tolerable-failure limit (Flink's
        ``CheckpointFailureManager``); the others are shutdown, failover or task-lifecycle
        effects that a restart would not fix."""
        return self in _COUNTED

    @classmethod
    def parse(cls, name: str) -> CheckpointFailureReason:
        """The member named ``name``; unknown text is a plain decline (for names read back
        from outside the process, e.g. a command line).

        >>> CheckpointFailureReason.parse("no such reason")
        <CheckpointFailureReason.CHECKPOINT_DECLINED: 'CHECKPOINT_DECLINED'>
        """
        try:
            return cls(name)
        except ValueError:
            return cls.CHECKPOINT_DECLINED


_R = CheckpointFailureReason

_MESSAGES: dict[CheckpointFailureReason, str] = {
    _R.PERIODIC_SCHEDULER_SHUTDOWN: "Periodic checkpoint scheduler is shut down.",
    _R.TOO_MANY_CONCURRENT_CHECKPOINTS: (
        "The maximum number of concurrent checkpoints is exceeded."
    ),
    _R.MINIMUM_TIME_BETWEEN_CHECKPOINTS: (
        "The minimum time between checkpoints is still pending. "
        "Checkpoint will be triggered after the minimum time."
    ),
    _R.NOT_ALL_REQUIRED_TASKS_RUNNING: "Not all required tasks are currently running.",
    _R.EXCEPTION: "An Exception occurred while triggering the checkpoint.",
    _R.CHECKPOINT_EXPIRED: "Checkpoint expired before completing.",
    _R.CHECKPOINT_SUBSUMED: "Checkpoint has been subsumed.",
    _R.CHECKPOINT_DECLINED: "Checkpoint was declined.",
    _R.CHECKPOINT_ASYNC_EXCEPTION: "Asynchronous task checkpoint failed.",
    _R.CHECKPOINT_DECLINED_TASK_NOT_READY: "Checkpoint was declined (tasks not ready).",
    _R.CHECKPOINT_DECLINED_TASK_CLOSING: "Checkpoint was declined (task is closing).",
    _R.CHECKPOINT_DECLINED_SUBSUMED: (
        "Checkpoint was canceled because a barrier from newer checkpoint was received."
    ),
    _R.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER: (
        "Task received cancellation from one of its inputs."
    ),
    _R.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM: (
        "Checkpoint was declined because one input stream is finished."
    ),
    _R.CHECKPOINT_DECLINED_ALIGNMENT_LIMIT_EXCEEDED: (
        "The checkpoint alignment phase needed to buffer more than the configured maximum bytes."
    ),
    _R.CHECKPOINT_COORDINATOR_SHUTDOWN: "CheckpointCoordinator shutdown.",
    _R.JOB_FAILURE: "The job has failed.",
    _R.JOB_FAILOVER_REGION: "FailoverRegion is cancelling.",
    _R.TASK_FAILURE: "Task has failed.",
    _R.TASK_CHECKPOINT_FAILURE: "Task local checkpoint failure.",
    _R.FINALIZE_CHECKPOINT_FAILURE: "Failure to finalize checkpoint.",
    _R.TRIGGER_CHECKPOINT_FAILURE: "Trigger checkpoint failure.",
    _R.IO_EXCEPTION: "An Exception occurred while writing or reading checkpoint data.",
}

_PRE_FLIGHT = frozenset(
    {
        _R.PERIODIC_SCHEDULER_SHUTDOWN,
        _R.TOO_MANY_CONCURRENT_CHECKPOINTS,
        _R.MINIMUM_TIME_BETWEEN_CHECKPOINTS,
        _R.NOT_ALL_REQUIRED_TASKS_RUNNING,
        _R.EXCEPTION,
    }
)

_COUNTED = frozenset(
    {
        _R.CHECKPOINT_EXPIRED,
        _R.CHECKPOINT_DECLINED,
        _R.CHECKPOINT_ASYNC_EXCEPTION,
        _R.IO_EXCEPTION,
    }
)
