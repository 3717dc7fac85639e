"""Streaming semi and anti joins: ``IN``/``EXISTS`` subqueries, ``INTERSECT`` and ``EXCEPT``.

Invariant: per join key, each side's live rows are kept in keyed map state — a right row with
its count, a left row with its count and the number of right rows it matches (Flink's
``OuterJoinRecordStateView``) — so the operator is checkpointed, restored and rescaled like
any keyed state. A left row is in the output while it matches at least one right row (a semi
join) or none (an anti join): a change of the left side is emitted when that holds, a change
of the right side that makes a left row's matches go from 0 to 1 or from 1 to 0 inserts or
retracts that left row — Flink's ``StreamingSemiAntiJoinOperator``. So the output changelog
applied to a view equals the semi (anti) join of the two inputs' views. Rows are emitted as
``+I`` and ``-D``, as Cairn's regular join emits them. With ``filter_nulls`` a key holding a
NULL matches nothing (SQL's ``=``); without it NULLs are equal (``IS NOT DISTINCT FROM``, the
keys of ``INTERSECT`` and ``EXCEPT``).

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

__all__ = ["SemiAntiJoinFunction"]


class SemiAntiJoinFunction(KeyedCoProcessFunction):
    """``left SEMI|ANTI JOIN right ON keys [AND condition]``: the left rows that match a right
    row (``anti`` False) or none (``anti`` True). With a TTL a side's row not written for that
    long is forgotten (``left_ttl_ms``, ``right_ttl_ms``), as in Cairn's regular join."""

    def __init__(
        self,
        anti: bool,
        condition: CompiledCalc | None,
        left_ttl_ms: int | None = None,
        right_ttl_ms: int | None = None,
        filter_nulls: bool = True,
    ) -> None:
        self.anti = anti
        self.condition = condition
        self.left_ttl_ms = left_ttl_ms
        self.right_ttl_ms = right_ttl_ms
        self.filter_nulls = filter_nulls

    def open(self, runtime_context: Any) -> None:
        pickled = Types.PICKLED_BYTE_ARRAY()
        self._left = runtime_context.get_map_state(
            with_ttl(MapStateDescriptor("semi-left", pickled, pickled), self.left_ttl_ms)
        )
        self._right = runtime_context.get_map_state(
            with_ttl(MapStateDescriptor("semi-right", pickled, pickled), self.right_ttl_ms)
        )
        self._matches = None if self.condition is None else self.condition.function()

    def _null_key(self, ctx: Any) -> bool:
        if not self.filter_nulls:
            return False
        key = ctx.get_current_key()
        return key is None or (isinstance(key, tuple) and None in key)

    def _match(self, left: tuple[Any, ...], right: tuple[Any, ...]) -> bool:
        return self._matches is None or self._matches(left + right) is not None

    def process_element1(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        """A change of the left side: emitted when the row is (or was) in the output."""
        kind, row = value
        adding = kind in (INSERT, UPDATE_AFTER)
        stored = self._left.get(row)
        count, matches = stored if stored is not None else (0, 0)
        if not adding and count == 0:
            return ()  # a retraction of a row never seen (or forgotten by its TTL)
        if adding and count == 0:
            matches = 0
            if not self._null_key(ctx):
                for that, n in list(self._right.items()):
                    if self._match(row, that):
                        matches += n
        count += 1 if adding else -1
        if count == 0:
            self._left.remove(row)
        else:
            self._left.put(row, (count, matches))
        if (matches > 0) != self.anti:
            return ((INSERT if adding else DELETE, row),)
        return ()

    def process_element2(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        """A change of the right side: the left rows whose matches leave or reach 0 change."""
        kind, row = value
        adding = kind in (INSERT, UPDATE_AFTER)
        count = self._right.get(row) or 0
        if not adding and count == 0:
            return ()
        out: list[Any] = []
        for that, (n, matches) in [] if self._null_key(ctx) else list(self._left.items()):
            if not self._match(that, row):
                continue
            if adding:
                if matches == 0:  # its first match: in a semi join's output, out of an anti's
                    out.extend([(DELETE if self.anti else INSERT, that)] * n)
                self._left.put(that, (n, matches + 1))
            else:
                if matches == 1:  # its last match goes
                    out.extend([(INSERT if self.anti else DELETE, that)] * n)
                self._left.put(that, (n, max(matches - 1, 0)))
        count += 1 if adding else -1
        if count == 0:
            self._right.remove(row)
        else:
            self._right.put(row, count)
        return out
