"""Keyed operators: the current key is set on the keyed state backend before each record.

Invariant: a keyed operator only sees records whose key group belongs to its subtask (the
upstream hash partitioner guarantees it), so every state access hits this subtask's backend;
timers fire with their key set as the current key.
"""

from __future__ import annotations

from typing import Any

from cairn.datastream import functions as fn_api
from cairn.datastream.state import ValueStateDescriptor
from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import OperatorKind
from cairn.runtime.operators.basic import extend_with_result
from cairn.runtime.operators.user_function import UserFunctionOperator, resolve_method
from cairn.state.api import KeyedStateBackend


def _processing_time_domain() -> Any:
    domain = getattr(fn_api, "TimeDomain", None)
    return getattr(domain, "PROCESSING_TIME", "PROCESSING_TIME")


class _KeyedTimerService:
    def __init__(self, op: KeyedOperatorBase) -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return self._op.ctx.clock_ms()

    def current_watermark(self) -> int:
        return -(2**63)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._op.backend.register_processing_time_timer(int(timestamp))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.backend.delete_processing_time_timer(int(timestamp))

    def register_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("event-time timers are not supported yet; use processing time")

    delete_event_time_timer = register_event_time_timer


class _KeyedContext:
    """``KeyedProcessFunction.Context`` and ``OnTimerContext``."""

    def __init__(self, op: KeyedOperatorBase) -> None:
        self._op = op
        self._timers = _KeyedTimerService(op)
        self._timestamp: int | None = None

    def timestamp(self) -> int | None:
        return self._timestamp

    def timer_service(self) -> _KeyedTimerService:
        return self._timers

    def get_current_key(self) -> Any:
        return self._op.backend.get_current_key()

    def time_domain(self) -> Any:
        return _processing_time_domain()


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


class KeyedProcessOperator(KeyedOperatorBase):
    def open(self) -> None:
        super().open()
        self._process = resolve_method(self.function, "process_element")
        on_timer = getattr(self.function, "on_timer", None)
        self._on_timer = on_timer if callable(on_timer) else None
        self._context = _KeyedContext(self)

    def process_batch(self, records: list[Any]) -> None:
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

    def on_processing_time(self, now_ms: int) -> None:
        due = self.backend.pop_due_timers(now_ms)
        if not due:
            return
        if self._on_timer is None:
            return
        out: list[Any] = []
        ctx = self._context
        for ts, key in due:
            self.backend.set_current_key(key)
            ctx._timestamp = ts
            extend_with_result(out, self._on_timer(ts, ctx), self.name)
        ctx._timestamp = None
        if out:
            self.output(out)


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
        if out:
            self.output(out)
