"""Top-N (``Rank``): per partition key, the rows ranked ``start..end`` by an order, kept up to
date as rows arrive (and, over an updating input, as rows are retracted).

Invariant: per key one value in keyed state (checkpointed, restored and rescaled like any keyed
state; ``table.exec.state.ttl`` forgets a partition not written for that long, as Flink's
``createTtlConfig``), and the changes Flink's functions emit. Rows with equal order keys rank
in arrival order (a new row after the rows it ties with), and a retraction removes the first
equal row of its order key. Which function runs (``process_kind``):

* ``first-n`` (Flink's ``AppendOnlyFirstNFunction``): insert-only input ordered by the
  processing-time attribute ``ASC`` — the first ``end`` rows per key, each ``+I`` once;
* ``top-1`` (``FastTop1Function``): insert-only input, ``rankEnd=1`` — ``+I`` of the first row,
  then ``-U`` of the top row and ``+U`` of a strictly better one;
* ``append`` (``AppendOnlyTopNFunction``): insert-only input — a buffer of the top ``end``
  rows; a row that ties with the worst of a full buffer is not admitted;
* ``retract`` (``RetractableTopNFunction``): updating input — all the partition's rows.

With the rank number in the output (or ranks not starting at 1) a change emits, for every rank
whose row changed, ``-U`` of the old row and ``+U`` of the new row at that rank, ``+I`` for a
rank newly filled and ``-D`` for a rank emptied; without it, ``-D`` of the row pushed out of
the top ``end`` (or retracted) and ``+I`` of the row that entered. Only ranks within
``start..end`` are emitted.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import cmp_to_key
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.operators import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from cairn.table.plan import SortField
from cairn.table.state_ttl import with_ttl

__all__ = ["RankFunction", "compare_rows", "process_kind"]

Row = tuple[Any, ...]


def process_kind(strategy: str, order: Sequence[SortField], proctime_first: bool, end: int) -> str:
    """Which of Flink's functions a ``Rank`` runs, as Flink's ``StreamExecRank`` picks it
    (``proctime_first``: the one order column is the processing-time attribute).

    >>> process_kind("AppendFastStrategy", [SortField(0)], True, 3)
    'first-n'
    >>> process_kind("AppendFastStrategy", [SortField(0, False)], False, 1)
    'top-1'
    >>> process_kind("RetractStrategy", [SortField(0)], False, 1)
    'retract'
    """
    if strategy != "AppendFastStrategy":
        return "retract"
    if len(order) == 1 and proctime_first and order[0].ascending:
        return "first-n"
    return "top-1" if end == 1 else "append"


def compare_rows(order: Sequence[SortField], a: Row, b: Row) -> int:
    """Negative when ``a`` ranks before ``b``, 0 when they tie, positive after.

    >>> by_v_desc = [SortField(1, ascending=False, nulls_first=False)]
    >>> compare_rows(by_v_desc, ("a", 5), ("b", 3)), compare_rows(by_v_desc, ("a", None), ("b", 3))
    (-1, 1)
    """
    for f in order:
        x, y = a[f.index], b[f.index]
        if x is None or y is None:
            if x is None and y is None:
                continue
            return (-1 if f.nulls_first else 1) if x is None else (1 if f.nulls_first else -1)
        c: int = (x > y) - (x < y)
        if c:
            return c if f.ascending else -c
    return 0


class RankFunction(KeyedProcessFunction[Any, Any, Any]):
    """The ranks ``start..end`` of each partition key by ``order``; ``kind`` is one of
    ``process_kind``'s."""

    def __init__(
        self,
        kind: str,
        order: Sequence[SortField],
        start: int,
        end: int,
        output_rank_number: bool,
        state_ttl_ms: int | None = None,
    ) -> None:
        self.kind = kind
        self.order = tuple(order)
        self.start = start
        self.end = end
        self.output_rank_number = output_rank_number
        self.state_ttl_ms = state_ttl_ms

    def open(self, runtime_context: Any) -> None:
        type_info = Types.LONG() if self.kind == "first-n" else Types.PICKLED_BYTE_ARRAY()
        descriptor = ValueStateDescriptor(f"rank-{self.kind}", type_info)
        self._state = runtime_context.get_state(with_ttl(descriptor, self.state_ttl_ms))
        order = self.order
        self._key: Callable[[Row], Any] = cmp_to_key(lambda a, b: compare_rows(order, a, b))
        # the "with row number" emission of Flink, also used for an offset
        self._numbered = self.output_rank_number or self.start > 1

    def _emit(self, out: list[Any], kind: int, row: Row, rank: int) -> None:
        if self.start <= rank <= self.end:
            out.append((kind, (*row, rank) if self.output_rank_number else row))

    def process_element(self, value: tuple[int, Row], ctx: Any) -> Iterable[Any]:
        kind, row = value
        adding = kind in (INSERT, UPDATE_AFTER)
        if not adding and self.kind != "retract":
            raise ValueError("This Top-N takes an insert-only input")
        out: list[Any] = []
        if self.kind == "first-n":
            seen = self._state.value() or 0
            if seen < self.end:
                self._state.update(seen + 1)
                if self._numbered:
                    self._emit(out, INSERT, row, seen + 1)
                else:
                    out.append((INSERT, row))
            return out
        if self.kind == "top-1":
            top = self._state.value()
            if top is None:
                self._state.update(row)
                self._emit(out, INSERT, row, 1)
            elif compare_rows(self.order, row, top) < 0:
                self._state.update(row)
                self._emit(out, UPDATE_BEFORE, top, 1)
                self._emit(out, UPDATE_AFTER, row, 1)
            return out
        rows: list[Row] = self._state.value() or []
        changed = self._insert(rows, row, out) if adding else self._retract(rows, row, out)
        if changed:
            if rows:
                self._state.update(rows)
            else:
                self._state.clear()
        return out

    def _insert(self, rows: list[Row], row: Row, out: list[Any]) -> bool:
        key, n = self._key(row), self.end
        if self.kind == "append" and len(rows) >= n and not key < self._key(rows[-1]):
            return False  # a full buffer admits only a row better than its worst
        position = bisect_right(rows, key, key=self._key)
        before = len(rows)
        rows.insert(position, row)
        rank = position + 1
        if rank <= n:
            if self._numbered:  # every rank from the new row's down shifts by one
                for j in range(rank, min(before, n) + 1):
                    self._emit(out, UPDATE_BEFORE, rows[j], j)
                    self._emit(out, UPDATE_AFTER, rows[j - 1], j)
                if before < n:
                    self._emit(out, INSERT, rows[before], before + 1)
            else:
                if before >= n:
                    out.append((DELETE, rows[n]))
                out.append((INSERT, row))
        if self.kind == "append":
            del rows[n:]
        return True

    def _retract(self, rows: list[Row], row: Row, out: list[Any]) -> bool:
        key, n = self._key(row), self.end
        low, high = bisect_left(rows, key, key=self._key), bisect_right(rows, key, key=self._key)
        found = next((i for i in range(low, high) if rows[i] == row), None)
        if found is None:
            return False  # a row never seen (or forgotten by the state TTL): ignored
        before = len(rows)
        del rows[found]
        rank = found + 1
        if rank <= n:
            if self._numbered:  # every rank from the removed row's down shifts up by one
                for j in range(rank, min(before - 1, n) + 1):
                    self._emit(out, UPDATE_BEFORE, row if j == rank else rows[j - 2], j)
                    self._emit(out, UPDATE_AFTER, rows[j - 1], j)
                if before <= n:
                    self._emit(out, DELETE, row if before == rank else rows[before - 2], before)
            else:
                out.append((DELETE, row))
                if before > n:
                    out.append((INSERT, rows[n - 1]))
        return True
