"""The checkpointing side of a task (Flink's ``SubtaskCheckpointCoordinator``): snapshots,
acknowledgements, declines, and the channel state of unaligned checkpoints.

Invariants: the synchronous part of a snapshot runs on the task thread between two input
batches, after the barrier was forwarded and before any later record is processed; the
asynchronous part runs on the worker's snapshot threads and ends with exactly one
acknowledgement or decline per checkpoint (an unaligned one waits for its channel state too);
while an unaligned checkpoint records, every batch taken from a recording channel, and every
batch its barriers overtook there, is in its channel state exactly once.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.handles import OperatorSubtaskState, StateFileWriter
from cairn.checkpoint.messages import (
    SubtaskCheckpointMetrics,
    TaskAcknowledgement,
    TaskDecline,
    TaskKey,
)
from cairn.checkpoint.storage_access import space_problem
from cairn.events import AlignmentMode, CancelCheckpointMarker, CheckpointBarrier
from cairn.ids import CheckpointId, OperatorUid
from cairn.runtime.barriers.alternating import as_unaligned
from cairn.runtime.barriers.api import AlignmentStats
from cairn.runtime.channel_state import ChannelStateRecorder
from cairn.runtime.faults import FaultInjector
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators.base import OperatorSnapshot, StreamOperator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.unaligned_ack import UnalignedAcknowledgement

log = logging.getLogger(__name__)

_ASYNC_FAILURE = CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION
_NOT_RECORDING: Container[int] = frozenset()


_Acknowledge = Callable[[Mapping[Any, OperatorSubtaskState], SubtaskCheckpointMetrics], None]


@dataclass(frozen=True, slots=True)
class _SyncPart:
    """What the synchronous part of a snapshot leaves to the asynchronous one."""

    snapshots: list[tuple[OperatorUid, OperatorSnapshot]]  # (operator uid, its snapshot to run)
    duration_ms: float


@dataclass(frozen=True, slots=True)
class _Alignment:
    """How the barrier was aligned: the subtask's figures in the acknowledgement."""

    start_delay_ms: int
    alignment_ms: int
    unaligned: bool
    processed_bytes: int


