"""Stateless record-at-a-time operators, executed a batch at a time.

Invariant: an operator builds a new output list per input batch and never mutates the input
batch (broadcast edges share one list between channels). An output record carries the
timestamp of the input record it came from (a plain input batch gives a plain output batch).
Process functions may ``yield tag, value``: the value goes to the side output of ``tag`` when
the job reads it (``get_side_output``), else the pair stays in the main output, as in PyFlink.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import Any

from cairn.api.output_tag import OutputTag
from cairn.runtime.eventtime.stamped import StampedBatch, stamp
from cairn.runtime.operators.base import Output
from cairn.runtime.operators.user_function import UserFunctionOperator, resolve_method


def extend_with_result(
    out: list[Any], result: Any, operator_name: str, function: Any = None
) -> None:
    """Append what a flat_map/process/on_timer call produced: a generator, an iterable, or None.

    A result that is not iterable fails naming the operator, the function and the value; a
    ``TypeError`` the function's own generator raises while yielding passes unchanged.

    >>> out = []
    >>> extend_with_result(out, (x * 2 for x in (1, 2)), "FlatMap"); out
    [2, 4]
    >>> def to_int(value): return int(value)
    >>> extend_with_result(out, to_int("3"), "FlatMap", to_int)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: FlatMap: to_int() returned 3 (int), not an iterable: yield each output (...)
    """
    if result is None:
        return
    try:
        out.extend(result)
    except TypeError:
        error = not_iterable_error(result, operator_name, function)
        if error is None:
            raise  # raised inside the function's generator: its own error
        raise error from None


def not_iterable_error(result: Any, operator_name: str, function: Any) -> TypeError | None:
    """The error for a function that returned ``result`` where outputs were expected, or
    ``None`` when ``result`` is iterable (a ``TypeError`` came from elsewhere)."""
    try:
        iter(result)
    except TypeError:
        pass
    else:
        return None
    shown = repr(result)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return TypeError(
        f"{operator_name}: {function_name(function)} returned {shown} "
        f"({type(result).__name__}), not an iterable: yield each output (or return a list of "
        "them, or None)"
    )


def function_name(function: Any) -> str:
    """``Class.method()``, ``name()`` or ``<lambda> (file:line)`` of a user function.

    >>> class Split:
    ...     def flat_map(self, value): ...
    >>> function_name(Split().flat_map), function_name(len), function_name(None)
    ('Split.flat_map()', 'len()', 'the function')
    """
    if function is None:
        return "the function"
    owner = getattr(function, "__self__", None)
    name = getattr(function, "__name__", None)
    if name is None:  # a callable object
        return f"{type(function).__name__}()"
    if owner is not None and not isinstance(owner, type | types.ModuleType):
        return f"{type(owner).__name__}.{name}()"
    code = getattr(function, "__code__", None)
    if name == "<lambda>" and code is not None:
        return f"<lambda> ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
    return f"{name}()"


def flat_map_stamped(
    records: StampedBatch,
    call: Callable[[Any, int | None], Any],
    name: str,
    function: Any = None,
) -> tuple[list[Any], list[int | None]]:
    """Outputs of ``call(record, timestamp)`` for each record, each with its input's timestamp
    (``function``: the user function ``call`` wraps, named in errors)."""
    out: list[Any] = []
    stamps: list[int | None] = []
    for r, t in zip(records, records.timestamps, strict=True):
        n = len(out)
        extend_with_result(out, call(r, t), name, function)
        if len(out) > n:
            stamps.extend([t] * (len(out) - n))
    return out, stamps


def is_tagged(value: Any) -> bool:
    """``(OutputTag, value)``: what a process function yields for a side output."""
    return type(value) is tuple and len(value) == 2 and isinstance(value[0], OutputTag)


def emit_results(
    output: Output,
    side_outputs: dict[str, Output],
    out: list[Any],
    stamps: list[int | None] | None,
) -> None:
    """Send a process function's outputs: tagged ones to their side outputs (if the job reads
    them), the rest to ``output``; stamped when ``stamps`` is given."""
    if side_outputs:
        main: list[Any] = []
        main_stamps: list[int | None] = []
        tagged: dict[str, tuple[list[Any], list[int | None]]] = {}
        for i, v in enumerate(out):
            if is_tagged(v):
                recs, ts = tagged.setdefault(v[0].tag_id, ([], []))
                recs.append(v[1])
                ts.append(stamps[i] if stamps is not None else None)
            else:
                main.append(v)
                main_stamps.append(stamps[i] if stamps is not None else None)
        for tag_id, (recs, ts) in tagged.items():
            side = side_outputs.get(tag_id)
            if side is None:  # this tag is not read by the job; keep it in the main output
                main.extend((OutputTag(tag_id), r) for r in recs)
                main_stamps.extend(ts)
            else:
                side(stamp(recs, ts) if stamps is not None else recs)
        out = main
        stamps = main_stamps if stamps is not None else None
    if out:
        output(stamp(out, stamps) if stamps is not None else out)


class MapOperator(UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._map = resolve_method(self.function, "map")

    def process_batch(self, records: list[Any]) -> None:
        f = self._map
        if type(records) is StampedBatch:
            self.output(stamp([f(r) for r in records], records.timestamps))
            return
        self.output([f(r) for r in records])


class FilterOperator(UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._filter = resolve_method(self.function, "filter")

    def process_batch(self, records: list[Any]) -> None:
        f = self._filter
        if type(records) is StampedBatch:
            kept = [(r, t) for r, t in zip(records, records.timestamps, strict=True) if f(r)]
            if kept:
                self.output(stamp([r for r, _ in kept], [t for _, t in kept]))
            return
        out = [r for r in records if f(r)]
        if out:
            self.output(out)


class FlatMapOperator(UserFunctionOperator):
    """``flat_map`` per record; or, when the function has ``flat_map_batch(records,
    timestamps) -> (outputs, timestamps)`` (``timestamps`` ``None`` for a plain batch, and then
    returned ``None``), one call per batch — the table runtime's generated calcs."""

    def open(self) -> None:
        super().open()
        self._flat_map = resolve_method(self.function, "flat_map")
        batch = getattr(self.function, "flat_map_batch", None)
        self._batch: Callable[..., tuple[list[Any], list[int | None] | None]] | None = (
            batch if callable(batch) else None
        )

    def process_batch(self, records: list[Any]) -> None:
        batch = self._batch
        if batch is not None:
            given = records.timestamps if isinstance(records, StampedBatch) else None
            out, stamps = batch(records, given)
            if out:
                self.output(stamp(out, stamps) if stamps is not None else out)
            return
        f = self._flat_map
        name = self.name
        if type(records) is StampedBatch:
            out, stamps = flat_map_stamped(records, lambda r, _t: f(r), name, f)
            if out:
                self.output(stamp(out, stamps))
            return
        out = []
        for r in records:
            extend_with_result(out, f(r), name, f)
        if out:
            self.output(out)


