"""Window Top-N and window deduplication at run time (Flink's ``WindowRankOperator`` and
``RowTimeWindowDeduplicateOperator``).

Invariant: per partition key, each open window's candidates live in keyed map state (window
end → rows), so they are checkpointed, restored and rescaled like any keyed state; a window
fires once, when the watermark passes its end (an event-time timer at ``end - 1``), emitting
insert-only rows and dropping the window's state. Top-N keeps at most the best ``end`` rows
of a window (equal order keys rank in arrival order, so a row tying with the worst of a full
buffer is not admitted) and emits ranks ``start..end``, with the rank number when asked.
Deduplication keeps one row per window: the first has the earliest time (a later row with the
same time does not replace it), the last the latest (a later row with the same time does).
A row whose window has fired already (its end - 1 at or before the watermark) is late and
dropped, as Flink drops it.

>>> from cairn.table.plan import SortField
>>> by_v_desc = (SortField(1, ascending=False, nulls_first=False),)
>>> best([("a", 1), ("b", 5), ("c", 5), ("d", 3)], by_v_desc, 2)
[('b', 5), ('c', 5)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cmp_to_key
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.operators import INSERT
from cairn.table.plan import SortField
from cairn.table.rank import compare_rows
from cairn.table.timestamps import epoch_millis

__all__ = ["WindowRankFunction", "best"]

Row = tuple[Any, ...]


def best(rows: Sequence[Row], order: Sequence[SortField], n: int) -> list[Row]:
    """The first ``n`` of ``rows`` (in arrival order) sorted by ``order``, ties in arrival
    order."""

    def compare(a: Row, b: Row) -> int:
        return compare_rows(order, a, b)

    return sorted(rows, key=cmp_to_key(compare))[:n]


class WindowRankFunction(KeyedProcessFunction[Any, Any, Any]):
    """Ranks ``start..end`` per window (``window_end``: the window end column), or
    deduplication (``keep``: ``"first"``/``"last"`` by the time column ``time_index``)."""

    def __init__(
        self,
        window_end: int,
        order: Sequence[SortField] = (),
        start: int = 1,
        end: int = 1,
        output_rank_number: bool = False,
        keep: str = "",
        time_index: int = -1,
    ) -> None:
        self.window_end = window_end
        self.order = tuple(order)
        self.start = start
        self.end = end
        self.output_rank_number = output_rank_number
        self.keep = keep
        self.time_index = time_index

    def open(self, runtime_context: Any) -> None:
        name = "window-deduplicate" if self.keep else "window-rank"
        self._windows = runtime_context.get_map_state(
            MapStateDescriptor(name, Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: tuple[int, Row], ctx: Any) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("a window Top-N takes insert-only input")
        timers = ctx.timer_service()
        end = epoch_millis(row[self.window_end])
        if end - 1 <= timers.current_watermark():
            return ()  # late: its window fired already
        kept = self._windows.get(end)
        if kept is None:
            timers.register_event_time_timer(end - 1)
            self._windows.put(end, row if self.keep else [row])
            return ()
        if self.keep:
            if self._replaces(row, kept):
                self._windows.put(end, row)
            return ()
        kept.append(row)
        if len(kept) >= 2 * self.end:  # keep the buffer bounded: the best ``end`` rows
            kept = best(kept, self.order, self.end)
        self._windows.put(end, kept)
        return ()

    def _replaces(self, row: Row, kept: Row) -> bool:
        at, before = row[self.time_index], kept[self.time_index]
        if at is None:
            return False
        if before is None:
            return True
        if self.keep == "last":
            return epoch_millis(at) >= epoch_millis(before)
        return epoch_millis(at) < epoch_millis(before)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        end = timestamp + 1
        kept = self._windows.get(end)
        if kept is None:
            return ()
        self._windows.remove(end)
        if self.keep:
            return ((INSERT, kept),)
        ranked = best(kept, self.order, self.end)
        out = []
        for rank, row in enumerate(ranked, start=1):
            if rank >= self.start:
                out.append((INSERT, (*row, rank) if self.output_rank_number else row))
        return out