class CheckpointServices(Protocol):
    """What checkpointing needs of the worker that runs the task."""

    faults: FaultInjector

    def send_to_master(self, message: Any) -> None: ...

    def submit_async(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a snapshot thread."""
        ...

    def state_writer(self, checkpoint_id: CheckpointId) -> StateFileWriter: ...


class SubtaskCheckpointCoordinator:
    """Takes the task's part of each checkpoint; the barrier handler's actions.

    Implements ``UnalignedBarrierHandlerActions``: the handler decides when (trigger, abort,
    start and end of recording), this class does it. The task gives it the batches a barrier
    overtook (``barrier_overtook``) around each delivery of a barrier to the handler.

    >>> from cairn.graph.job_graph import OperatorNode
    >>> from cairn.runtime.operators.base import OperatorSnapshot
    >>> class Counter(StreamOperator):
    ...     def snapshot_state(self, checkpoint_id, timestamp_ms, options):
    ...         return OperatorSnapshot(keyed=None, operator=None, inline={"n": 3})
    >>> class Services:
    ...     faults = FaultInjector((), 0, hard_kill=False)
    ...     def send_to_master(self, msg): print(type(msg).__name__, msg.checkpoint_id)
    ...     def submit_async(self, fn): fn()
    ...     def state_writer(self, checkpoint_id): return None
    >>> op = Counter(OperatorNode("count", "count", 1, "map", None, None, 1, 128, False))
    >>> checkpoints = SubtaskCheckpointCoordinator(
    ...     TaskKey(1, 0), "count (1/1)", "count", [op], [], None, Services())
    >>> checkpoints.checkpoint_state(CheckpointBarrier(CheckpointId(7), timestamp_ms=0))
    TaskAcknowledgement 7
    >>> checkpoints.abort_checkpoint(CheckpointId(8), CheckpointFailureReason.CHECKPOINT_EXPIRED)
    TaskDecline 8
    """

    def __init__(
        self,
        key: TaskKey,
        task_name: str,
        vertex_name: str,
        operators: list[StreamOperator],
        writers: list[RecordWriter],
        gate: InputGate | None,
        services: CheckpointServices,
    ) -> None:
        self._key = key
        self._task_name = task_name
        self._vertex_name = vertex_name
        self._operators = operators
        self._writers = writers
        self._gate = gate
        self._services = services
        self._faults = services.faults
        self._recording_view = _NOT_RECORDING
        self._recorder: ChannelStateRecorder | None = None
        # Batches overtaken by the barrier being delivered: (channel, checkpoint, batches).
        self._overtaken: tuple[int, int, list[Any]] | None = None
        self._acks: dict[CheckpointId, UnalignedAcknowledgement] = {}

    def record_channels_of(self, recording_view: Container[int]) -> None:
        """The handler's live view of its recording channels (unaligned checkpoints only)."""
        self._recording_view = recording_view

    # -- barrier handler actions ---------------------------------------------------------

    def trigger_checkpoint(self, barrier: CheckpointBarrier, stats: AlignmentStats) -> None:
        gate = self._gate
        processed = 0
        if gate is not None:
            processed, gate.processed_bytes, gate.measuring = gate.processed_bytes, 0, False
        if stats.unaligned and barrier.options.alignment is not AlignmentMode.UNALIGNED:
            barrier = as_unaligned(barrier)  # turned unaligned here: downstream need not align
        self.checkpoint_state(
            barrier,
            start_delay_ms=stats.start_delay_ms,
            alignment_ms=stats.alignment_duration_ms,
            unaligned=stats.unaligned,
            processed_bytes=processed,
        )

    def abort_checkpoint(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None:
        if self._gate is not None:
            self._gate.measuring = False
        recorder = self._recorder
        if recorder is not None and recorder.checkpoint_id <= checkpoint_id:
            self._stop_recording()
        for cid in [c for c in self._acks if c <= checkpoint_id]:
            self._acks.pop(cid).cancel()
        for w in self._writers:
            w.broadcast_event(CancelCheckpointMarker(checkpoint_id))
        message = f"{self._task_name} aborted checkpoint {checkpoint_id}: {reason.message}"
        self._decline(checkpoint_id, reason, message)

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier, recording: frozenset[int]) -> None:
        gate = self._gate
        assert gate is not None
        cid = barrier.checkpoint_id
        recorder = ChannelStateRecorder(cid, len(gate.channels), self._recording_view)
        overtaken = self._overtaken
        if overtaken is not None and overtaken[1] == cid:
            recorder.add_all(overtaken[0], overtaken[2])
            self._overtaken = None
        self._recorder = recorder
        gate.recorder = recorder
        gate.signal.raised = True  # the recording channels' announced barriers may overtake

    def all_barriers_received(self, checkpoint_id: CheckpointId) -> None:
        recorder = self._recorder
        if recorder is None or recorder.checkpoint_id != checkpoint_id:
            return
        self._stop_recording()
        recorder.complete = True
        ack = self._acks.pop(recorder.checkpoint_id, None)
        if ack is None or ack.closed:
            return
        name = f"channels {self._vertex_name} {self._key.subtask_index}".replace("/", "_")
        services = self._services

        def write_channel_state() -> None:
            try:
                writer = services.state_writer(recorder.checkpoint_id)
                ack.channels_done(recorder.write(writer, name))
            except Exception as exc:
                ack.cancel()
                self._decline_async_failure(checkpoint_id, "in-flight data", exc)

        services.submit_async(write_channel_state)

    # -- the task's calls ------------------------------------------------------------------

    def barrier_overtook(
        self, channel: int, checkpoint_id: CheckpointId, batches: list[Any]
    ) -> None:
        """``channel``'s barrier ``checkpoint_id``, about to be delivered, overtook ``batches``:
        channel state if its checkpoint is (this channel recording) or becomes unaligned (the
        handler calls ``init_inputs_checkpoint`` during the delivery), else kept queued only.
        The task calls ``delivered`` after the delivery either way."""
        recorder = self._recorder
        if (
            recorder is not None
            and recorder.checkpoint_id == checkpoint_id
            and (channel in recorder.channels)
        ):
            recorder.add_all(channel, batches)
        else:
            self._overtaken = (channel, checkpoint_id, batches)

    def delivered(self) -> None:
        """The barrier handed to ``barrier_overtook`` has been delivered to the handler."""
        self._overtaken = None

    def checkpoint_state(
        self,
        barrier: CheckpointBarrier,
        *,
        start_delay_ms: int = 0,
        alignment_ms: int = 0,
        unaligned: bool = False,
        processed_bytes: int = 0,
    ) -> None:
        """Pre-barrier hooks, forward ``barrier``, take the synchronous snapshot; the
        asynchronous part writes the state and acknowledges (or declines)."""
        checkpoint_id = barrier.checkpoint_id
        acknowledge, ack = self._acknowledgement(checkpoint_id, unaligned)
        sync = self._synchronous_part(barrier)
        if self._faults.active:
            self._faults.check(
                "after-barrier", self._vertex_name, self._key.subtask_index, checkpoint_id
            )
        alignment = _Alignment(start_delay_ms, alignment_ms, unaligned, processed_bytes)

        def run_async() -> None:
            self._asynchronous_part(checkpoint_id, sync, alignment, acknowledge, ack)

        self._services.submit_async(run_async)

    def _acknowledgement(
        self, checkpoint_id: CheckpointId, unaligned: bool
    ) -> tuple[_Acknowledge, UnalignedAcknowledgement | None]:
        """How the asynchronous part acknowledges ``checkpoint_id``: at once (aligned), or
        through an ``UnalignedAcknowledgement`` that also waits for the channel state (returned
        too, to be cancelled on failure)."""
        key, services = self._key, self._services
        if unaligned:
            ack = UnalignedAcknowledgement(
                checkpoint_id, key, self._operators[0].uid, services.send_to_master
            )
            self._acks[checkpoint_id] = ack
            return ack.operators_done, ack

        def acknowledge(
            states: Mapping[Any, OperatorSubtaskState], metrics: SubtaskCheckpointMetrics
        ) -> None:
            services.send_to_master(TaskAcknowledgement(checkpoint_id, key, states, metrics))

        return acknowledge, None

    def _synchronous_part(self, barrier: CheckpointBarrier) -> _SyncPart:
        """On the task thread: pre-barrier hooks, the barrier forwarded, each operator's
        synchronous snapshot; timed (per phase in the debug log)."""
        checkpoint_id = barrier.checkpoint_id
        t0 = time.perf_counter()
        cpu0 = time.thread_time()
        for op in self._operators:
            op.prepare_snapshot_pre_barrier(checkpoint_id)
        t_pre = time.perf_counter()
        for w in self._writers:
            w.broadcast_event(barrier)
        t_fwd = time.perf_counter()
        ts, opts = barrier.timestamp_ms, barrier.options
        snapshots = []
        op_ms = []
        for op in self._operators:
            t_op = time.perf_counter()
            snapshots.append((op.uid, op.snapshot_state(checkpoint_id, ts, opts)))
            op_ms.append((op.uid, (time.perf_counter() - t_op) * 1000))
        sync_ms = (time.perf_counter() - t0) * 1000
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "checkpoint %d, synchronous part of %s: %.1f ms (%.1f ms CPU of this thread): "
                "pre-barrier %.1f ms, barrier forwarded in %.1f ms, snapshots %s",
                checkpoint_id,
                self._task_name,
                sync_ms,
                (time.thread_time() - cpu0) * 1000,
                (t_pre - t0) * 1000,
                (t_fwd - t_pre) * 1000,
                ", ".join(f"{uid} {ms:.1f} ms" for uid, ms in op_ms),
            )
        return _SyncPart(snapshots, sync_ms)

    def _asynchronous_part(
        self,
        checkpoint_id: CheckpointId,
        sync: _SyncPart,
        alignment: _Alignment,
        acknowledge: _Acknowledge,
        ack: UnalignedAcknowledgement | None,
    ) -> None:
        """On a snapshot thread: write each operator's state, then acknowledge with the
        handles and the metrics, or decline (and cancel ``ack``) if anything raised."""
        faults, name, index = self._faults, self._vertex_name, self._key.subtask_index
        t1 = time.perf_counter()
        try:
            writer = self._services.state_writer(checkpoint_id)
            states: dict[Any, OperatorSubtaskState] = {}
            for uid, snap in sync.snapshots:
                states[uid] = snap.run(writer)
                if faults.active:
                    faults.check("during-upload", name, index, checkpoint_id)
            metrics = SubtaskCheckpointMetrics(
                start_delay_ms=alignment.start_delay_ms,
                alignment_duration_ms=alignment.alignment_ms,
                sync_duration_ms=int(sync.duration_ms),
                async_duration_ms=int((time.perf_counter() - t1) * 1000),
                state_size=sum(s.state_size for s in states.values()),
                checkpointed_size=sum(s.checkpointed_size for s in states.values()),
                processed_bytes=alignment.processed_bytes,
                persisted_bytes=0,
                unaligned=alignment.unaligned,
            )
            acknowledge(states, metrics)
        except Exception as exc:
            if ack is not None:
                ack.cancel()
            self._decline_async_failure(checkpoint_id, "asynchronous part", exc)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        faults, name, index = self._faults, self._vertex_name, self._key.subtask_index
        if faults.active:
            faults.check("before-commit", name, index, checkpoint_id)
        for op in self._operators:
            op.notify_backend_checkpoint_complete(checkpoint_id)
            op.notify_checkpoint_complete(checkpoint_id)
        if faults.active:
            faults.check("after-commit", name, index, checkpoint_id)

    def notify_checkpoint_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None:
        log.debug("%s: checkpoint %d aborted: %s", self._task_name, checkpoint_id, reason.name)
        for op in self._operators:
            op.notify_checkpoint_aborted(checkpoint_id)

    # -- internals -------------------------------------------------------------------------

    def _stop_recording(self) -> None:
        self._recorder = None
        if self._gate is not None:
            self._gate.recorder = None

    def _decline(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason, message: str
    ) -> None:
        self._services.send_to_master(TaskDecline(checkpoint_id, self._key, reason, message))

    def _decline_async_failure(
        self, checkpoint_id: CheckpointId, part: str, exc: Exception
    ) -> None:
        """Snapshot threads: writing ``part`` of ``checkpoint_id`` raised ``exc``."""
        log.warning(
            "writing the %s of checkpoint %s failed in %s",
            part,
            checkpoint_id,
            self._task_name,
            exc_info=True,
        )
        space = space_problem(exc)  # the one storage failure worth naming up front
        detail = (f"{space}: " if space else "") + f"{type(exc).__name__}: {exc}"
        self._decline(checkpoint_id, _ASYNC_FAILURE, f"{detail}\n{traceback.format_exc()}")
