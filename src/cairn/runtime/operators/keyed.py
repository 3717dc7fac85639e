"""Keyed operators: the current key is set on the keyed state backend before each record.

Invariant: a keyed operator only sees records whose key group belongs to its subtask (the
upstream hash partitioner guarantees it), so every state access hits this subtask's backend;
timers fire with their key set as the current key. Event-time timers fire when a watermark
reaches them, earliest first, before the watermark is passed on; what they emit carries the
timer's timestamp (processing-time timers emit records without one, as in Flink).
"""

from __future__ import annotations

from typing import Any

from cairn.datastream.state import ValueStateDescriptor
from cairn.datastream.time_domain import TimeDomain
from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import OperatorKind
from cairn.runtime.eventtime.stamped import StampedBatch, stamp
from cairn.runtime.operators.basic import emit_results, extend_with_result, flat_map_stamped
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
        self._op.backend.register_processing_time_timer(int(timestamp))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.backend.delete_processing_time_timer(int(timestamp))

    def register_event_time_timer(self, timestamp: int) -> None:
        self._op.backend.register_event_time_timer(int(timestamp))

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op.backend.delete_event_time_timer(int(timestamp))


class _KeyedContext:
    """``KeyedProcessFunction.Context`` and ``OnTimerContext``."""

    def __init__(self, op: KeyedOperatorBase) -> None:
        self._op = op
        self._timers = _KeyedTimerService(op)
        self._timestamp: int | None = None
        self._domain = TimeDomain.PROCESSING_TIME

    def timestamp(self) -> int | None:
        return self._timestamp

    def timer_service(self) -> _KeyedTimerService:
        return self._timers

    def get_current_key(self) -> Any:
        return self._op.backend.get_current_key()

    def time_domain(self) -> TimeDomain:
        return self._domain


class KeyedOperatorBase(UserFunctionOperator):
    def __init__(self, node: OperatorNode) -> None:
        super().__init__(node)
        if node.spec is None or node.spec.key_selector is None:
            raise ValueError(f"keyed operator {node.name!r} has no key selector")
        self.key_selector = node.spec.key_selector
        self.backend: KeyedStateBackend

    def open(self) -> None:
        backend = self.ctx.keyed_backend
        if backend is None:
            raise RuntimeError(f"keyed operator {self.name!r} got no keyed state backend")
        self.backend = backend
        super().open()

    def next_timer_ms(self) -> int | None:
        return self.backend.next_timer_ms()

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        backend = self.backend
        next_event = backend.next_event_timer_ms()
        # Timers that fire may register timers the same watermark already passed: loop.
        while next_event is not None and next_event <= timestamp:
            self.on_event_time(backend.pop_due_event_timers(timestamp))
            next_event = backend.next_event_timer_ms()
        self.watermark_output(timestamp)

    def on_event_time(self, due: list[tuple[int, Any]]) -> None:
        """Event-time timers ``(timestamp, key)`` fired, earliest first (default: none set)."""


class KeyedProcessOperator(KeyedOperatorBase):
    def open(self) -> None:
        super().open()
        self._process = resolve_method(self.function, "process_element")
        on_timer = getattr(self.function, "on_timer", None)
        self._on_timer = on_timer if callable(on_timer) else None
        self._context = _KeyedContext(self)

    def process_batch(self, records: list[Any]) -> None:
        if type(records) is StampedBatch or self.side_outputs:
            self._process_general(records)
            return
        set_key = self.backend.set_current_key
        select = self.key_selector
        f = self._process
        ctx = self._context
        out: list[Any] = []
        extend = out.extend
        for r in records:
            set_key(select(r))
            result = f(r, ctx)
            if result is not None:
                try:
                    extend(result)
                except TypeError:
                    extend_with_result(out, result, self.name)
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
            extend, add_stamp = out.extend, stamps.append
            for r, t in zip(records, records.timestamps, strict=True):
                set_key(select(r))
                ctx._timestamp = t
                result = f(r, ctx)
                if result is None:
                    continue
                n = len(out)
                try:
                    extend(result)
                except TypeError:
                    extend_with_result(out, result, self.name)
                k = len(out) - n
                if k == 1:
                    add_stamp(t)
                elif k:
                    stamps.extend([t] * k)
            ctx._timestamp = None
            emit_results(self.output, self.side_outputs, out, stamps)
            return
        plain: list[Any] = []
        for r in records:
            set_key(select(r))
            extend_with_result(plain, f(r, ctx), self.name)
        emit_results(self.output, self.side_outputs, plain, None)

    def on_processing_time(self, now_ms: int) -> None:
        due = self.backend.pop_due_timers(now_ms)
        if not due or self._on_timer is None:
            return
        out = self._fire(due, TimeDomain.PROCESSING_TIME)
        emit_results(self.output, self.side_outputs, out, None)

    def on_event_time(self, due: list[tuple[int, Any]]) -> None:
        if self._on_timer is None:
            return
        stamps: list[int | None] = []
        out = self._fire(due, TimeDomain.EVENT_TIME, stamps)
        emit_results(self.output, self.side_outputs, out, stamps)

    def _fire(
        self,
        due: list[tuple[int, Any]],
        domain: TimeDomain,
        stamps: list[int | None] | None = None,
    ) -> list[Any]:
        """Call ``on_timer`` per timer with its key current; ``stamps`` gets each output's
        timestamp (the timer's) when given."""
        on_timer = self._on_timer
        assert on_timer is not None
        out: list[Any] = []
        ctx = self._context
        ctx._domain = domain
        set_key = self.backend.set_current_key
        for ts, key in due:
            set_key(key)
            ctx._timestamp = ts
            n = len(out)
            extend_with_result(out, on_timer(ts, ctx), self.name)
            if stamps is not None:
                stamps.extend([ts] * (len(out) - n))
        ctx._timestamp = None
        ctx._domain = TimeDomain.PROCESSING_TIME
        return out


class ReduceOperator(KeyedOperatorBase):
    """``KeyedStream.reduce`` (and sum/min/max): emits the running reduction per key."""

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
        for r in records:
            set_key(select(r))
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
        self._context = _KeyedContext(self)

    def process_batch(self, records: list[Any]) -> None:
        set_key = self.backend.set_current_key
        select = self.key_selector
        f = self._f
        kind = self._kind
        if type(records) is StampedBatch:
            self._process_stamped(records)
            return
        out: list[Any] = []
        for r in records:
            set_key(select(r))
            if kind == "map":
                out.append(f(r))
            elif kind == "filter":
                if f(r):
                    out.append(r)
            elif kind == "flat_map":
                extend_with_result(out, f(r), self.name)
            else:
                extend_with_result(out, f(r, self._context), self.name)
        emit_results(self.output, self.side_outputs, out, None)

    def _process_stamped(self, records: StampedBatch) -> None:
        set_key = self.backend.set_current_key
        select = self.key_selector
        f = self._f
        kind = self._kind
        ctx = self._context

        def call(r: Any, t: int | None) -> Any:
            set_key(select(r))
            if kind == "map":
                return (f(r),)
            if kind == "filter":
                return (r,) if f(r) else None
            if kind == "flat_map":
                return f(r)
            ctx._timestamp = t
            return f(r, ctx)

        out, stamps = flat_map_stamped(records, call, self.name)
        ctx._timestamp = None
        emit_results(self.output, self.side_outputs, out, stamps)
