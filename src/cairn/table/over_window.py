"""Over windows (``table.over_window(Over.partition_by(...).order_by(...).preceding(...))``):
an aggregate over each row's neighbours in event-time order.

Invariant: per partition key, rows wait in keyed map state until the watermark passes their
timestamp (Flink processes an over window in event-time order, so a row is final only then);
then they are processed in timestamp order against the window kept in keyed state — the
last ``n + 1`` rows (ROWS ... PRECEDING), the rows within ``range`` of the current timestamp
(RANGE ... PRECEDING; rows with the same timestamp are peers and see the same result), or all
rows so far (UNBOUNDED) — adding each row to the accumulators and retracting the rows that
leave, and each row is emitted once, insert-only, with the aggregates appended. Rows behind
the watermark when they arrive are late and dropped, as in Flink.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import MapStateDescriptor, ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.aggregates import Accumulator, accumulator_for
from cairn.table.analysis import AggCall
from cairn.table.operators import INSERT, open_functions
from cairn.table.timestamps import epoch_millis
from cairn.table.window import UNBOUNDED, OverWindow

__all__ = ["OverAggFunction"]


class OverAggFunction(KeyedProcessFunction[Any, Any, Any]):
    """Each row once the watermark passes it, with aggregates over its window."""

    def __init__(self, window: OverWindow, time_index: int, calls: Sequence[AggCall]) -> None:
        self.window = window
        self.time_index = time_index
        self.calls = tuple(calls)

    def open(self, runtime_context: Any) -> None:
        self._accumulators: list[Accumulator] = [accumulator_for(c) for c in self.calls]
        self._args = [
            -2 if a.takes_row else c.arg
            for a, c in zip(self._accumulators, self.calls, strict=True)
        ]
        pickled = Types.PICKLED_BYTE_ARRAY()
        self._pending = runtime_context.get_map_state(
            MapStateDescriptor("over-pending", Types.LONG(), pickled)
        )
        self._frame = runtime_context.get_state(ValueStateDescriptor("over-frame", pickled))
        open_functions([c.wrapper for c in self.calls if c.wrapper is not None], runtime_context)

    def _results(self, accs: list[Any]) -> tuple[Any, ...]:
        return tuple(a.result(acc) for a, acc in zip(self._accumulators, accs, strict=True))

    def _apply(self, accs: list[Any], row: tuple[Any, ...], adding: bool) -> None:
        for i, (agg, arg) in enumerate(zip(self._accumulators, self._args, strict=True)):
            v = row if arg == -2 else None if arg < 0 else row[arg]
            accs[i] = agg.add(accs[i], v) if adding else agg.retract(accs[i], v)

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("an over window aggregate takes insert-only input")
        at = row[self.time_index]
        if at is None:
            return ()
        timestamp = epoch_millis(at)
        timers = ctx.timer_service()
        if timestamp <= timers.current_watermark():
            return ()  # late
        waiting = self._pending.get(timestamp)
        if waiting is None:
            waiting = []
            timers.register_event_time_timer(timestamp)
        waiting.append(row)
        self._pending.put(timestamp, waiting)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        rows = self._pending.get(timestamp)
        if rows is None:
            return ()
        self._pending.remove(timestamp)
        frame = self._frame.value() or [[], [a.create() for a in self._accumulators]]
        window, accs = frame
        out: list[Any] = []
        w = self.window
        if w.kind == "rows":
            for row in rows:
                window.append((timestamp, row))
                self._apply(accs, row, True)
                if w.lower != UNBOUNDED and len(window) > w.lower + 1:
                    self._apply(accs, window.pop(0)[1], False)
                results = tuple(
                    a.result(acc) for a, acc in zip(self._accumulators, accs, strict=True)
                )
                out.append((INSERT, row + results))
        else:
            for row in rows:  # peers: all rows of this timestamp first
                window.append((timestamp, row))
                self._apply(accs, row, True)
            if w.lower != UNBOUNDED:
                while window and window[0][0] < timestamp - w.lower:
                    self._apply(accs, window.pop(0)[1], False)
            results = self._results(accs)
            out.extend((INSERT, row + results) for row in rows)
        if w.lower == UNBOUNDED:
            window.clear()  # nothing ever leaves: only the accumulators are needed
        self._frame.update([window, accs])
        return out
