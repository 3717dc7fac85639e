"""A task: one subtask of a job vertex, i.e. a chain of operators fed by an input gate.

Invariants: a task runs on its worker's task thread only (it never blocks: it returns when
it has no input or its outputs have no capacity); the synchronous part of a snapshot happens
between two input batches, after the barrier was forwarded and before any later record is
processed; the asynchronous part runs on the worker's snapshot threads and ends with exactly
one acknowledgement or decline per checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from cairn.checkpoint.handles import OperatorSubtaskState, StateFileWriter
from cairn.checkpoint.messages import (
    SubtaskCheckpointMetrics,
    TaskAcknowledgement,
    TaskDecline,
    TaskKey,
)
from cairn.clock import Clock, SystemClock
from cairn.events import (
    AlignmentMode,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    EndOfPartition,
)
from cairn.graph.job_graph import JobVertex
from cairn.ids import CheckpointId
from cairn.runtime.barriers import CheckpointFailureReason, create_barrier_handler
from cairn.runtime.barriers.unaligned import UnalignedBarrierHandler
from cairn.runtime.channel_state import ChannelStateRecorder, HeldBatch
from cairn.runtime.channels import DEFAULT_CAPACITY
from cairn.runtime.debloat import BufferDebloater, DebloatConfig
from cairn.runtime.faults import FaultInjector
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators.base import StreamOperator
from cairn.runtime.operators.sources import SourceFunctionOperator, SourceOperator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.reports import SourceExhausted, TaskFinished, TaskMetrics
from cairn.runtime.unaligned_ack import SliceBudget, UnalignedAcknowledgement

log = logging.getLogger(__name__)

MAX_BATCHES_PER_RUN = 8
SOURCE_BATCH = 1024


class TaskServices(Protocol):
    attempt: int
    job_id: str
    faults: FaultInjector

    def send_to_master(self, message: Any) -> None: ...

    def submit_async(self, fn: Callable[[], None]) -> None: ...

    def state_writer(self, checkpoint_id: int) -> StateFileWriter: ...

    def wake(self) -> None: ...

    def control_pending(self) -> bool: ...


class StreamTask:
    def __init__(
        self,
        key: TaskKey,
        vertex: JobVertex,
        operators: list[StreamOperator],
        gate: InputGate | None,
        writers: list[RecordWriter],
        services: TaskServices,
        alignment: AlignmentMode,
        checkpointing: bool,
        debloat: DebloatConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.key = key
        self.vertex = vertex
        self.name = f"{vertex.name} ({key.subtask_index + 1}/{vertex.parallelism})"
        self.operators = operators
        self.head = operators[0]
        self.gate = gate
        self.writers = writers
        self.services = services
        self.checkpointing = checkpointing
        self.records_in = 0
        self.finished = False
        self.source_exhausted = False
        self.backpressured = False
        self._faults = services.faults
        self._clock: Clock = SystemClock() if clock is None else clock
        self.handler = None
        # Set when the job may take unaligned checkpoints (also: aligned with a timeout).
        self._unaligned: UnalignedBarrierHandler | None = None
        if gate is not None and gate.channels:
            self.handler = create_barrier_handler(alignment, len(gate.channels), self, self._clock)
            gate.set_blocked_view(self.handler.blocked_view)
            if isinstance(self.handler, UnalignedBarrierHandler):
                self._unaligned = self.handler
        self.is_source = isinstance(self.head, (SourceOperator, SourceFunctionOperator))
        # Set by an empty poll only: when (time.monotonic()) the source expects records
        # again. Cleared on every other path, so a stale time never keeps the worker awake.
        self.source_ready_at: float | None = None
        n = len(gate.channels) if gate is not None else 0
        self._last_barrier = [-1] * n  # highest barrier id delivered per channel
        self._recorder: ChannelStateRecorder | None = None
        # Batches overtaken by the barrier being delivered: (channel, checkpoint, batches).
        self._overtaken: tuple[int, int, list[Any]] | None = None
        self._acks: dict[int, UnalignedAcknowledgement] = {}
        self._slices = SliceBudget()
        self._control_pending = services.control_pending
        self._announced_deadline_ms: int | None = None
        self._debloater: BufferDebloater | None = None
        if debloat is not None and gate is not None and gate.channels:
            self._debloater = BufferDebloater(
                debloat, len(gate.channels) * DEFAULT_CAPACITY, self._clock.now_ms())

    # -------------------------------------------------------------------- processing

    def _outputs_available(self) -> bool:
        for w in self.writers:
            if not w.available():
                return False
        return True

    def run_once(self) -> bool:
        """Process a little input; True if anything happened."""
        if self.finished:
            return False
        unaligned = self._unaligned
        did = False
        if unaligned is not None:
            # Priority events go first, even under backpressure: that is their point.
            did = self._process_priority_events(unaligned)
        if not self._outputs_available():
            self.backpressured = True
            self.source_ready_at = None  # not polled: no due time (the relief wakes the task)
            return did
        self.backpressured = False
        if self.is_source:
            return self._run_source_once()
        gate = self.gate
        assert gate is not None
        signal = gate.signal
        debloater = self._debloater
        if debloater is not None:
            now_ms = self._clock.now_ms()
            if now_ms >= debloater.next_ms:
                size = debloater.observe(self.records_in, now_ms)
                if size is not None:
                    for ch in gate.channels:
                        ch.request_buffer_size(size)
        for _ in range(MAX_BATCHES_PER_RUN):
            item = gate.poll()
            if item is None:
                break
            did = True
            channel, entry = item
            t = type(entry)
            if t is list and unaligned is None:
                self.records_in += len(entry)
                self.head.process_batch(entry)
            elif t is list or t is HeldBatch:
                self._process_slice(channel, entry)
            else:
                self._on_event(channel, entry)
                if self.finished:
                    break
                continue
            if self._faults.active:
                self._faults.check("processing", self.vertex.name, self.key.subtask_index,
                                   records=self.records_in)
            if unaligned is not None and signal.raised:
                self._process_priority_events(unaligned)
            if not self._outputs_available() or self._control_pending():
                break
        return did

    def _process_slice(self, channel: int, entry: Any) -> None:
        """Process (part of) a batch; put the rest back so priority events are seen soon."""
        held = entry if type(entry) is HeldBatch else None
        records = entry.records if held is not None else entry
        budget = self._slices.records
        rest = None
        if len(records) > budget:
            records, rest = records[:budget], records[budget:]
        t0 = time.perf_counter()
        self.records_in += len(records)
        self.head.process_batch(records)
        self._slices.learn(len(records), time.perf_counter() - t0)
        if held is not None and held.replayed and self._faults.active:
            self._faults.check("replay", self.vertex.name, self.key.subtask_index,
                               records=self.records_in)
        if rest:
            recorder = self._recorder
            if recorder is not None and channel in recorder.channels:
                recorded_for = recorder.checkpoint_id  # recorded when it was taken
            else:
                recorded_for = held.recorded_for if held is not None else -1
            replayed = held.replayed if held is not None else False
            assert self.gate is not None
            self.gate.put_back(channel, HeldBatch(rest, recorded_for, replayed))

    def _run_source_once(self) -> bool:
        self.source_ready_at = None
        if self.source_exhausted:
            return False
        head = self.head
        assert isinstance(head, (SourceOperator, SourceFunctionOperator))
        limit = SOURCE_BATCH
        for w in self.writers:  # debloated outputs: emit no more than a buffer at once
            limit = min(limit, w.min_batch_size())
        batch = head.poll(limit)
        if batch is None:
            self.source_exhausted = True
            self.flush()
            self.services.send_to_master(SourceExhausted(self.services.attempt, self.key))
            if not self.checkpointing:
                self.end_input()
            return True
        if not batch:
            hint = head.available_in_s()
            if hint is not None:
                self.source_ready_at = time.monotonic() + hint
            return False
        self.records_in += len(batch)
        self._emit_from_source(batch)
        if self._faults.active:
            self._faults.check("processing", self.vertex.name, self.key.subtask_index,
                               records=self.records_in)
        return True

    def _emit_from_source(self, batch: list[Any]) -> None:
        ops = self.operators
        if len(ops) > 1:
            ops[1].process_batch(batch)
        else:
            self.head.output(batch)

    def _on_event(self, channel: int, event: Any) -> None:
        handler = self.handler
        assert handler is not None and self.gate is not None
        if isinstance(event, CheckpointBarrier):
            self._deliver_barrier(channel, event, [])
        elif isinstance(event, CancelCheckpointMarker):
            handler.on_cancel_marker(channel, event)
        elif isinstance(event, EndOfPartition):
            handler.on_end_of_partition(channel)
            self.gate.mark_finished(channel)
            if self.gate.all_finished:
                self.end_input()
        else:
            raise TypeError(f"unexpected event {event!r} on channel {channel}")

    def _deliver_barrier(self, channel: int, barrier: CheckpointBarrier,
                         overtaken: list[Any]) -> None:
        """Hand ``barrier`` of ``channel`` to the handler; ``overtaken`` are the batches it
        jumped (channel state if its checkpoint is, or becomes, unaligned)."""
        cid = int(barrier.checkpoint_id)
        if cid <= self._last_barrier[channel]:
            log.debug("%s: dropping stale barrier %d on channel %d", self.name, cid, channel)
            return
        self._last_barrier[channel] = cid
        assert self.handler is not None
        recorder = self._recorder
        if overtaken and recorder is not None and recorder.checkpoint_id == cid \
                and channel in recorder.channels:
            recorder.add_all(channel, overtaken)
            overtaken = []
        self._overtaken = (channel, cid, overtaken) if overtaken else None
        gate = self.gate
        assert gate is not None
        if not self.handler.is_aligning:
            gate.processed_bytes = 0  # a new checkpoint may start aligning here
        try:
            self.handler.on_barrier(channel, barrier)
        finally:
            self._overtaken = None
        gate.measuring = self.handler.is_aligning

    def _process_priority_events(self, handler: UnalignedBarrierHandler) -> bool:
        """Aligned-checkpoint timeouts and barriers that overtake in-flight data."""
        gate = self.gate
        assert gate is not None
        did = False
        deadline = handler.next_timeout_ms
        if deadline is not None and self._clock.now_ms() >= deadline \
                and handler.check_alignment_timeout():
            did = True
            gate.signal.raised = True  # recording channels' barriers may overtake now
        announced_deadline = self._announced_deadline_ms
        if not gate.signal.raised and (announced_deadline is None
                                       or self._clock.now_ms() < announced_deadline):
            return did
        self._announced_deadline_ms = None
        blocked = handler.blocked_view
        for channel, barrier in gate.pending_announcements():
            if channel in blocked:
                continue
            cid = int(barrier.checkpoint_id)
            options = barrier.options
            if cid <= self._last_barrier[channel]:
                gate.overtake(channel)  # stale: its checkpoint is over here
                gate.signal.raised = True  # look at the next one of this channel
                continue
            if options.alignment is not AlignmentMode.UNALIGNED \
                    and handler.recording_checkpoint_id != cid:
                timeout = options.aligned_timeout_ms
                if timeout is None:
                    continue
                due = barrier.timestamp_ms + timeout
                if self._clock.now_ms() < due:
                    # Taken in order by poll() unless its alignment times out first.
                    if self._announced_deadline_ms is None or due < self._announced_deadline_ms:
                        self._announced_deadline_ms = due
                    continue
            barrier, overtaken = gate.overtake(channel)
            self._deliver_barrier(channel, barrier, overtaken)
            did = True
            if self.finished:
                break
        return did

    def end_input(self) -> None:
        """All inputs ended (or the source finished): finish operators head to tail."""
        if self.finished:
            return
        for op in self.operators:
            op.finish()
        for w in self.writers:
            w.broadcast_event(EndOfPartition())
        self.finished = True
        self.services.send_to_master(TaskFinished(self.services.attempt, self.key))

    def flush(self) -> None:
        for w in self.writers:
            w.flush_all()

    def flush_ready(self) -> bool:
        """Buffer timeout / idle: flush what the output channels can send now."""
        flushed = False
        for w in self.writers:
            if w.flush_ready():
                flushed = True
        return flushed

    def fire_timers(self, now_ms: int) -> bool:
        fired = False
        if self.finished:
            return False
        for op in self.operators:
            t = op.next_timer_ms()
            if t is not None and t <= now_ms:
                op.on_processing_time(now_ms)
                fired = True
        return fired

    def next_timer_ms(self) -> int | None:
        """Earliest operator timer or alignment deadline (wall clock ms)."""
        times = [t for op in self.operators if (t := op.next_timer_ms()) is not None]
        unaligned = self._unaligned
        if unaligned is not None:
            # The handler's clock is the wall clock (SystemClock), like the timers'.
            for t in (unaligned.next_timeout_ms, self._announced_deadline_ms):
                if t is not None:
                    times.append(t)
        return min(times) if times else None

    def metrics(self) -> TaskMetrics:
        out = sum(w.records_out for w in self.writers) if self.writers else self.records_in
        return TaskMetrics(self.records_in, out, self.backpressured)

    # -------------------------------------------------------------------- checkpoints

    def trigger_source_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Coordinator-triggered checkpoint of a source task (no input barriers)."""
        if self.finished:
            return
        head = self.head
        if isinstance(head, SourceFunctionOperator):
            with head.checkpoint_lock:
                pending = head.poll(1 << 30)
                if pending:
                    self.records_in += len(pending)
                    self._emit_from_source(pending)
                self._perform_checkpoint(barrier, start_delay_ms=0, alignment_ms=0)
        else:
            self._perform_checkpoint(barrier, start_delay_ms=0, alignment_ms=0)

    # BarrierHandlerActions -------------------------------------------------------------

    def trigger_checkpoint(self, barrier: CheckpointBarrier, stats: Any) -> None:
        unaligned = bool(getattr(stats, "unaligned", False))
        gate = self.gate
        processed = 0
        if gate is not None:
            processed, gate.processed_bytes, gate.measuring = gate.processed_bytes, 0, False
        if unaligned and barrier.options.alignment is not AlignmentMode.UNALIGNED:
            # The checkpoint turned unaligned here (timeout): downstream need not align.
            barrier = dataclasses.replace(barrier, options=CheckpointOptions(
                barrier.options.type, AlignmentMode.UNALIGNED, None))
        self._perform_checkpoint(
            barrier,
            start_delay_ms=int(getattr(stats, "start_delay_ms", 0) or 0),
            alignment_ms=int(getattr(stats, "alignment_duration_ms", 0) or 0),
            unaligned=unaligned,
            processed_bytes=processed,
        )

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier,
                               recording: frozenset[int]) -> None:
        gate, handler = self.gate, self._unaligned
        assert gate is not None and handler is not None
        cid = int(barrier.checkpoint_id)
        recorder = ChannelStateRecorder(cid, len(gate.channels), handler.recording_view)
        stash = self._overtaken
        if stash is not None and stash[1] == cid:
            recorder.add_all(stash[0], stash[2])
            self._overtaken = None
        self._recorder = recorder
        gate.recorder = recorder
        gate.signal.raised = True  # the recording channels' announced barriers may overtake

    def all_barriers_received(self, checkpoint_id: Any) -> None:
        recorder = self._recorder
        if recorder is None or recorder.checkpoint_id != int(checkpoint_id):
            return
        self._stop_recording()
        recorder.complete = True
        ack = self._acks.pop(recorder.checkpoint_id, None)
        if ack is None or ack.closed:
            return
        name = f"channels {self.vertex.name} {self.key.subtask_index}".replace("/", "_")
        services = self.services

        def write_channel_state() -> None:
            try:
                ack.channels_done(recorder.write(services.state_writer(recorder.checkpoint_id),
                                                 name))
            except Exception as exc:
                ack.cancel()
                log.warning("writing in-flight data of checkpoint %s failed in %s",
                            recorder.checkpoint_id, self.name, exc_info=True)
                services.send_to_master(TaskDecline(
                    CheckpointId(recorder.checkpoint_id), self.key,
                    CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
                    f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))

        services.submit_async(write_channel_state)

    def _stop_recording(self) -> None:
        self._recorder = None
        if self.gate is not None:
            self.gate.recorder = None

    def abort_checkpoint(self, checkpoint_id: int, reason: CheckpointFailureReason) -> None:
        if self.gate is not None:
            self.gate.measuring = False
        recorder = self._recorder
        if recorder is not None and recorder.checkpoint_id <= int(checkpoint_id):
            self._stop_recording()
        for cid in [c for c in self._acks if c <= int(checkpoint_id)]:
            self._acks.pop(cid).cancel()
        for w in self.writers:
            w.broadcast_event(CancelCheckpointMarker(checkpoint_id))  # type: ignore[arg-type]
        self.services.send_to_master(
            TaskDecline(CheckpointId(checkpoint_id), self.key, reason,
                        f"{self.name} aborted checkpoint {checkpoint_id}: {reason.message}")
        )

    # -----------------------------------------------------------------------------------

    def _perform_checkpoint(self, barrier: CheckpointBarrier, start_delay_ms: int,
                            alignment_ms: int, unaligned: bool = False,
                            processed_bytes: int = 0) -> None:
        cid = int(barrier.checkpoint_id)
        send: Callable[[Any, SubtaskCheckpointMetrics], None]
        if unaligned:
            ack = UnalignedAcknowledgement(CheckpointId(cid), self.key, self.head.uid,
                                           self.services.send_to_master)
            self._acks[cid] = ack
            send = ack.operators_done
        else:
            ack = None

            def send(states: Any, metrics: SubtaskCheckpointMetrics) -> None:
                self.services.send_to_master(
                    TaskAcknowledgement(CheckpointId(cid), self.key, states, metrics))
        t0 = time.perf_counter()
        for op in self.operators:
            op.prepare_snapshot_pre_barrier(cid)
        for w in self.writers:
            w.broadcast_event(barrier)
        ts = barrier.timestamp_ms
        snapshots = [(op.uid, op.snapshot_state(cid, ts)) for op in self.operators]
        sync_ms = (time.perf_counter() - t0) * 1000
        faults = self._faults
        if faults.active:
            faults.check("after-barrier", self.vertex.name, self.key.subtask_index, cid)
        services = self.services
        key = self.key
        name = self.vertex.name

        def run_async() -> None:
            t1 = time.perf_counter()
            try:
                writer = services.state_writer(cid)
                states: dict[Any, OperatorSubtaskState] = {}
                for uid, snap in snapshots:
                    states[uid] = snap.run(writer)
                    if faults.active:
                        faults.check("during-upload", name, key.subtask_index, cid)
                async_ms = (time.perf_counter() - t1) * 1000
                size = sum(s.state_size for s in states.values())
                metrics = SubtaskCheckpointMetrics(
                    start_delay_ms=start_delay_ms,
                    alignment_duration_ms=alignment_ms,
                    sync_duration_ms=int(sync_ms),
                    async_duration_ms=int(async_ms),
                    state_size=size,
                    processed_bytes=processed_bytes,
                    persisted_bytes=0,
                    unaligned=unaligned,
                )
                send(states, metrics)
            except Exception as exc:
                if ack is not None:
                    ack.cancel()
                log.warning("asynchronous part of checkpoint %s failed in %s", cid, name,
                            exc_info=True)
                services.send_to_master(TaskDecline(
                    CheckpointId(cid), key, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
                    f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))

        services.submit_async(run_async)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        faults = self._faults
        if faults.active:
            faults.check("before-commit", self.vertex.name, self.key.subtask_index, checkpoint_id)
        for op in self.operators:
            op.notify_checkpoint_complete(checkpoint_id)
        if faults.active:
            faults.check("after-commit", self.vertex.name, self.key.subtask_index, checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int,
                                  reason: CheckpointFailureReason) -> None:
        if self.handler is not None and not self.finished:
            self.handler.abort_current(CheckpointId(checkpoint_id), reason)
        for op in self.operators:
            op.notify_checkpoint_aborted(checkpoint_id)

    def close(self) -> None:
        for op in self.operators:
            try:
                op.close()
            except Exception:
                log.warning("closing %s of %s failed", op.name, self.name, exc_info=True)
