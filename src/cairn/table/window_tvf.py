"""The window TVFs not aggregated, at run time (Flink's ``AlignedWindowTableFunctionOperator``
and ``UnalignedWindowTableFunctionOperator``).

Invariant: ``TUMBLE``/``HOP``/``CUMULATE`` are row by row and keep no state — each insert row
comes out once per window it belongs to (``window.windows_of``), with ``window_start``,
``window_end`` and ``window_time`` (``end - 1 ms``) appended, right away; a row without time
belongs to no window and is dropped (on a processing-time attribute the windows are the
clock's when the row arrives). ``SESSION`` holds each partition's rows in keyed map state
(session start → ``[end, rows]``, checkpointed, restored and rescaled as any keyed state),
merges sessions that come to touch or overlap, and emits a session's rows when the watermark
passes its end; a row whose own session ``[t, t + gap)`` ends at or before the watermark is
late and dropped, as Flink drops it.

>>> from datetime import datetime
>>> from cairn.table.window import Slide
>>> hop = WindowTableFunctionFunction(Slide.over(10_000).every(5_000).on("ts"), 0, False)
>>> [row[2].second for _, row in hop.flat_map((0, (datetime(2026, 1, 1, 0, 0, 12), "a")))]
[5, 10]
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from cairn.api.functions import FlatMapFunction, KeyedProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.operators import INSERT
from cairn.table.timestamps import epoch_millis, timestamp_of_millis
from cairn.table.window import GroupWindow, windows_of

__all__ = ["SessionTableFunction", "WindowTableFunctionFunction"]


def _stamped(row: tuple[Any, ...], start: int, end: int) -> tuple[Any, ...]:
    return (
        *row,
        timestamp_of_millis(start),
        timestamp_of_millis(end),
        timestamp_of_millis(end - 1),
    )


class WindowTableFunctionFunction(FlatMapFunction):
    """``TUMBLE``/``HOP``/``CUMULATE`` over each row (``processing_time``: by the clock)."""

    def __init__(self, window: GroupWindow, time_index: int, processing_time: bool) -> None:
        self.window = window
        self.time_index = time_index
        self.processing_time = processing_time

    def flat_map(self, value: tuple[int, tuple[Any, ...]]) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("a window table function takes insert-only input")
        if self.processing_time:
            at = time.time_ns() // 1_000_000
        else:
            value_at = row[self.time_index]
            if value_at is None:
                return ()
            at = epoch_millis(value_at)
        return [(INSERT, _stamped(row, s, e)) for s, e in windows_of(self.window, at)]


class SessionTableFunction(KeyedProcessFunction[Any, Any, Any]):
    """``SESSION`` per partition key: rows held until their session closes."""

    def __init__(self, window: GroupWindow, time_index: int) -> None:
        self.window = window
        self.time_index = time_index

    def open(self, runtime_context: Any) -> None:
        self._sessions = runtime_context.get_map_state(
            MapStateDescriptor("session-rows", Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("a window table function takes insert-only input")
        at = row[self.time_index]
        if at is None:
            return ()
        timers = ctx.timer_service()
        start = epoch_millis(at)
        end = start + self.window.gap_ms
        if end - 1 <= timers.current_watermark():
            return ()  # late: its session (or one it would merge into) has fired already
        rows = [row]
        for other_start in list(self._sessions.keys()):
            other_end, other_rows = self._sessions.get(other_start)
            if other_start <= end and start <= other_end:  # touching or overlapping
                timers.delete_event_time_timer(other_end - 1)
                self._sessions.remove(other_start)
                start, end = min(start, other_start), max(end, other_end)
                rows = [*other_rows, *rows]
        self._sessions.put(start, [end, rows])
        timers.register_event_time_timer(end - 1)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        out: list[Any] = []
        for start in sorted(self._sessions.keys()):
            end, rows = self._sessions.get(start)
            if end - 1 != timestamp:
                continue
            self._sessions.remove(start)
            out.extend((INSERT, _stamped(r, start, end)) for r in rows)
        return out