class _ProcessContext:
    """``ProcessFunction.Context`` for non-keyed streams: no timers (as in Flink)."""

    def __init__(self, operator: ProcessOperator) -> None:
        self._op = operator
        # Set by the operator for each record or timer: a plain attribute, one store each.
        self.record_timestamp: int | None = None

    def timestamp(self) -> int | None:
        return self.record_timestamp

    def timer_service(self) -> _NonKeyedTimerService:
        return _NonKeyedTimerService(self._op)


class _NonKeyedTimerService:
    def __init__(self, operator: ProcessOperator) -> None:
        self._op = operator

    def current_processing_time(self) -> int:
        return self._op.ctx.clock_ms()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise RuntimeError(
            "Setting timers is only supported on a keyed stream (use key_by() before process())."
        )

    register_event_time_timer = register_processing_time_timer
    delete_processing_time_timer = register_processing_time_timer
    delete_event_time_timer = register_processing_time_timer


class ProcessOperator(UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._process = resolve_method(self.function, "process_element")
        self._context = _ProcessContext(self)

    def process_batch(self, records: list[Any]) -> None:
        f = self._process
        ctx = self._context
        name = self.name
        if type(records) is StampedBatch:

            def call(r: Any, t: int | None) -> Any:
                ctx.record_timestamp = t
                return f(r, ctx)

            out, stamps = flat_map_stamped(records, call, name, f)
            ctx.record_timestamp = None
            emit_results(self.output, self.side_outputs, out, stamps)
            return
        plain: list[Any] = []
        for r in records:
            extend_with_result(plain, f(r, ctx), name, f)
        emit_results(self.output, self.side_outputs, plain, None)
