"""``flat_aggregate``: a table aggregate function per group, emitting rows, with retraction.

Invariant: per key, the function's accumulator, the number of live input rows and the rows it
emitted last live in keyed state; after every change of the group the rows emitted before are
retracted (``-D``) and the rows ``emit_value`` yields now are inserted (``+I``), unless they
are the same — so the changelog applied to a view always holds exactly the function's current
result for every group, as Flink's ``GroupTableAggFunction`` emits it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.common.types import Row
from cairn.table.operators import DELETE, INSERT, UPDATE_AFTER, open_functions
from cairn.table.state_ttl import with_ttl

__all__ = ["TableAggFunction"]


class TableAggFunction(KeyedProcessFunction[Any, Any, Any]):
    """A ``TableAggregateFunction`` per group; ``args`` ``None`` passes the whole row. With a
    ``state_ttl_ms`` a group not updated for that long is forgotten, as in Flink."""

    def __init__(
        self,
        wrapper: Any,
        args: Sequence[int] | None,
        input_names: Sequence[str],
        arity: int,
        state_ttl_ms: int | None = None,
    ) -> None:
        self.wrapper = wrapper
        self.args = None if args is None else tuple(args)
        self.input_names = list(input_names)
        self.arity = arity
        self.state_ttl_ms = state_ttl_ms

    def open(self, runtime_context: Any) -> None:
        self._function = self.wrapper.function
        descriptor = ValueStateDescriptor("table-aggregate", Types.PICKLED_BYTE_ARRAY())
        self._state = runtime_context.get_state(with_ttl(descriptor, self.state_ttl_ms))
        open_functions([self.wrapper], runtime_context)

    def _arguments(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        if self.args is None:
            named = Row(*row)
            named.set_field_names(self.input_names)
            return (named,)
        return tuple(row[i] for i in self.args)

    def _emitted(self, acc: Any) -> list[tuple[Any, ...]]:
        rows = []
        for result in self._function.emit_value(acc) or ():
            fields = tuple(result) if isinstance(result, Row | tuple | list) else (result,)
            if len(fields) != self.arity:
                raise ValueError(
                    f"table aggregate function {self.wrapper.name} emitted {len(fields)} fields,"
                    f" its result type has {self.arity}: {result!r}"
                )
            rows.append(fields)
        return rows

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        adding = kind in (INSERT, UPDATE_AFTER)
        state = self._state.value()
        if state is None:
            if not adding:
                return ()
            state = [0, self._function.create_accumulator(), []]
        count, acc, before = state
        if adding:
            self._function.accumulate(acc, *self._arguments(row))
        else:
            self._function.retract(acc, *self._arguments(row))
        count += 1 if adding else -1
        key = ctx.get_current_key()
        after = self._emitted(acc) if count > 0 else []
        if count > 0:
            self._state.update([count, acc, after])
        else:
            self._state.clear()
        if after == before:
            return ()
        retracted = [(DELETE, key + r) for r in before]
        return retracted + [(INSERT, key + r) for r in after]
