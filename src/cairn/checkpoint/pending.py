"""A checkpoint that was triggered and is collecting acknowledgements (Flink's PendingCheckpoint).

Invariant: a pending checkpoint counts each expected task at most once and accepts nothing
after it was discarded; it is fully acknowledged exactly when every expected task acked.
Pure bookkeeping: no I/O, no clock (times are passed in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cairn.checkpoint.handles import OperatorSubtaskState
from cairn.checkpoint.messages import AckResult, TaskAcknowledgement, TaskKey
from cairn.checkpoint.metadata import CheckpointMetadata, CheckpointSummaryStats, OperatorMetadata
from cairn.events import CheckpointOptions
from cairn.ids import CheckpointId, JobId, OperatorUid, SubtaskIndex


class PendingCheckpoint:
    """Acknowledgement accounting of one checkpoint.

    >>> from cairn.ids import VertexId, SubtaskIndex
    >>> t0 = TaskKey(VertexId(1), SubtaskIndex(0))
    >>> p = PendingCheckpoint(CheckpointId(1), 0, CheckpointOptions(), [t0])
    >>> p.acknowledge(TaskAcknowledgement(CheckpointId(1), t0), now_ms=5), p.is_fully_acknowledged
    (<AckResult.SUCCESS: 'success'>, True)
    """

    def __init__(
        self,
        checkpoint_id: CheckpointId,
        trigger_ms: int,
        options: CheckpointOptions,
        expected_tasks: Iterable[TaskKey],
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.trigger_ms = trigger_ms
        self.options = options
        self._expected = frozenset(expected_tasks)
        if not self._expected:
            raise ValueError("a checkpoint must expect at least one task")
        self._acks: dict[TaskKey, TaskAcknowledgement] = {}
        self._ack_times: dict[TaskKey, int] = {}
        self._discarded = False

    @property
    def is_savepoint(self) -> bool:
        return self.options.is_savepoint

    @property
    def is_discarded(self) -> bool:
        return self._discarded

    @property
    def is_fully_acknowledged(self) -> bool:
        return not self._discarded and len(self._acks) == len(self._expected)

    @property
    def expected_tasks(self) -> frozenset[TaskKey]:
        return self._expected

    @property
    def not_yet_acknowledged(self) -> frozenset[TaskKey]:
        return self._expected - self._acks.keys()

    @property
    def acknowledgements(self) -> Mapping[TaskKey, TaskAcknowledgement]:
        return self._acks

    @property
    def latest_ack_ms(self) -> int | None:
        return max(self._ack_times.values(), default=None)

    def acknowledge(self, ack: TaskAcknowledgement, now_ms: int) -> AckResult:
        if ack.checkpoint_id != self.checkpoint_id:
            raise ValueError(
                f"ack for checkpoint {ack.checkpoint_id} given to pending {self.checkpoint_id}"
            )
        if self._discarded:
            return AckResult.DISCARDED
        if ack.task not in self._expected:
            return AckResult.UNKNOWN
        if ack.task in self._acks:
            return AckResult.DUPLICATE
        self._acks[ack.task] = ack
        self._ack_times[ack.task] = now_ms
        return AckResult.SUCCESS

    def discard(self) -> None:
        """Mark aborted: later acknowledgements are DISCARDED. Deleting files is the caller's."""
        self._discarded = True

    def operator_states(self) -> dict[OperatorUid, dict[SubtaskIndex, OperatorSubtaskState]]:
        """uid -> subtask index -> state, from all acknowledgements (empty states dropped).

        Raises:
            ValueError: two tasks reported state for the same operator subtask.
        """
        out: dict[OperatorUid, dict[SubtaskIndex, OperatorSubtaskState]] = {}
        seen: set[tuple[OperatorUid, SubtaskIndex]] = set()
        for task, ack in sorted(self._acks.items()):
            for uid, state in ack.states.items():
                subtasks = out.setdefault(uid, {})
                if (uid, task.subtask_index) in seen:
                    raise ValueError(
                        f"operator {uid!r} subtask {task.subtask_index} reported twice "
                        f"(again by {task}) in checkpoint {self.checkpoint_id}"
                    )
                seen.add((uid, task.subtask_index))
                if not state.is_empty:
                    subtasks[task.subtask_index] = state
        return out

    def finalize(
        self,
        job_id: JobId,
        completed_ms: int,
        operators: Mapping[OperatorUid, tuple[int, int]],
        max_parallelism: int,
        properties: Mapping[str, str] | None = None,
    ) -> CheckpointMetadata:
        """The metadata of this fully acknowledged checkpoint (Flink's ``finalizeCheckpoint``).

        ``operators`` maps every operator uid of the job to (parallelism, max parallelism);
        operators without state are included so a restore can tell them from unknown ones.

        Raises:
            ValueError: not fully acknowledged, or state came for an operator not in the job.
        """
        if not self.is_fully_acknowledged:
            raise ValueError(f"checkpoint {self.checkpoint_id} is not fully acknowledged")
        states = self.operator_states()
        unknown = sorted(states.keys() - operators.keys())
        if unknown:
            raise ValueError(f"state reported for operators unknown to the job: {unknown}")
        ops = {
            uid: OperatorMetadata(uid, par, max_par, states.get(uid, {}))
            for uid, (par, max_par) in operators.items()
        }
        m = [a.metrics for a in self._acks.values()]
        summary = CheckpointSummaryStats(
            state_size=sum(op.state_size for op in ops.values()),
            num_subtasks=len(m),
            processed_bytes=sum(x.processed_bytes for x in m),
            persisted_bytes=sum(x.persisted_bytes for x in m),
            max_alignment_duration_ms=max(x.alignment_duration_ms for x in m),
            max_sync_duration_ms=max(x.sync_duration_ms for x in m),
            max_async_duration_ms=max(x.async_duration_ms for x in m),
            unaligned=any(x.unaligned for x in m),
        )
        return CheckpointMetadata(
            job_id=job_id,
            checkpoint_id=self.checkpoint_id,
            trigger_ms=self.trigger_ms,
            completed_ms=completed_ms,
            max_parallelism=max_parallelism,
            operators=ops,
            is_savepoint=self.is_savepoint,
            stats=summary,
            properties=dict(properties or {}),
        )
