"""The functions a planned table job runs on Cairn's DataStream runtime.

Invariant: between table operators a record is a pair ``(kind, row)``: ``kind`` is the
``RowKind`` value (0 ``+I``, 1 ``-U``, 2 ``+U``, 3 ``-D``) and ``row`` a tuple of the table's
column values. A calc keeps a record's kind; a group aggregate keeps its groups' accumulators
in keyed state (so they are checkpointed, restored and rescaled like any keyed state) and emits
what changed: ``+I`` for a new group, ``-U``/``+U`` for a changed result, ``-D`` when a group's
last row was retracted, nothing when the result did not change — Flink's
``GroupAggFunction``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

from cairn.api.async_functions import AsyncFunction
from cairn.api.functions import (
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
)
from cairn.api.state import ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.common.types import Row, RowKind
from cairn.table.aggregates import Accumulator, accumulator_for
from cairn.table.analysis import AggCall
from cairn.table.codegen import CompiledCalc
from cairn.table.group_agg_code import GroupAggCode
from cairn.table.state_ttl import with_ttl
from cairn.table.timestamps import timestamp_of_millis

__all__ = [
    "KIND_TEXT",
    "AsyncCalcFunction",
    "CalcFunction",
    "DataStreamRecords",
    "FieldsKeySelector",
    "GroupAggFunction",
    "LimitFunction",
    "ToRowFunction",
    "ToTableRecord",
    "fields_key",
]

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
_KINDS = (RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE)
#: Each record kind's short text (``+I``...), indexed by the kind's value: RowKind's own.
KIND_TEXT = tuple(kind.short_string() for kind in _KINDS)
#: The final watermark: a timer at it fires at the end of a bounded input.
END_OF_INPUT = 9223372036854775807


class CalcFunction(FlatMapFunction):
    """Projection and filter of one stage: a generated function per record, kind kept."""

    def __init__(self, calc: CompiledCalc) -> None:
        self.calc = calc

    def open(self, runtime_context: Any) -> None:
        self._fn = self.calc.function()
        batch = self.calc.batch_function()
        assert batch is not None, "an async calc runs in AsyncCalcFunction"
        self._batch = batch
        open_functions(self.calc.functions, runtime_context)

    def close(self) -> None:
        for wrapper in self.calc.functions:
            wrapper.function.close()

    def flat_map(self, value: tuple[int, tuple[Any, ...]]) -> Iterable[Any]:
        out = self._fn(value[1])
        if out is None:
            return ()
        return ((value[0], out),)

    def flat_map_batch(
        self, records: list[Any], stamps: list[int | None] | None
    ) -> tuple[list[Any], list[int | None] | None]:
        """A whole batch through the generated ``calc_batch``: the kept records' outputs and
        their timestamps (``None`` for a plain batch)."""
        return self._batch(records, stamps)


class AsyncCalcFunction(AsyncFunction[Any, Any]):
    """A calc that awaits async scalar functions: many rows at a time on the subtask's event
    loop, results in input order (the async I/O operator keeps the order and checkpoints the
    rows in flight)."""

    def __init__(self, calc: CompiledCalc) -> None:
        self.calc = calc

    def open(self, runtime_context: Any) -> None:
        self._fn: Any = self.calc.function()
        open_functions(self.calc.functions, runtime_context)

    def close(self) -> None:
        for wrapper in self.calc.functions:
            wrapper.function.close()

    async def async_invoke(self, value: tuple[int, tuple[Any, ...]]) -> list[Any]:
        out = await self._fn(value[1])
        return [] if out is None else [(value[0], out)]


class FieldsKeySelector(KeySelector):
    """The group key of a record: the tuple of its key columns (``fields_key`` picks the
    fastest class for the number of columns)."""

    def __init__(self, indexes: Sequence[int]) -> None:
        self.indexes = tuple(indexes)

    def get_key(self, value: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
        row = value[1]
        return tuple([row[i] for i in self.indexes])


class OneFieldKeySelector(FieldsKeySelector):
    """The group key of one column: a 1-tuple, built without a loop (the hot case)."""

    def __init__(self, indexes: Sequence[int]) -> None:
        super().__init__(indexes)
        (self.index,) = self.indexes

    def get_key(self, value: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
        return (value[1][self.index],)


def fields_key(indexes: Sequence[int]) -> FieldsKeySelector:
    """The key selector of ``indexes``: the tuple of those columns of a record's row.

    >>> fields_key([1]).get_key((0, ("a", "b"))), fields_key([0, 1]).get_key((0, ("a", "b")))
    (('b',), ('a', 'b'))
    """
    return OneFieldKeySelector(indexes) if len(indexes) == 1 else FieldsKeySelector(indexes)


class GroupAggFunction(KeyedProcessFunction[Any, Any, Any]):
    """``GROUP BY`` with retraction; ``final_only`` (batch mode) emits each group's result
    once, at the end of input. With a ``state_ttl_ms`` (streaming only) a group not updated
    for that long is forgotten: its next row starts it again (``+I``), as in Flink."""

    def __init__(
        self,
        calls: Sequence[AggCall],
        final_only: bool = False,
        keys: Sequence[int] | None = None,
        state_ttl_ms: int | None = None,
    ) -> None:
        self.calls = tuple(calls)
        self.final_only = final_only
        # The key columns (what the key selector picks): given, rows may go a batch at a time
        self.keys = None if keys is None else tuple(keys)
        self.state_ttl_ms = None if final_only else state_ttl_ms

    def open(self, runtime_context: Any) -> None:
        self._accumulators: list[Accumulator] = [accumulator_for(c) for c in self.calls]
        self._args = [
            -2 if a.takes_row else c.arg
            for a, c in zip(self._accumulators, self.calls, strict=True)
        ]
        open_functions([c.wrapper for c in self.calls if c.wrapper is not None], runtime_context)
        descriptor = ValueStateDescriptor("group-aggregate", Types.PICKLED_BYTE_ARRAY())
        self._state = runtime_context.get_state(with_ttl(descriptor, self.state_ttl_ms))
        if not self.final_only and self.keys is not None:
            # Whole batches through generated code (same state, same outputs, per record).
            self._batch = GroupAggCode(self.keys, self.calls).function
            self.keyed_batch = self._run_batch
            self.keyed_batch_plain = True

    def _run_batch(
        self,
        records: list[Any],
        timestamps: list[int | None],
        key_selector: Any,
        set_key: Any,
        ctx: Any,
    ) -> tuple[list[Any], list[int | None] | None]:
        """The keyed operator's batch path: ``records`` (stamped unless ``timestamps`` is
        empty) through the generated ``group_agg``."""
        out: list[Any] = []
        plain = not timestamps and bool(records)
        stamps: list[int | None] = []
        state = self._state
        self._batch(
            records,
            repeat(None) if plain else timestamps,
            set_key,
            state.value,
            state.update,
            state.clear,
            out,
            stamps,
        )
        return out, None if plain else stamps

    def _result(self, accs: list[Any]) -> tuple[Any, ...]:
        return tuple(a.result(acc) for a, acc in zip(self._accumulators, accs, strict=True))

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        state = self._state.value()
        adding = kind in (INSERT, UPDATE_AFTER)
        if state is None:
            if not adding:
                return ()  # a retraction of a group never seen (as Flink: ignored)
            state = [0, [a.create() for a in self._accumulators]]
            if self.final_only:
                ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        count, accs = state
        before = self._result(accs) if count > 0 and not self.final_only else None
        for i, (agg, arg) in enumerate(zip(self._accumulators, self._args, strict=True)):
            v = row if arg == -2 else None if arg < 0 else row[arg]
            accs[i] = agg.add(accs[i], v) if adding else agg.retract(accs[i], v)
        count += 1 if adding else -1
        key = ctx.get_current_key()
        if count <= 0:
            self._state.clear()
            if before is not None:
                return ((DELETE, key + before),)
            return ()
        state[0] = count
        self._state.update(state)
        if self.final_only:
            return ()
        after = self._result(accs)
        if before is None:
            return ((INSERT, key + after),)
        if after == before:
            return ()
        return ((UPDATE_BEFORE, key + before), (UPDATE_AFTER, key + after))

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        state = self._state.value()
        if state is None or state[0] <= 0:
            return ()
        return ((INSERT, ctx.get_current_key() + self._result(state[1])),)


class LimitFunction(KeyedProcessFunction[Any, Any, Any]):
    """The first ``n`` rows of an insert-only input (one key, so one subtask counts). With a
    ``state_ttl_ms`` the count is forgotten after that long without a row, as Flink's
    ``AppendOnlyFirstNFunction`` forgets it."""

    def __init__(self, n: int, state_ttl_ms: int | None = None) -> None:
        self.n = n
        self.state_ttl_ms = state_ttl_ms

    def open(self, runtime_context: Any) -> None:
        descriptor = ValueStateDescriptor("limit", Types.LONG())
        self._count = runtime_context.get_state(with_ttl(descriptor, self.state_ttl_ms))

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        seen = self._count.value() or 0
        if seen >= self.n:
            return ()
        self._count.update(seen + 1)
        return (value,)


class ToTableRecord(MapFunction):
    """A DataStream record (a ``Row``, a tuple or one value) as a table record."""

    def __init__(self, arity: int, positions: Sequence[int] | None = None) -> None:
        self.arity = arity
        self.positions = None if positions is None else tuple(positions)

    def map(self, value: Any) -> tuple[int, tuple[Any, ...]]:
        if isinstance(value, Row):
            kind = value.get_row_kind().value
            values = tuple(value)
        elif isinstance(value, tuple | list):
            kind, values = INSERT, tuple(value)
        else:
            kind, values = INSERT, (value,)
        if self.positions is not None:
            values = tuple(values[i] for i in self.positions)
        if len(values) != self.arity:
            raise ValueError(
                f"A record of {len(values)} fields does not fit a table of {self.arity}"
                f" columns: {value!r}"
            )
        return (kind, values)


class DataStreamRecords(FlatMapFunction):
    """``from_data_stream``'s scan: a batch of DataStream records as table records (each one
    as ``ToTableRecord`` makes it; a tuple of the table's arity is taken as it is, without a
    call), with ``rowtime`` each record's timestamp appended (the ``rowtime`` metadata
    column: ``TIMESTAMP_LTZ(3)``, NULL without one). It runs batches only
    (``flat_map_batch``): the rowtime needs the timestamps."""

    def __init__(self, arity: int, rowtime: bool = False) -> None:
        self.to_record = ToTableRecord(arity)
        self.arity = arity
        self.rowtime = rowtime

    def flat_map(self, value: Any) -> Iterable[Any]:
        raise TypeError("DataStreamRecords runs a batch at a time (flat_map_batch)")

    def flat_map_batch(
        self, records: list[Any], stamps: list[int | None] | None
    ) -> tuple[list[Any], list[int | None] | None]:
        to_record = self.to_record.map
        arity = self.arity
        out = [
            (INSERT, r) if type(r) is tuple and len(r) == arity else to_record(r) for r in records
        ]
        if self.rowtime:
            times = stamps if stamps is not None else repeat(None)
            out = [
                (kind, (*row, None if t is None else timestamp_of_millis(t)))
                for (kind, row), t in zip(out, times, strict=False)
            ]
        return out, stamps


class ToRowFunction(MapFunction):
    """A table record as a ``Row`` with its kind and the table's column names."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)

    def map(self, value: tuple[int, tuple[Any, ...]]) -> Row:
        return to_row(value, self.names)


