"""A task: one subtask of a job vertex, i.e. a chain of operators fed by an input gate; this
module is its record loop (Flink's ``StreamTask`` with its mailbox).

Invariants: a task runs on its worker's task thread only (it never blocks: it returns when it
has no input or its outputs have no capacity); it processes each channel's entries in order,
except barriers its barrier handler lets overtake; it only moves entries: the handler decides
(blocking, overtaking, timeouts) and the ``SubtaskCheckpointCoordinator`` snapshots, between
two input batches; a source's poll is bounded by time as well as by count
(``source_polling``), so that with slow records chained to a source the worker's control
messages (its checkpoint trigger) are taken between records.
Watermarks of the input channels go through the task's valve (their minimum over active
channels) into the chain, which carries them on to every output channel (``chain_events``); a
source task sends the final watermark when its input ends, before it reports the end, so every
event-time timer fires before the final checkpoint, and ahead of the barrier of a
stop-with-savepoint with drain, so they fire before the savepoint. Latency markers
(``metrics.latency.interval``) are events too: taken in channel order, they go to the task's
``LatencyTracker`` and never into an operator; without the option the task has no tracker and a
source emits none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.messages import TaskKey
from cairn.clock import Clock, SystemClock
from cairn.events import (
    MIN_WATERMARK,
    AlignmentMode,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    LatencyMarker,
    Watermark,
    WatermarkStatus,
)
from cairn.graph.job_graph import JobVertex
from cairn.ids import AttemptNumber, CheckpointId, JobId
from cairn.runtime.barriers import BarrierHandler, create_barrier_handler
from cairn.runtime.barriers.api import (
    Announcement,
    RecordingBarrierHandler,
    UnalignedBarrierHandlerActions,
)
from cairn.runtime.barriers.unaligned import UnalignedBarrierHandler
from cairn.runtime.chain_events import ChainEvents
from cairn.runtime.channel_state import NOT_RECORDED, HeldBatch
from cairn.runtime.channels import DEFAULT_CAPACITY
from cairn.runtime.debloat import BufferDebloater, DebloatConfig
from cairn.runtime.eventtime.stamped import StampedBatch, slice_batch
from cairn.runtime.eventtime.valve import StatusWatermarkValve
from cairn.runtime.input_gate import InputGate
from cairn.runtime.keyed_batch import KeyGroupedBatch
from cairn.runtime.latency import LatencyConfig, LatencyTracker
from cairn.runtime.operators.base import StreamOperator
from cairn.runtime.operators.sources import SourceFunctionOperator, SourceOperator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.reports import SourceExhausted, TaskFinished, TaskMetrics
from cairn.runtime.source_polling import SourcePolling
from cairn.runtime.subtask_checkpoint import CheckpointServices, SubtaskCheckpointCoordinator
from cairn.runtime.unaligned_ack import SliceBudget
from cairn.runtime.user_metrics import UserMetricRegistry

log = logging.getLogger(__name__)

MAX_BATCHES_PER_RUN = 8
# An aligned task's turn takes no further batch after this long (unaligned: sliced instead).
RUN_BUDGET_S = 0.005


class TaskServices(CheckpointServices, Protocol):
    """What a task needs of the worker that runs it."""

    attempt: AttemptNumber
    job_id: JobId

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
        sides: Sequence[int] | None = None,
        latency: LatencyConfig | None = None,
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
        self.user_metrics = UserMetricRegistry()  # shared with its operators' contexts
        self.finished = False
        self.source_exhausted = False
        # After a stop-with-savepoint barrier: poll nothing until input ends or resumes.
        self.source_suspended = False
        self.backpressured = False
        # A partly filled output batch goes as soon as the task's input ran dry (the batch
        # will not fill soon), not only when the whole worker idles or the buffer times out;
        # False with a buffer timeout of -1 (Flink: only full buffers).
        self.flush_when_drained = True
        # Time accounting (perf_counter seconds): busy is added by the worker around each
        # run that did something; backpressured from a transition to the next.
        self.started_s = time.perf_counter()
        self.busy_s = 0.0
        self.backpressured_s = 0.0
        self._backpressured_since = 0.0
        self._faults = services.faults
        # Deadlines of the barrier handler and operator timers are compared on one scale.
        self._clock: Clock = SystemClock() if clock is None else clock
        self.checkpoints = SubtaskCheckpointCoordinator(
            key, self.name, vertex.name, operators, writers, gate, services
        )
        self.handler: BarrierHandler | None = None
        # Set when the job may take unaligned checkpoints (also: aligned with a timeout).
        self._unaligned: RecordingBarrierHandler | None = None
        if gate is not None and gate.channels:
            actions: UnalignedBarrierHandlerActions = self.checkpoints
            handler = create_barrier_handler(alignment, len(gate.channels), actions, self._clock)
            gate.set_blocked_view(handler.blocked_view)
            if isinstance(handler, UnalignedBarrierHandler):
                self._unaligned = handler
                self.checkpoints.record_channels_of(handler.recording_view)
            self.handler = handler
        self.is_source = isinstance(self.head, (SourceOperator, SourceFunctionOperator))
        self._source_thread = self.head if isinstance(self.head, SourceFunctionOperator) else None
        # Operators that may refuse input (async I/O at its capacity): backpressure too.
        self._input_limited = [op for op in operators if op.limits_input]
        # A two-input head: each channel's logical input (one gate, one barrier handler and
        # one valve over the channels of both inputs, as Flink's ``StreamTwoInputProcessor``
        # aligns and merges them).
        self._sides: tuple[int, ...] | None = None
        process_side = getattr(self.head, "process_side", None)
        if process_side is not None:
            self._sides = _check_sides(self.name, sides, gate)
            self._process_side: Callable[[int, Any], None] = process_side
        # A source task's: when and how much it polls (exact due times, linger, pacing).
        self.polling = SourcePolling()
        # Unaligned checkpoints: batches are processed in slices of about 5 ms of work.
        self._slices = SliceBudget()
        self._control_pending = services.control_pending
        self._valve = (
            StatusWatermarkValve(len(gate.channels)) if gate is not None and gate.channels else None
        )
        self._chain = ChainEvents(operators, writers)
        self._latency: LatencyTracker | None = None
        if latency is not None:
            recording = operators[1:] if self.is_source else operators
            self._latency = LatencyTracker(
                latency,
                [op.uid for op in recording],
                key.subtask_index,
                writers,
                source_id=self.head.uid if self.is_source else None,
            )
        self._debloater: BufferDebloater | None = None
        if debloat is not None and gate is not None and gate.channels:
            self._debloater = BufferDebloater(
                debloat, len(gate.channels) * DEFAULT_CAPACITY, self._clock.now_ms()
            )

    # -------------------------------------------------------------------- processing

    def _outputs_available(self) -> bool:
        for w in self.writers:
            if not w.available():
                return False
        for op in self._input_limited:
            if not op.accepts_input():
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
            self._enter_backpressure()
            self.polling.ready_at = None  # not polled: no due time (the relief wakes the task)
            return did
        if self.backpressured:
            self.backpressured = False
            self.backpressured_s += time.perf_counter() - self._backpressured_since
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
        ends = time.perf_counter() + RUN_BUDGET_S
        for _ in range(MAX_BATCHES_PER_RUN):
            item = gate.poll()
            if item is None:
                if did and self.flush_when_drained:
                    self.flush_ready()
                break
            did = True
            channel, entry = item
            t = type(entry)
            if (t is list or t is KeyGroupedBatch or t is StampedBatch) and unaligned is None:
                self.records_in += len(entry)
                if self._sides is None:
                    self.head.process_batch(entry)
                else:
                    self._process_side(self._sides[channel], entry)
            elif t is list or t is HeldBatch or t is KeyGroupedBatch or t is StampedBatch:
                self._process_slice(channel, entry)
            else:
                self._on_event(channel, entry)
                if self.finished:
                    break
                continue
            if self._faults.active:
                self._check_fault("processing")
            if unaligned is not None and signal.raised:
                self._process_priority_events(unaligned)
            if not self._outputs_available():
                self._enter_backpressure()  # from now, not when the task is next run
                break
            if self._control_pending() or (unaligned is None and time.perf_counter() > ends):
                break  # the worker's other tasks (a co-located source) get their turn
        return did

    @property
    def source_ready_at(self) -> float | None:
        """When (``time.monotonic()``) an idle worker should come back for this source."""
        return self.polling.ready_at

    @source_ready_at.setter
    def source_ready_at(self, at: float | None) -> None:
        self.polling.ready_at = at

    def has_input(self) -> bool:
        """Whether another turn now would find input it can take: queued entries on open
        channels, or a source whose last poll filled its batch (outputs permitting)."""
        if self.finished:
            return False
        if self.is_source:
            if not self.polling.more or self.source_exhausted or self.source_suspended:
                return False
        else:
            gate = self.gate
            if gate is None or not gate.has_data():
                return False
        return self._outputs_available()

    def _enter_backpressure(self) -> None:
        if not self.backpressured:
            self.backpressured = True
            self._backpressured_since = time.perf_counter()

    def _process_slice(self, channel: int, entry: Any) -> None:
        """Process (part of) a batch: as many records as fit the time budget; the rest goes
        back to the front of its channel, so the worker's control messages, priority events
        and barriers of other channels are seen in between."""
        held = entry if type(entry) is HeldBatch else None
        records = entry.records if held is not None else entry
        budget = self._slices.records
        rest = None
        if len(records) > budget:
            records, rest = (
                slice_batch(records, 0, budget),
                slice_batch(records, budget, len(records)),
            )
        t0 = time.perf_counter()
        self.records_in += len(records)
        if self._sides is None:
            self.head.process_batch(records)
        else:
            self._process_side(self._sides[channel], records)
        self._slices.learn(len(records), time.perf_counter() - t0)
        if held is not None and held.replayed and self._faults.active:
            self._check_fault("replay")
        if rest:
            gate = self.gate
            assert gate is not None
            recorder = gate.recorder
            if recorder is not None and channel in recorder.channels:
                recorded_for = recorder.checkpoint_id  # recorded when it was taken
            else:
                recorded_for = held.recorded_for if held is not None else NOT_RECORDED
            replayed = held.replayed if held is not None else False
            gate.put_back(channel, HeldBatch(rest, recorded_for, replayed))

    def _run_source_once(self) -> bool:
        polling = self.polling
        if not polling.may_poll(time.monotonic()):
            return False
        if self.source_exhausted or self.source_suspended:
            return False
        head = self.head
        assert isinstance(head, (SourceOperator, SourceFunctionOperator))
        limit = polling.limit(self.writers)
        t0 = time.perf_counter()
        batch = head.poll(limit)
        if batch is None:
            self.source_exhausted = True
            head.end_of_event_time()  # the final watermark, ahead of the final checkpoint
            self.flush()
            self.services.send_to_master(SourceExhausted(self.services.attempt, self.key))
            if not self.checkpointing:
                self.end_input()
            return True
        if not batch:
            polling.polled(head, 0, limit, 0.0)
            return False
        self.records_in += len(batch)
        self._emit_from_source(batch)
        polling.polled(head, len(batch), limit, time.perf_counter() - t0)
        if self._source_thread is not None:  # a checkpoint drains its buffer: keep it short
            self._source_thread.bound_buffer(4 * polling.pacing.records)
        if len(batch) < limit and self.flush_when_drained:
            self.flush_ready()  # the source has no more now: what it emitted goes
        if not self._outputs_available():
            self._enter_backpressure()  # from now, not when the task is next run
        if self._faults.active:
            self._check_fault("processing")
        return True

    def _check_fault(self, point: str, checkpoint_id: CheckpointId | None = None) -> None:
        """Test fault injection (called only while ``self._faults.active``)."""
        key = self.key
        self._faults.check(
            point, self.vertex.name, key.subtask_index, checkpoint_id, self.records_in
        )

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
        elif type(event) is Watermark:
            valve = self._valve
            assert valve is not None
            self._chain.from_valve(valve.on_watermark(channel, event.timestamp))
        elif type(event) is WatermarkStatus:
            valve = self._valve
            assert valve is not None
            self._chain.from_valve(valve.on_status(channel, event))
        elif type(event) is LatencyMarker:
            if self._latency is not None:
                self._latency.on_marker(event)
        elif isinstance(event, EndOfPartition):
            valve = self._valve
            assert valve is not None
            self._chain.from_valve(valve.on_end_of_partition(channel))
            handler.on_end_of_partition(channel)
            self.gate.mark_finished(channel)
            if self.gate.all_finished:
                self.end_input()
        else:
            raise TypeError(f"unexpected event {event!r} on channel {channel}")

    def _deliver_barrier(
        self, channel: int, barrier: CheckpointBarrier, overtaken: list[Any]
    ) -> None:
        """Hand ``barrier`` of ``channel`` to the handler; ``overtaken`` are the batches it
        jumped (channel state if its checkpoint is, or becomes, unaligned)."""
        handler, gate = self.handler, self.gate
        assert handler is not None and gate is not None
        cid = barrier.checkpoint_id
        if cid <= handler.last_barrier_id(channel):
            # Taken in order after a newer barrier of its channel overtook it.
            log.debug("%s: dropping stale barrier %d on channel %d", self.name, cid, channel)
            return
        checkpoints = self.checkpoints
        if overtaken:
            checkpoints.barrier_overtook(channel, cid, overtaken)
        if not handler.is_aligning:
            gate.processed_bytes = 0  # a new checkpoint may start aligning here
        try:
            handler.on_barrier(channel, barrier)
        finally:
            checkpoints.delivered()
        gate.measuring = handler.is_aligning
        if self._faults.active and handler.is_aligning:
            self._check_fault("alignment", cid)  # barriers from some inputs, not all

    def _process_priority_events(self, handler: RecordingBarrierHandler) -> bool:
        """Alignment timeouts and announced barriers: the handler decides, the task moves."""
        gate = self.gate
        assert gate is not None
        signal = gate.signal
        did = False
        deadline = handler.next_timeout_ms
        if (
            deadline is not None
            and self._clock.now_ms() >= deadline
            and handler.check_alignment_timeout()
        ):
            did = True
            signal.raised = True  # announced barriers may overtake now
        if not signal.raised:
            return did
        blocked = handler.blocked_view
        for channel, barrier in gate.pending_announcements():
            if channel in blocked:
                continue
            answer = handler.on_barrier_announced(channel, barrier)
            if answer is Announcement.IN_ORDER:
                continue  # poll() returns it at its position, unless it may overtake first
            barrier, overtaken = gate.overtake(channel)
            if answer is Announcement.OBSOLETE:
                signal.raised = True  # look at the next one of this channel
                continue
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
        self.services.send_to_master(TaskFinished(self.services.attempt, self.key, self.metrics()))

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
        tracker = self._latency
        if tracker is not None and now_ms >= tracker.next_marker_ms:
            fired = self._emit_latency_marker(tracker)
        for op in self.operators:
            t = op.next_timer_ms()
            if t is not None and t <= now_ms:
                op.on_processing_time(now_ms)
                fired = True
        return fired

    def _emit_latency_marker(self, tracker: LatencyTracker) -> bool:
        """A source task's marker, unless its input ended or a terminating savepoint's
        barrier went out (nothing may follow it)."""
        if self.source_exhausted or self.source_suspended:
            tracker.next_marker_ms = float("inf")  # until input resumes (resume_input)
            return False
        return tracker.emit_due()

    def next_timer_ms(self) -> int | None:
        """Earliest operator timer, alignment deadline or latency marker (wall clock ms)."""
        times = [t for op in self.operators if (t := op.next_timer_ms()) is not None]
        tracker = self._latency
        if tracker is not None and tracker.source_id is not None and not self.finished:
            due = tracker.next_marker_ms
            if due != float("inf"):
                times.append(int(due) + 1)
        unaligned = self._unaligned
        if unaligned is not None:
            timeout = unaligned.next_timeout_ms  # on the task's clock: the wall clock
            if timeout is not None:
                times.append(timeout)
        return min(times) if times else None

    def metrics(self) -> TaskMetrics:
        out = sum(w.records_out for w in self.writers) if self.writers else self.records_in
        now = time.perf_counter()
        backpressured = self.backpressured_s
        if self.backpressured:
            backpressured += now - self._backpressured_since
        valve = self._valve
        watermark = None
        if valve is not None and valve.watermark > MIN_WATERMARK:
            watermark = valve.watermark
        return TaskMetrics(
            self.records_in,
            out,
            self.backpressured,
            elapsed_ms=(now - self.started_s) * 1000.0,
            busy_ms=self.busy_s * 1000.0,
            backpressured_ms=backpressured * 1000.0,
            watermark=watermark,
            bytes_in=self.gate.bytes_in if self.gate is not None else 0,
            bytes_out=sum(ch.bytes_out for w in self.writers for ch in w.channels),
            user=self.user_metrics.snapshot() if self.user_metrics else (),
            latency=self._latency.reports() if self._latency is not None else (),
        )

    # -------------------------------------------------------------------- checkpoints

    def trigger_source_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Coordinator-triggered checkpoint of a source task (no input barriers)."""
        if self.finished:
            return
        head = self.head
        drain = barrier.options.drain and not self.source_exhausted  # (exhausted: sent it)
        if isinstance(head, SourceFunctionOperator):
            with head.checkpoint_lock:
                pending = head.poll(1 << 30)
                if pending:
                    self.records_in += len(pending)
                    self._emit_from_source(pending)
                if drain:
                    head.end_of_event_time()
                self.checkpoints.checkpoint_state(barrier)
        else:
            if drain:  # the final watermark goes ahead of the barrier: every timer fires
                head.end_of_event_time()
            self.checkpoints.checkpoint_state(barrier)
        if barrier.options.terminate:  # nothing may follow a stop-with-savepoint's barrier
            self.source_suspended = True

    def resume_input(self) -> None:
        """A stop-with-savepoint failed: the source polls again (the job goes on)."""
        self.source_suspended = False
        if self._latency is not None and self._latency.source_id is not None:
            self._latency.next_marker_ms = 0.0  # markers again from now

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        self.checkpoints.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None:
        """The coordinator aborted ``checkpoint_id`` for ``reason``: stop aligning or
        recording it here (the handler declines it downstream), then tell the operators."""
        if self.handler is not None and not self.finished:
            self.handler.abort_current(CheckpointId(checkpoint_id), reason)
        self.checkpoints.notify_checkpoint_aborted(checkpoint_id, reason)

    def close(self) -> None:
        for op in self.operators:
            try:
                op.close()
            except Exception:
                log.warning("closing %s of %s failed", op.name, self.name, exc_info=True)


def _check_sides(name: str, sides: Sequence[int] | None, gate: InputGate | None) -> tuple[int, ...]:
    """The logical input of each channel of a two-input task's gate (both inputs present)."""
    channels = len(gate.channels) if gate is not None else 0
    if sides is None or len(sides) != channels or set(sides) != {0, 1}:
        raise ValueError(
            f"{name}: a two-input operator needs the logical input of each of its {channels} "
            f"channels, with channels of both inputs; got {sides!r}"
        )
    return tuple(sides)
