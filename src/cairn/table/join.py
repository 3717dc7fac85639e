"""Regular (unwindowed) equi-joins of two tables: inner and left outer, with retraction.

Invariant: per join key, each side's live rows are kept in keyed map state (row → count, and
for the outer side the number of matches), so the join is checkpointed, restored and rescaled
like any keyed state; every change of one side is joined against the other side's rows as
they are at that moment, and what it produced is later retracted exactly (``-D`` of the same
joined row), so the output changelog applied to a view equals the join of the two inputs'
views — Flink's ``StreamingJoinOperator``. A left outer join emits a row padded with NULLs
while its key has no right row, and retracts it when the first right row arrives (and back).
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


class JoinFunction(KeyedCoProcessFunction):
    """``left JOIN right ON keys [AND condition]``; ``outer``: a left outer join. With a TTL
    a side's row not written for that long is forgotten (``left_ttl_ms``, ``right_ttl_ms``:
    Flink's per-side TTL): later rows of the other side no longer join it, and its
    retraction is ignored, as in Flink's ``StreamingJoinOperator``."""

    def __init__(
        self,
        right_arity: int,
        outer: bool,
        condition: CompiledCalc | None,
        left_ttl_ms: int | None = None,
        right_ttl_ms: int | None = None,
    ) -> None:
        self.right_arity = right_arity
        self.outer = outer
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
        self._nulls = (None,) * self.right_arity

    def _match(self, left: tuple[Any, ...], right: tuple[Any, ...]) -> bool:
        return self._matches is None or self._matches(left + right) is not None

    def process_element1(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        adding = kind in (INSERT, UPDATE_AFTER)
        out_kind = INSERT if adding else DELETE
        entry = self._left.get(row)
        count = 0 if entry is None else entry[0]
        if not adding and count == 0:
            return ()  # a retraction of a row never seen
        out: list[Any] = []
        matches = 0
        for right, n in self._right.items():
            if self._match(row, right):
                matches += n
                out.extend([(out_kind, row + right)] * n)
        if self.outer and matches == 0:
            out.append((out_kind, row + self._nulls))
        count += 1 if adding else -1
        if count:
            self._left.put(row, (count, matches))
        else:
            self._left.remove(row)
        return out

    def process_element2(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        adding = kind in (INSERT, UPDATE_AFTER)
        n = self._right.get(row) or 0
        if not adding and n == 0:
            return ()
        if adding:
            self._right.put(row, n + 1)
        elif n > 1:
            self._right.put(row, n - 1)
        else:
            self._right.remove(row)
        out: list[Any] = []
        for left, (count, matched) in list(self._left.items()):
            if not self._match(left, row):
                continue
            if adding:
                if self.outer and matched == 0:  # the padded row is replaced by the joined one
                    out.extend([(DELETE, left + self._nulls)] * count)
                out.extend([(INSERT, left + row)] * count)
                self._left.put(left, (count, matched + 1))
            else:
                out.extend([(DELETE, left + row)] * count)
                self._left.put(left, (count, matched - 1))
                if self.outer and matched == 1:
                    out.extend([(INSERT, left + self._nulls)] * count)
        return out
