"""Two-input operators: ``connect`` with co-map, co-flat-map, co-process, keyed co-process,
and the broadcast state pattern (Flink's ``CoStreamMap``, ``CoProcessOperator``,
``KeyedCoProcessOperator``, ``CoBroadcastWithNonKeyedOperator``,
``CoBroadcastWithKeyedOperator``).

Invariant: the task hands each batch to ``process_side(side, batch)`` with the logical input
(0 or 1) of the channel it came from; the operator calls the function's method of that input
per record (with the record's key current when that input is keyed), so a record of either
input is processed exactly once, in its channel's order. Outputs carry their input's
timestamp, timer outputs the timer's. Broadcast state lives in the operator state backend
(written only from the broadcast side, read-only elsewhere); event time is the task's valve
minimum over the channels of both inputs, which is Flink's ``min(input1, input2)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.api.state import MapStateDescriptor
from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import BROADCAST_STATES, KEY_SELECTOR2, OperatorKind
from cairn.runtime.eventtime.stamped import StampedBatch
from cairn.runtime.operators.basic import emit_results, extend_with_result
from cairn.runtime.operators.keyed import KeyedContext, KeyedOperatorBase
from cairn.runtime.operators.user_function import UserFunctionOperator, resolve_method
from cairn.state.broadcast_state import BroadcastMapState, ReadOnlyBroadcastState

__all__ = ["TWO_INPUT_KINDS", "CoOperator", "KeyedCoOperator"]

# Invoked per record: (record, context) -> an iterable of outputs or None.
_Call = Callable[[Any, Any], Any]

_METHODS: dict[str, tuple[str, str]] = {
    OperatorKind.CO_MAP.value: ("map1", "map2"),
    OperatorKind.CO_FLAT_MAP.value: ("flat_map1", "flat_map2"),
    OperatorKind.CO_PROCESS.value: ("process_element1", "process_element2"),
    OperatorKind.KEYED_CO_PROCESS.value: ("process_element1", "process_element2"),
    OperatorKind.BROADCAST_PROCESS.value: ("process_element", "process_broadcast_element"),
    OperatorKind.KEYED_BROADCAST_PROCESS.value: (
        "process_element",
        "process_broadcast_element",
    ),
}
TWO_INPUT_KINDS = frozenset(_METHODS)
_NO_KEY = (
    "{name}: process_broadcast_element has no current key, so no {what} (as in Flink); "
    "use ctx.apply_to_keyed_state to reach keyed state"
)
_BROADCAST_KINDS = {
    OperatorKind.BROADCAST_PROCESS.value,
    OperatorKind.KEYED_BROADCAST_PROCESS.value,
}


def _calls(function: Any, kind: str) -> tuple[_Call, _Call]:
    """Each input's method as ``call(record, ctx) -> iterable | None``.

    >>> class Tag:
    ...     def map1(self, value): return ("one", value)
    ...     def map2(self, value): return ("two", value)
    >>> first, second = _calls(Tag(), OperatorKind.CO_MAP.value)
    >>> first(1, None), second(2, None)
    ((('one', 1),), (('two', 2),))
    """
    first, second = (resolve_method(function, m) for m in _METHODS[kind])
    if kind == OperatorKind.CO_MAP.value:
        return (lambda r, _c: (first(r),)), (lambda r, _c: (second(r),))
    if kind == OperatorKind.CO_FLAT_MAP.value:
        return (lambda r, _c: first(r)), (lambda r, _c: second(r))
    return first, second


def _methods(function: Any, kind: str) -> tuple[Any, Any]:
    first, second = (resolve_method(function, m) for m in _METHODS[kind])
    return first, second


class _NoTimers:
    """The timer service of a non-keyed operator: current times only (as in Flink)."""

    def __init__(self, op: Any) -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return int(self._op.ctx.clock_ms())

    def current_watermark(self) -> int:
        return int(self._op.current_watermark)

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise RuntimeError(
            "Setting timers is only supported on keyed ConnectedStreams "
            "(use key_by() before process())."
        )

    register_event_time_timer = register_processing_time_timer
    delete_processing_time_timer = register_processing_time_timer
    delete_event_time_timer = register_processing_time_timer


class _CoContext:
    """``CoProcessFunction.Context`` and the broadcast functions' contexts (non-keyed);
    ``writable`` on the broadcast side only."""

    def __init__(self, op: CoOperator, writable: bool) -> None:
        self._op = op
        self._writable = writable
        self._timers = _NoTimers(op)
        # Set by the operator for each record or timer: a plain attribute, one store each.
        self.record_timestamp: int | None = None

    def timestamp(self) -> int | None:
        return self.record_timestamp

    def timer_service(self) -> _NoTimers:
        return self._timers

    def current_processing_time(self) -> int:
        return self._timers.current_processing_time()

    def current_watermark(self) -> int:
        return self._timers.current_watermark()

    def get_broadcast_state(
        self, state_descriptor: MapStateDescriptor
    ) -> BroadcastMapState | ReadOnlyBroadcastState:
        return broadcast_state(self._op, state_descriptor, self._writable)


class _KeyedCoContext(KeyedContext):
    """Keyed contexts (``KeyedCoProcessFunction``'s, ``KeyedBroadcastProcessFunction``'s
    read-only and on-timer contexts, and with ``writable`` its broadcast-side context)."""

    def __init__(self, op: KeyedCoOperator, writable: bool) -> None:
        super().__init__(op)
        self._co = op
        self._writable = writable

    def timer_service(self) -> Any:
        if self._writable:
            raise RuntimeError(_NO_KEY.format(name=self._co.name, what="timer_service()"))
        return super().timer_service()

    def get_current_key(self) -> Any:
        if self._writable:
            raise RuntimeError(_NO_KEY.format(name=self._co.name, what="get_current_key()"))
        return super().get_current_key()

    def current_processing_time(self) -> int:
        return int(self._co.ctx.clock_ms())

    def current_watermark(self) -> int:
        return int(self._co.current_watermark)

    def get_broadcast_state(
        self, state_descriptor: MapStateDescriptor
    ) -> BroadcastMapState | ReadOnlyBroadcastState:
        return broadcast_state(self._co, state_descriptor, self._writable)

    def apply_to_keyed_state(
        self, state_descriptor: Any, function: Callable[[Any, Any], None]
    ) -> None:
        """``function(key, state)`` for every key of this subtask that has the state."""
        if not self._writable:
            raise RuntimeError("apply_to_keyed_state is only allowed in process_broadcast_element")
        backend = self._co.backend
        state = backend.get_partitioned_state(state_descriptor)
        for key in backend.keys(state_descriptor.name):
            backend.set_current_key(key)
            function(key, state)


def broadcast_state(
    op: UserFunctionOperator, descriptor: MapStateDescriptor, writable: bool
) -> BroadcastMapState | ReadOnlyBroadcastState:
    """The operator's broadcast state ``descriptor`` names: writable on the broadcast side."""
    declared: tuple[MapStateDescriptor, ...] = tuple(
        (op.node.spec.options.get(BROADCAST_STATES) or ()) if op.node.spec else ()
    )
    if not isinstance(descriptor, MapStateDescriptor) or descriptor.name not in {
        d.name for d in declared
    }:
        names = sorted(d.name for d in declared)
        raise ValueError(
            f"{op.name}: broadcast state {getattr(descriptor, 'name', descriptor)!r} was not "
            f"given to broadcast() (declared: {names})"
        )
    state = op.ctx.operator_backend.get_broadcast_state(descriptor)
    return state if writable else ReadOnlyBroadcastState(state)


