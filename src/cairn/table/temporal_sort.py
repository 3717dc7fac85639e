"""``ORDER BY rowtime [, more]`` on a stream: rows released in time order by the watermark
(Flink's ``RowTimeSortOperator``).

Invariant: a row waits in keyed map state (one key: the sort runs on one subtask) under its
time until the watermark passes that time; then every row at or below the watermark goes out
ordered by time and, within a time, by the other sort keys (``order``: positions and
directions after the first). A row arriving at or below the watermark is late and dropped,
as Flink drops it. Insert-only in and out; the state is empty after the final watermark.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.operators import INSERT
from cairn.table.plan import SortField
from cairn.table.timestamps import epoch_millis

__all__ = ["TemporalSortFunction", "sort_key"]


class _Reversed:
    """Orders the other way (a descending sort key)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and bool(self.value == other.value)


def sort_key(order: Sequence[SortField]) -> Any:
    """A key function ordering rows by ``order`` (NULLs first ascending, last descending, or
    as each field says)."""

    def key(row: tuple[Any, ...]) -> tuple[Any, ...]:
        out: list[Any] = []
        for f in order:
            value = row[f.index]
            null_rank = (
                (0 if f.nulls_first else 1) if value is None else (1 if f.nulls_first else 0)
            )
            item = (null_rank, 0 if value is None else value)
            out.append(
                item if f.ascending else (null_rank, _Reversed(0 if value is None else value))
            )
        return tuple(out)

    return key


class TemporalSortFunction(KeyedProcessFunction[Any, Any, Any]):
    """See the module's invariant; ``time_index``: the rowtime column."""

    def __init__(self, time_index: int, order: Sequence[SortField]) -> None:
        self.time_index = time_index
        self.order = tuple(order)

    def open(self, runtime_context: Any) -> None:
        pickled = Types.PICKLED_BYTE_ARRAY()
        self._rows = runtime_context.get_map_state(
            MapStateDescriptor("temporal-sort", Types.LONG(), pickled)
        )
        self._key = sort_key(self.order)

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("a temporal sort takes insert-only input")
        at = row[self.time_index]
        if at is None:
            return ()
        t = epoch_millis(at)
        timers = ctx.timer_service()
        if t <= timers.current_watermark():
            return ()  # late: Flink drops it
        waiting = self._rows.get(t) or []
        waiting.append(row)
        self._rows.put(t, waiting)
        timers.register_event_time_timer(t)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        watermark = ctx.timer_service().current_watermark()
        out: list[Any] = []
        for t in sorted(self._rows.keys()):
            if t > watermark:
                break
            rows = self._rows.get(t)
            self._rows.remove(t)
            out.extend((INSERT, r) for r in sorted(rows, key=self._key))
        return out
