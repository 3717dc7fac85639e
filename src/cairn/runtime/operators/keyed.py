"""Keyed operators: the current key is set on the keyed state backend before each record.

Invariant: a keyed operator only sees records whose key group belongs to its subtask (the
upstream hash partitioner guarantees it), so every state access hits this subtask's backend;
timers fire with their key set as the current key. Timers of a domain fire in timestamp order
across keys, one timestamp at a time (Flink's ``InternalTimerServiceImpl``: a priority queue
over ``(timestamp, key)``), so a timer that a firing timer registers or deletes is honoured in
order: event-time timers when a watermark reaches them, before the watermark is passed on;
processing-time timers when the task's clock passes them (the task polls ``next_timer_ms``
once per loop). What event-time timers emit carries the timer's timestamp (processing-time
timers emit records without one, as in Flink). A process function that buffers a bundle
(``finish_bundle``) has it emitted before any watermark is passed on, before a checkpoint
barrier (``prepare_snapshot_pre_barrier``: no snapshot holds one), at the end of input and when
its ``bundle_due_ms`` passes on the processing-time clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.api.functions import key_function
from cairn.api.state import ValueStateDescriptor
from cairn.api.time_domain import TimeDomain
from cairn.events import (
    DEFAULT_CHECKPOINT_OPTIONS,
    MAX_WATERMARK,
    MIN_WATERMARK,
    CheckpointOptions,
)
from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import OperatorKind
from cairn.ids import CheckpointId
from cairn.runtime.eventtime.stamped import StampedBatch, stamp
from cairn.runtime.keyed_batch import key_groups_of
from cairn.runtime.operators.base import OperatorSnapshot
from cairn.runtime.operators.basic import (
    emit_results,
    extend_with_result,
    flat_map_stamped,
    not_iterable_error,
)
from cairn.runtime.operators.user_function import UserFunctionOperator, resolve_method
from cairn.state.api import KeyedStateBackend


class _KeyedTimerService:
    """``TimerService`` of a keyed operator: timers of the current key, in the backend."""

    def __init__(self, op: KeyedOperatorBase) -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return self._op.ctx.clock_ms()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def register_processing_time_timer(self, timestamp: int) -> None:
        if self._op.quiesced:
            return
        self._op.backend.register_processing_time_timer(int(timestamp))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.backend.delete_processing_time_timer(int(timestamp))

    def register_event_time_timer(self, timestamp: int) -> None:
        if self._op.quiesced:
            return
        self._op.backend.register_event_time_timer(int(timestamp))

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op.backend.delete_event_time_timer(int(timestamp))


class KeyedContext:
    """``KeyedProcessFunction.Context`` and ``OnTimerContext``."""

    def __init__(self, op: KeyedOperatorBase) -> None:
        self._op = op
        self._timers = _KeyedTimerService(op)
        # Set by the operator for each record or timer: a plain attribute, one store each.
        self.record_timestamp: int | None = None
        self.current_domain = TimeDomain.PROCESSING_TIME

    def timestamp(self) -> int | None:
        return self.record_timestamp

    def timer_service(self) -> _KeyedTimerService:
        return self._timers

    def get_current_key(self) -> Any:
        return self._op.backend.get_current_key()

    def time_domain(self) -> TimeDomain:
        return self.current_domain


class KeyedOperatorBase(UserFunctionOperator):
    """Keyed state and timers; a subclass whose function has ``on_timer`` sets ``_on_timer``
    in ``open`` (timers of a function without one are dropped when due). A function with an
    ``output_watermark_delay_ms`` has the watermarks it passes on held back by that much (the
    final one excepted), as Flink's ``KeyedCoProcessOperatorWithWatermarkDelay``: an
    operator that emits rows older than its input's watermark (an interval join) keeps
    them from being late downstream."""

    def __init__(self, node: OperatorNode) -> None:
        super().__init__(node)
        if node.spec is None or node.spec.key_selector is None:
            raise ValueError(f"keyed operator {node.name!r} has no key selector")
        self.key_selector = key_function(node.spec.key_selector)
        self.backend: KeyedStateBackend
        self._on_timer: Callable[[int, Any], Any] | None = None
        self._timer_context: KeyedContext
        # A function that caches keyed state between batches (the window operator's batch
        # path) writes it back through this before timers fire and before a snapshot.
        self._flush: Callable[[], None] | None = None
        # While ``fire_remaining_timers`` runs: new timers are ignored (BATCH execution).
        self.quiesced = False
        self._watermark_delay = 0

    def open(self) -> None:
        backend = self.ctx.keyed_backend
        if backend is None:
            raise RuntimeError(f"keyed operator {self.name!r} got no keyed state backend")
        self.backend = backend
        self._timer_context = KeyedContext(self)
        super().open()
        self._watermark_delay = int(getattr(self.function, "output_watermark_delay_ms", 0))

    def _bind_on_timer(self) -> None:
        on_timer = getattr(self.function, "on_timer", None)
        self._on_timer = on_timer if callable(on_timer) else None

    def next_timer_ms(self) -> int | None:
        return self.backend.next_timer_ms()

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        backend = self.backend
        self._fire_due(timestamp, backend.next_event_timer_ms, backend.pop_due_event_timers, True)
        if self._watermark_delay and timestamp != MAX_WATERMARK:
            timestamp = max(MIN_WATERMARK, timestamp - self._watermark_delay)
        self.watermark_output(timestamp)

    def on_processing_time(self, now_ms: int) -> None:
        backend = self.backend
        self._fire_due(now_ms, backend.next_timer_ms, backend.pop_due_timers, False)

    def _fire_due(
        self,
        limit_ms: int,
        next_due: Callable[[], int | None],
        pop_due: Callable[[int], list[tuple[int, Any]]],
        event_time: bool,
    ) -> None:
        """Fire one domain's timers up to ``limit_ms`` and emit what they return, as one
        batch. One timestamp at a time: a timer registered (or deleted) by one that fires is
        seen before any later one. Timers register and delete for their own key only, so the
        timers of one timestamp can be taken together. Event-time outputs carry the timer's
        timestamp; processing-time outputs none."""
        next_ts = next_due()
        if next_ts is None or next_ts > limit_ms:
            return
        if self._flush is not None:
            self._flush()
        domain = TimeDomain.EVENT_TIME if event_time else TimeDomain.PROCESSING_TIME
        out: list[Any] = []
        stamps: list[int | None] | None = [] if event_time else None
        while next_ts is not None and next_ts <= limit_ms:
            self._fire(pop_due(next_ts), domain, out, stamps)
            next_ts = next_due()
        emit_results(self.output, self.side_outputs, out, stamps)

    def fire_remaining_timers(self) -> None:
        """BATCH execution, at the end of a key's input (Flink's
        ``BatchExecutionInternalTimeService``): event time, then processing time, jump to
        the end, so every timer fires (in timestamp order per domain) while timers registered
        meanwhile are ignored, so a timer that registers its successor cannot loop. No
        watermark is passed on; the current watermark reads ``MAX_WATERMARK`` while they fire
        and ``MIN_WATERMARK`` after. A cached state is written back first."""
        if self._flush is not None:
            self._flush()
        backend = self.backend
        self.quiesced = True
        self.current_watermark = MAX_WATERMARK
        try:
            self._fire_due(
                MAX_WATERMARK, backend.next_event_timer_ms, backend.pop_due_event_timers, True
            )
            self._fire_due(MAX_WATERMARK, backend.next_timer_ms, backend.pop_due_timers, False)
        finally:
            self.quiesced = False
            self.current_watermark = MIN_WATERMARK

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        if self._flush is not None:
            self._flush()
        return super().snapshot_state(checkpoint_id, timestamp_ms, options)

    def _fire(
        self,
        due: list[tuple[int, Any]],
        domain: TimeDomain,
        out: list[Any],
        stamps: list[int | None] | None,
    ) -> None:
        """Call ``on_timer`` per timer ``(timestamp, key)`` with its key current, appending
        its outputs to ``out`` and, when given, the timer's timestamp per output to
        ``stamps``."""
        on_timer = self._on_timer
        if on_timer is None:
            return
        ctx = self._timer_context
        ctx.current_domain = domain
        set_key = self.backend.set_current_key
        for ts, key in due:
            set_key(key)
            ctx.record_timestamp = ts
            n = len(out)
            extend_with_result(out, on_timer(ts, ctx), self.name, on_timer)
            if stamps is not None:
                stamps.extend([ts] * (len(out) - n))
        ctx.record_timestamp = None


class KeyedProcessOperator(KeyedOperatorBase):
    takes_key_groups = True  # plain batches: records' key groups from the producer

    def open(self) -> None:
        super().open()
        self._process = resolve_method(self.function, "process_element")
        self._bind_on_timer()
        self._context = KeyedContext(self)
        # A function may process a whole stamped batch itself (the window operator's batch
        # path): ``(records, timestamps, key_selector, set_key, ctx) -> (outputs, stamps)``.
        batch = getattr(self.function, "keyed_batch", None)
        self._keyed_batch: Callable[..., tuple[list[Any], list[int | None]]] | None = (
            batch if callable(batch) else None
        )
        flush = getattr(self.function, "keyed_flush", None)
        self._flush = flush if callable(flush) else None
        # ... and plain (unstamped) batches too, when it says so (processing-time windows).
        self._keyed_batch_plain = bool(getattr(self.function, "keyed_batch_plain", False))
        # A function that buffers input in a bundle (a mini-batch aggregate) says when it is
        # due (``bundle_due_ms``, processing time) and emits it on ``finish_bundle(set_key)``:
        # then, before a watermark is passed on, before a barrier and at the end of input.
        finish = getattr(self.function, "finish_bundle", None)
        self._finish_bundle: Callable[..., tuple[list[Any], list[int | None] | None]] | None = (
            finish if callable(finish) else None
        )

    def _emit_bundle(self) -> None:
        finish = self._finish_bundle
        if finish is not None:
            results, stamps = finish(self.backend.set_current_key)
            if results:
                emit_results(self.output, self.side_outputs, results, stamps)

    def next_timer_ms(self) -> int | None:
        t = self.backend.next_timer_ms()
        if self._finish_bundle is None:
            return t
        due: int | None = self.function.bundle_due_ms
        if due is None or (t is not None and t < due):
            return t
        return due

    def on_processing_time(self, now_ms: int) -> None:
        if self._finish_bundle is not None:
            due = self.function.bundle_due_ms
            if due is not None and due <= now_ms:
                self._emit_bundle()
        super().on_processing_time(now_ms)

    def process_watermark(self, timestamp: int) -> None:
        self._emit_bundle()
        super().process_watermark(timestamp)

    def prepare_snapshot_pre_barrier(self, checkpoint_id: CheckpointId) -> None:
        self._emit_bundle()
        super().prepare_snapshot_pre_barrier(checkpoint_id)

    def finish(self) -> None:
        self._emit_bundle()
        super().finish()

    def process_batch(self, records: list[Any]) -> None:
        batch = self._keyed_batch
        if batch is not None and (type(records) is StampedBatch or self._keyed_batch_plain):
            results, stamps = batch(
                records,
                records.timestamps if type(records) is StampedBatch else [],
                self.key_selector,
                self.backend.set_current_key,
                self._context,
            )
            emit_results(self.output, self.side_outputs, results, stamps)
            return
        if self._flush is not None:
            self._flush()
        if type(records) is StampedBatch or self.side_outputs:
            self._process_general(records)
            return
        set_key = self.backend.set_current_key
        select = self.key_selector
        f = self._process
        ctx = self._context
        out: list[Any] = []
        extend = out.extend
        for r, kg in zip(records, key_groups_of(records), strict=False):
            set_key(select(r), kg)
            result = f(r, ctx)
            if result is not None:
                try:
                    extend(result)
                except TypeError:
                    error = not_iterable_error(result, self.name, f)
                    if error is None:
                        raise
                    raise error from None
        if out:
            self.output(out)

    def _process_general(self, records: list[Any]) -> None:
        """With timestamps and/or side outputs (the plain path above is the hot one)."""
        set_key = self.backend.set_current_key
        select = self.key_selector
        f = self._process
        ctx = self._context
        if type(records) is StampedBatch:
            out: list[Any] = []
            stamps: list[int | None] = []
            add_stamp = stamps.append
            kgs = key_groups_of(records)
            for r, t, kg in zip(records, records.timestamps, kgs, strict=False):
                set_key(select(r), kg)
                ctx.record_timestamp = t
                result = f(r, ctx)
                if result is None:
                    continue
                n = len(out)
                extend_with_result(out, result, self.name, f)
                k = len(out) - n
                if k == 1:
                    add_stamp(t)
                elif k:
                    stamps.extend([t] * k)
            ctx.record_timestamp = None
            emit_results(self.output, self.side_outputs, out, stamps)
            return
        plain: list[Any] = []
        for r, kg in zip(records, key_groups_of(records), strict=False):
            set_key(select(r), kg)
            extend_with_result(plain, f(r, ctx), self.name, f)
        emit_results(self.output, self.side_outputs, plain, None)


class ReduceOperator(KeyedOperatorBase):
    """``KeyedStream.reduce`` (and sum/min/max): emits the running reduction per key."""

    takes_key_groups = True

    def open(self) -> None:
        super().open()
        self._reduce = resolve_method(self.function, "reduce")
        self._state = self.backend.get_partitioned_state(
            ValueStateDescriptor("_cairn_reduce", None)
        )

    def process_batch(self, records: list[Any]) -> None:
        set_key = self.backend.set_current_key
        select = self.key_selector
        reduce = self._reduce
        state = self._state
        out = []
        for r, kg in zip(records, key_groups_of(records), strict=False):
            set_key(select(r), kg)
            current = state.value()
            new = r if current is None else reduce(current, r)
            state.update(new)
            out.append(new)
        if type(records) is StampedBatch:
            self.output(stamp(out, records.timestamps))
            return
        self.output(out)


class KeyedRecordOperator(KeyedOperatorBase):
    """map / flat_map / filter / process on a KeyedStream: user functions may use keyed state."""

    takes_key_groups = True

    def open(self) -> None:
        super().open()
        kind = self.node.kind
        self._kind = kind
        method = {
            OperatorKind.MAP.value: "map",
            OperatorKind.FLAT_MAP.value: "flat_map",
            OperatorKind.FILTER.value: "filter",
            OperatorKind.PROCESS.value: "process_element",
        }[kind]
        self._f = resolve_method(self.function, method)
        self._context = KeyedContext(self)
        if kind == OperatorKind.PROCESS.value:
            self._bind_on_timer()

    def process_batch(self, records: list[Any]) -> None:
        set_key = self.backend.set_current_key
        select = self.key_selector
        f = self._f
        kind = self._kind
        if type(records) is StampedBatch:
            self._process_stamped(records)
            return
        out: list[Any] = []
        for r, kg in zip(records, key_groups_of(records), strict=False):
            set_key(select(r), kg)
            if kind == "map":
                out.append(f(r))
            elif kind == "filter":
                if f(r):
                    out.append(r)
            elif kind == "flat_map":
                extend_with_result(out, f(r), self.name, f)
            else:
                extend_with_result(out, f(r, self._context), self.name, f)
        emit_results(self.output, self.side_outputs, out, None)

    def _process_stamped(self, records: StampedBatch) -> None:
        set_key = self.backend.set_current_key
        select = self.key_selector
        f = self._f
        kind = self._kind
        ctx = self._context
        next_key_group = iter(key_groups_of(records)).__next__  # called once per record

        def call(r: Any, t: int | None) -> Any:
            set_key(select(r), next_key_group())
            if kind == "map":
                return (f(r),)
            if kind == "filter":
                return (r,) if f(r) else None
            if kind == "flat_map":
                return f(r)
            ctx.record_timestamp = t
            return f(r, ctx)

        out, stamps = flat_map_stamped(records, call, self.name, f)
        ctx.record_timestamp = None
        emit_results(self.output, self.side_outputs, out, stamps)