class _SidedProcessing:
    """Per-side dispatch shared by the keyed and non-keyed operators."""

    name: str
    output: Any
    side_outputs: Any
    _calls: tuple[_Call, _Call]
    _methods: tuple[Any, Any]  # the user function's method of each input (named in errors)
    _contexts: tuple[Any, Any]
    _selectors: tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None]
    _set_key: Callable[[Any], None] | None

    def process_batch(self, records: list[Any]) -> None:
        raise RuntimeError(f"{self.name} has two inputs: records must come with their input")

    def process_side(self, side: int, records: list[Any]) -> None:
        """Records of input ``side`` (0: first, 1: second / broadcast), in channel order."""
        call = self._calls[side]
        method = self._methods[side]
        ctx = self._contexts[side]
        select = self._selectors[side]
        set_key = self._set_key if select is not None else None
        name = self.name
        out: list[Any] = []
        if type(records) is StampedBatch:
            stamps: list[int | None] = []
            for r, t in zip(records, records.timestamps, strict=True):
                if set_key is not None and select is not None:
                    set_key(select(r))
                ctx.record_timestamp = t
                n = len(out)
                extend_with_result(out, call(r, ctx), name, method)
                if len(out) > n:
                    stamps.extend([t] * (len(out) - n))
            ctx.record_timestamp = None
            emit_results(self.output, self.side_outputs, out, stamps)
            return
        for r in records:
            if set_key is not None and select is not None:
                set_key(select(r))
            extend_with_result(out, call(r, ctx), name, method)
        if out:
            emit_results(self.output, self.side_outputs, out, None)


class CoOperator(_SidedProcessing, UserFunctionOperator):
    """Non-keyed two-input operator: co-map, co-flat-map, co-process, broadcast process."""

    def __init__(self, node: OperatorNode) -> None:
        super().__init__(node)
        self._selectors = (None, None)
        self._set_key = None

    def open(self) -> None:
        super().open()
        self._calls = _calls(self.function, self.node.kind)
        self._methods = _methods(self.function, self.node.kind)
        broadcast = self.node.kind in _BROADCAST_KINDS
        self._contexts = (_CoContext(self, False), _CoContext(self, broadcast))


class KeyedCoOperator(_SidedProcessing, KeyedOperatorBase):
    """Keyed two-input operator: both inputs keyed (keyed co-process, keyed co-map/flat-map)
    or the first keyed and the second broadcast (keyed broadcast process); timers of either
    fire ``on_timer`` with their key current."""

    def open(self) -> None:
        super().open()
        spec = self.node.spec
        assert spec is not None
        self._calls = _calls(self.function, self.node.kind)
        self._methods = _methods(self.function, self.node.kind)
        self._selectors = (self.key_selector, spec.options.get(KEY_SELECTOR2))
        self._set_key = self.backend.set_current_key
        broadcast = self.node.kind in _BROADCAST_KINDS
        self._contexts = (_KeyedCoContext(self, False), _KeyedCoContext(self, broadcast))
        self._timer_context = _KeyedCoContext(self, False)
        self._bind_on_timer()