def to_row(value: tuple[int, tuple[Any, ...]], names: Sequence[str]) -> Row:
    row = Row(*value[1])
    row.set_field_names(list(names))
    row.set_row_kind(_KINDS[value[0]])
    return row


def open_functions(wrappers: Iterable[Any], runtime_context: Any) -> None:
    """``open`` each user-defined function once, with its subtask's ``FunctionContext``."""
    from cairn.table.udf import FunctionContext

    context = FunctionContext(runtime_context)
    for wrapper in wrappers:
        wrapper.function.open(context)


class CorrelateFunction(FlatMapFunction):
    """A table function per row (``join_lateral`` / ``flat_map``): each row it yields (a
    ``Row``, a tuple or one value) is appended to the input row (``keep_input``) or stands
    alone; an outer correlate keeps a row without results, padded with NULLs."""

    def __init__(
        self,
        wrapper: Any,
        args: CompiledCalc | None,
        input_names: Sequence[str],
        arity: int,
        keep_input: bool,
        outer: bool,
    ) -> None:
        self.wrapper = wrapper
        self.args = args
        self.input_names = list(input_names)
        self.arity = arity
        self.keep_input = keep_input
        self.outer = outer

    def open(self, runtime_context: Any) -> None:
        open_functions([self.wrapper], runtime_context)
        if self.args is not None:
            self._args = self.args.function()
            open_functions(self.args.functions, runtime_context)

    def close(self) -> None:
        self.wrapper.function.close()

    def flat_map(self, value: tuple[int, tuple[Any, ...]]) -> Iterable[Any]:
        kind, row = value
        if self.args is None:  # called with the whole row, as PyFlink's row-based operations
            named = Row(*row)
            named.set_field_names(self.input_names)
            args: tuple[Any, ...] = (named,)
        else:
            computed = self._args(row)
            assert computed is not None
            args = computed
        out = []
        try:
            results = self.wrapper.function.eval(*args) or ()
            for result in results:
                fields = tuple(result) if isinstance(result, Row | tuple | list) else (result,)
                if len(fields) != self.arity:
                    raise ValueError(
                        f"table function {self.wrapper.name} yielded {len(fields)} fields,"
                        f" its result type has {self.arity}: {result!r}"
                    )
                out.append((kind, row + fields if self.keep_input else fields))
        except Exception as e:
            if hasattr(e, "add_note"):
                e.add_note(f"in table function {self.wrapper.name}{args!r}")
            raise
        if not out and self.outer:
            out.append((kind, row + (None,) * self.arity))
        return out
