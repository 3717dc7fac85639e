"""Messages between tasks and the checkpoint coordinator, and the typed outcomes of handling them.

Invariant: messages are immutable values that carry everything the coordinator needs (no
callbacks, no live objects), so they can cross process boundaries pickled as they are.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from cairn.checkpoint.handles import OperatorSubtaskState
from cairn.ids import CheckpointId, OperatorUid, SubtaskIndex, VertexId


@dataclass(frozen=True, slots=True, order=True)
class TaskKey:
    """One subtask of one job vertex (a chain of operators executed by one task)."""

    vertex_id: VertexId
    subtask_index: SubtaskIndex

    def __str__(self) -> str:
        return f"vertex {self.vertex_id} subtask {self.subtask_index}"


@dataclass(frozen=True, slots=True)
class SubtaskCheckpointMetrics:
    """What one subtask measured while taking its part of a checkpoint (Flink's names)."""

    start_delay_ms: int = 0  # trigger on the coordinator -> first barrier at the task
    alignment_duration_ms: int = 0  # first barrier -> last barrier (aligned mode)
    sync_duration_ms: int = 0  # synchronous part of the snapshot
    async_duration_ms: int = 0  # asynchronous part (writing state files)
    state_size: int = 0  # bytes of state this subtask's handles point to
    processed_bytes: int = 0  # bytes processed during alignment
    persisted_bytes: int = 0  # in-flight bytes persisted (unaligned checkpoints)
    unaligned: bool = False


@dataclass(frozen=True, slots=True)
class TaskAcknowledgement:
    """A task finished its part of ``checkpoint_id``; ``states`` is keyed by operator uid.

    The subtask index of every operator state is ``task.subtask_index`` (chained operators
    share the task's index).
    """

    checkpoint_id: CheckpointId
    task: TaskKey
    states: Mapping[OperatorUid, OperatorSubtaskState] = field(default_factory=dict)
    metrics: SubtaskCheckpointMetrics = SubtaskCheckpointMetrics()


@dataclass(frozen=True, slots=True)
class TaskDecline:
    """A task cannot take part in ``checkpoint_id``.

    ``reason`` is a :class:`CheckpointFailureReason` value (e.g.
    ``CheckpointFailureReason.CHECKPOINT_DECLINED``); unknown strings count as a plain decline.
    """

    checkpoint_id: CheckpointId
    task: TaskKey
    reason: str
    message: str = ""


class AckResult(enum.Enum):
    """Outcome of an acknowledgement (Flink's ``PendingCheckpoint.TaskAcknowledgeResult``)."""

    SUCCESS = "success"  # counted towards the checkpoint
    DUPLICATE = "duplicate"  # this task already acknowledged this checkpoint
    UNKNOWN = "unknown"  # unknown checkpoint, or a task the checkpoint does not expect
    DISCARDED = "discarded"  # the checkpoint was aborted (late message); its files are removed


class CheckpointFailureReason(str, enum.Enum):
    """Why a checkpoint failed (Flink's ``CheckpointFailureReason`` names).

    Only :attr:`counts_as_failure` reasons go against the tolerable-failure counter, exactly
    as in Flink's ``CheckpointFailureManager``; the others are shutdown, failover or
    task-lifecycle effects that a restart would not fix.
    """

    CHECKPOINT_EXPIRED = "CHECKPOINT_EXPIRED"
    CHECKPOINT_DECLINED = "CHECKPOINT_DECLINED"
    CHECKPOINT_ASYNC_EXCEPTION = "CHECKPOINT_ASYNC_EXCEPTION"
    IO_EXCEPTION = "IO_EXCEPTION"
    FINALIZE_CHECKPOINT_FAILURE = "FINALIZE_CHECKPOINT_FAILURE"
    TRIGGER_CHECKPOINT_FAILURE = "TRIGGER_CHECKPOINT_FAILURE"
    CHECKPOINT_SUBSUMED = "CHECKPOINT_SUBSUMED"
    CHECKPOINT_COORDINATOR_SHUTDOWN = "CHECKPOINT_COORDINATOR_SHUTDOWN"
    JOB_FAILOVER_REGION = "JOB_FAILOVER_REGION"
    TASK_FAILURE = "TASK_FAILURE"
    TASK_CHECKPOINT_FAILURE = "TASK_CHECKPOINT_FAILURE"
    CHECKPOINT_DECLINED_TASK_NOT_READY = "CHECKPOINT_DECLINED_TASK_NOT_READY"
    CHECKPOINT_DECLINED_TASK_CLOSING = "CHECKPOINT_DECLINED_TASK_CLOSING"
    CHECKPOINT_DECLINED_SUBSUMED = "CHECKPOINT_DECLINED_SUBSUMED"
    CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER = "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER"
    CHECKPOINT_DECLINED_INPUT_END_OF_STREAM = "CHECKPOINT_DECLINED_INPUT_END_OF_STREAM"
    CHECKPOINT_DECLINED_ALIGNMENT_LIMIT_EXCEEDED = "CHECKPOINT_DECLINED_ALIGNMENT_LIMIT_EXCEEDED"

    @property
    def counts_as_failure(self) -> bool:
        return self in _COUNTED

    @classmethod
    def parse(cls, reason: str) -> CheckpointFailureReason:
        """Map a decline's reason string to a member; unknown text is a plain decline.

        >>> CheckpointFailureReason.parse("no such reason")
        <CheckpointFailureReason.CHECKPOINT_DECLINED: 'CHECKPOINT_DECLINED'>
        """
        try:
            return cls(reason)
        except ValueError:
            return cls.CHECKPOINT_DECLINED


_COUNTED = frozenset(
    {
        CheckpointFailureReason.CHECKPOINT_EXPIRED,
        CheckpointFailureReason.CHECKPOINT_DECLINED,
        CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
        CheckpointFailureReason.IO_EXCEPTION,
    }
)
