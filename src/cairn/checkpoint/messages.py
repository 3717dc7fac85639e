"""Messages between tasks and the checkpoint coordinator, and the typed outcomes of handling them
(``CheckpointFailureReason`` is defined in ``failure`` and re-exported here).

Invariant: messages are immutable values that carry everything the coordinator needs (no
callbacks, no live objects), so they can cross process boundaries pickled as they are.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from cairn.checkpoint.failure import CheckpointFailureReason
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
    checkpointed_size: int = -1  # bytes this checkpoint wrote (-1: all of state_size)

    @property
    def checkpointed(self) -> int:
        """Bytes written for this checkpoint: less than ``state_size`` when incremental."""
        return self.state_size if self.checkpointed_size < 0 else self.checkpointed_size


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
    """A task cannot take part in ``checkpoint_id``, for ``reason`` (``message``: the detail,
    e.g. a traceback)."""

    checkpoint_id: CheckpointId
    task: TaskKey
    reason: CheckpointFailureReason
    message: str = ""


class AckResult(enum.Enum):
    """Outcome of an acknowledgement (Flink's ``PendingCheckpoint.TaskAcknowledgeResult``)."""

    SUCCESS = "success"  # counted towards the checkpoint
    DUPLICATE = "duplicate"  # this task already acknowledged this checkpoint
    UNKNOWN = "unknown"  # unknown checkpoint, or a task the checkpoint does not expect
    DISCARDED = "discarded"  # the checkpoint was aborted (late message); its files are removed
