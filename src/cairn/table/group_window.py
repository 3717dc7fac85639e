"""The group window aggregate: ``window(Tumble/Slide/Session ...).group_by(keys, w)``.

Invariant: per key, each open window's accumulators live in keyed map state (window start →
``[end, row count, accumulators]``), so they are checkpointed, restored and rescaled like any
keyed state; a window fires once, when the watermark passes its end (an event-time timer at
``end - 1``, Flink's ``maxTimestamp``), emitting one insert-only row: the keys, the
window properties asked for (start, end, rowtime), then the aggregates; a row whose windows
have all fired already is late and dropped, as Flink drops it with no allowed lateness.
Session windows of a key that come to overlap are merged (accumulators merged) before they
fire. The windows of a cumulating window share their start: they are kept by their end
instead (its entry ``[end, ...]`` all the same), the start found again from the end.
On a processing-time attribute a row belongs to the windows of the operator's clock
when it arrives (not its column's value, as Flink) and a window fires on a processing-time
timer at ``end - 1``; nothing is late. At the end of a bounded input the windows still open
do not fire: the task quiesces its processing-time timers, as Flink's does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.aggregates import Accumulator, accumulator_for
from cairn.table.analysis import AggCall
from cairn.table.group_window_code import WindowAggCode, has_window_code
from cairn.table.operators import INSERT, open_functions
from cairn.table.timestamps import epoch_millis, timestamp_of_millis
from cairn.table.window import GroupWindow, window_start, windows_of
from cairn.table.window_entry_cache import CachedWindowBatch

__all__ = ["GroupWindowAggFunction", "window_property"]


class GroupWindowAggFunction(KeyedProcessFunction[Any, Any, Any]):
    """Windows per key, aggregated incrementally, emitted when the watermark passes them."""

    def __init__(
        self,
        window: GroupWindow,
        time_index: int,
        calls: Sequence[AggCall],
        properties: Sequence[str],
        processing_time: bool = False,
        keys: Sequence[int] | None = None,
    ) -> None:
        self.window = window
        self.time_index = time_index
        self.calls = tuple(calls)
        self.properties = tuple(properties)
        self.processing_time = processing_time
        # The key columns (what the key selector picks): given, rows may go a batch at a time
        self.keys = None if keys is None else tuple(keys)

    def open(self, runtime_context: Any) -> None:
        self._accumulators: list[Accumulator] = [accumulator_for(c) for c in self.calls]
        self._args = [
            -2 if a.takes_row else c.arg
            for a, c in zip(self._accumulators, self.calls, strict=True)
        ]
        self._windows = runtime_context.get_map_state(
            MapStateDescriptor("group-window", Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )
        open_functions([c.wrapper for c in self.calls if c.wrapper is not None], runtime_context)
        self._window_bounds: tuple[int, int] | None = None  # the last fired window's
        self._window: tuple[Any, ...] = ()
        if self.keys is not None and has_window_code(self.window, self.processing_time):
            # Whole stamped batches through generated code (same state, same timers).
            code = WindowAggCode(self.keys, self.calls, self.time_index, self.window)
            batch = CachedWindowBatch(code.function, self._windows)
            self.keyed_batch = batch.run
            self.keyed_flush = batch.write_back

    def _add(self, accs: list[Any], row: tuple[Any, ...]) -> None:
        for i, (agg, arg) in enumerate(zip(self._accumulators, self._args, strict=True)):
            accs[i] = agg.add(accs[i], row if arg == -2 else None if arg < 0 else row[arg])

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("a group window aggregate takes insert-only input")
        timers = ctx.timer_service()
        if self.processing_time:
            timestamp = timers.current_processing_time()
            watermark = timestamp - 1  # a window ending now or before fired already
        else:
            at = row[self.time_index]
            if at is None:
                return ()  # no time: no window (Flink drops rows with a NULL rowtime)
            timestamp = epoch_millis(at)
            watermark = timers.current_watermark()
        cumulate = self.window.kind == "cumulate"
        for start, end in windows_of(self.window, timestamp):
            if end - 1 <= watermark:
                continue  # late: this window fired already
            slot = end if cumulate else start
            if self.window.kind == "session":
                start, end, entry = self._merge_sessions(start, end, timers)
                slot = start
            else:
                entry = self._windows.get(slot)
                if entry is None:
                    entry = [end, 0, [a.create() for a in self._accumulators]]
                    self._register(timers, end - 1)
            self._add(entry[2], row)
            entry[1] += 1
            self._windows.put(slot, entry)
        return ()

    def _merge_sessions(self, start: int, end: int, timers: Any) -> tuple[int, int, list[Any]]:
        """The session ``[start, end)`` merged with every open session of the key it overlaps."""
        overlapping = [
            (other_start, other)
            for other_start, other in self._windows.items()
            if other_start <= end and start <= other[0]  # touching or overlapping, as Flink
        ]
        if len(overlapping) == 1:  # the common case: a row extends the key's one session
            other_start, other = overlapping[0]
            other_end = other[0]
            if end > other_end:
                if self.processing_time:
                    timers.delete_processing_time_timer(other_end - 1)
                else:
                    timers.delete_event_time_timer(other_end - 1)
                self._register(timers, end - 1)
                other[0] = end
            if start < other_start:
                self._windows.remove(other_start)
                return start, other[0], other
            return other_start, other[0], other
        merged: list[Any] = [end, 0, [a.create() for a in self._accumulators]]
        for other_start in list(self._windows.keys()):
            other = self._windows.get(other_start)
            other_end = other[0]
            if other_start <= end and start <= other_end:  # touching or overlapping, as Flink
                if self.processing_time:
                    timers.delete_processing_time_timer(other_end - 1)
                else:
                    timers.delete_event_time_timer(other_end - 1)
                self._windows.remove(other_start)
                start, end = min(start, other_start), max(end, other_end)
                merged[1] += other[1]
                merged[2] = [
                    agg.merge(acc, o)
                    for agg, acc, o in zip(self._accumulators, merged[2], other[2], strict=True)
                ]
        merged[0] = end
        self._register(timers, end - 1)
        return start, end, merged

    def _register(self, timers: Any, at: int) -> None:
        if self.processing_time:
            timers.register_processing_time_timer(at)
        else:
            timers.register_event_time_timer(at)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        """Emit the key's windows ending at ``timestamp + 1``: a tumbling or sliding window
        is found by its start; sessions (whose ends vary) by a scan, earliest first."""
        key = ctx.get_current_key()
        if self.window.kind == "cumulate":
            found = self._windows.get(timestamp + 1)
            if found is None:
                return ()
            self._windows.remove(timestamp + 1)
            start = window_start(timestamp, self.window.offset_ms, self.window.size_ms)
            return ((INSERT, key + self._output(start, found)),)
        if self.window.kind != "session":
            start = timestamp + 1 - self.window.size_ms
            entry = self._windows.get(start)
            if entry is None:
                return ()
            self._windows.remove(start)
            return ((INSERT, key + self._output(start, entry)),)
        out = []
        for start in sorted(self._windows.keys()):
            entry = self._windows.get(start)
            if entry[0] - 1 != timestamp:
                continue
            self._windows.remove(start)
            out.append((INSERT, key + self._output(start, entry)))
        return out

    def _output(self, start: int, entry: list[Any]) -> tuple[Any, ...]:
        """A fired window's columns after the key: its properties, then its aggregates."""
        end = entry[0]
        results = tuple(a.result(acc) for a, acc in zip(self._accumulators, entry[2], strict=True))
        if self._window_bounds != (start, end):  # the keys firing one window share its columns
            self._window_bounds = (start, end)
            self._window = tuple(window_property(p, start, end) for p in self.properties)
        return self._window + results


def window_property(name: str, start: int, end: int) -> Any:
    """The window property ``name`` (``start``, ``end``, ``rowtime``/``proctime``) of the
    window ``[start, end)``."""
    if name == "start":
        return timestamp_of_millis(start)
    if name == "end":
        return timestamp_of_millis(end)
    return timestamp_of_millis(end - 1)  # rowtime, or a processing-time window's proctime
