"""Regular (unwindowed) equi-joins of two tables: inner, left, right and full outer, with
retraction.

Invariant: per join key, each side's live rows are kept in keyed map state (row → count; for
an outer side also the number of the other side's rows it matches, Flink's
``OuterJoinRecordStateView``), so the join is checkpointed, restored and rescaled like any
keyed state; every change of one side is joined against the other side's rows as they are at
that moment, and what it produced is later retracted exactly, so the output changelog applied
to a view equals the join of the two inputs' views — Flink's ``StreamingJoinOperator``. A row
of an outer side is emitted padded with NULLs while it matches nothing; the other side's first
match retracts the padded row (``-D``) before the joined row is inserted, its last match's
retraction inserts it again. Joined rows are ``+I`` and ``-D`` only, as Flink's join with an
outer side emits them (Flink's inner join forwards ``-U``/``+U``; Cairn's emits ``-D``/``+I``,
which an upsert sink, dropping ``-U``, cannot misread). A row whose join key holds a NULL
matches nothing (SQL's ``=``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.api.co_functions import KeyedCoProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.codegen import CompiledCalc
from cairn.table.operators import DELETE, INSERT, UPDATE_AFTER
from cairn.table.state_ttl import with_ttl

__all__ = ["JoinFunction"]


def _entry(value: Any) -> tuple[int, int]:
    """A stored row's ``(count, matches)``; an inner side stores the count alone."""
    if value is None:
        return 0, 0
    if isinstance(value, tuple):
        return value
    return value, 0


class JoinFunction(KeyedCoProcessFunction):
    """``left [LEFT|RIGHT|FULL] JOIN right ON keys [AND condition]``. ``outer``: the left side
    is outer (a left join), ``right_outer``: the right side is (a right join; both: a full
    join). With a TTL a side's row not written for that long is forgotten (``left_ttl_ms``,
    ``right_ttl_ms``: Flink's per-side TTL): later rows of the other side no longer join it,
    and its retraction is ignored."""

    def __init__(
        self,
        right_arity: int,
        outer: bool,
        condition: CompiledCalc | None,
        left_ttl_ms: int | None = None,
        right_ttl_ms: int | None = None,
        right_outer: bool = False,
        left_arity: int = 0,
    ) -> None:
        self.right_arity = right_arity
        self.left_arity = left_arity
        self.outer = outer
        self.right_outer = right_outer
        self.condition = condition
        self.left_ttl_ms = left_ttl_ms
        self.right_ttl_ms = right_ttl_ms

    def open(self, runtime_context: Any) -> None:
        pickled = Types.PICKLED_BYTE_ARRAY()
        self._left = runtime_context.get_map_state(
            with_ttl(MapStateDescriptor("join-left", pickled, pickled), self.left_ttl_ms)
        )
        self._right = runtime_context.get_map_state(
            with_ttl(MapStateDescriptor("join-right", pickled, pickled), self.right_ttl_ms)
        )
        self._matches = None if self.condition is None else self.condition.function()
        self._right_nulls = (None,) * self.right_arity
        self._left_nulls = (None,) * self.left_arity

    def process_element1(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        return self._process(value, ctx, True)

    def process_element2(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        return self._process(value, ctx, False)

    def _process(
        self, value: tuple[int, tuple[Any, ...]], ctx: Any, is_left: bool
    ) -> Iterable[Any]:
        """One change of one side, as Flink's ``StreamingJoinOperator.processElement``."""
        kind, row = value
        adding = kind in (INSERT, UPDATE_AFTER)
        if is_left:
            mine, other = self._left, self._right
            my_outer, other_outer = self.outer, self.right_outer
        else:
            mine, other = self._right, self._left
            my_outer, other_outer = self.right_outer, self.outer
        count = _entry(mine.get(row))[0]
        if not adding and count == 0:
            return ()  # a retraction of a row never seen (or forgotten by its TTL)
        out: list[Any] = []
        matches = 0
        key = ctx.get_current_key()
        null_key = key is None or (isinstance(key, tuple) and None in key)
        for that, entry in [] if null_key else list(other.items()):
            joined = row + that if is_left else that + row
            if self._matches is not None and self._matches(joined) is None:
                continue
            n, that_matched = _entry(entry)
            matches += n
            if adding:
                if other_outer:
                    if that_matched == 0:  # its padded row is replaced by the joined one
                        out.extend([(DELETE, self._padded(that, not is_left))] * n)
                    other.put(that, (n, that_matched + 1))
                out.extend([(INSERT, joined)] * n)
            else:
                out.extend([(DELETE, joined)] * n)
                if other_outer:
                    if that_matched == 1:  # its last match goes: padded again
                        out.extend([(INSERT, self._padded(that, not is_left))] * n)
                    other.put(that, (n, that_matched - 1))
        if my_outer and matches == 0:
            out.append((INSERT if adding else DELETE, self._padded(row, is_left)))
        count += 1 if adding else -1
        if count == 0:
            mine.remove(row)
        elif my_outer or is_left:  # the left side's entries were always (count, matches)
            mine.put(row, (count, matches if my_outer else 0))
        else:
            mine.put(row, count)
        return out

    def _padded(self, row: tuple[Any, ...], is_left: bool) -> tuple[Any, ...]:
        return row + self._right_nulls if is_left else self._left_nulls + row
