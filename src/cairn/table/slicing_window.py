"""The sliding and cumulating window aggregate kept by slices (Flink's
``SlicingWindowOperator`` with its ``SliceSharedWindowAggProcessor``).

Invariant: per key, each slice (``slices.SliceAssigner``) that holds rows keeps ONE entry of
keyed map state, ``slice end -> accumulators``; a row is added to its own slice only, once.
Window ``[start, end)`` fires when the watermark passes ``end - 1`` (an event-time timer,
registered when the first slice of the key in it was created — the same timers, in the same
order, as ``GroupWindowAggFunction`` registers per window), and its result is the merge of
its slices' accumulators: the same row, keys, properties and aggregates as the per-window
aggregate. A row whose slice's windows have all fired is late and dropped; a row whose
earlier windows fired goes to the later ones only, since a fired window never reads a slice
again. A sliding window's slice goes when its last window fires. A cumulating window's
slices are folded, as each of its windows fires, into the period's first slice (which all
its windows span), so a window merges the slices added since the previous one; the period's
last window removes them all. On a processing-time attribute a row goes to the slice of the
operator's clock and windows fire on processing-time timers, as the per-window aggregate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.aggregates import Accumulator, accumulator_for
from cairn.table.analysis import AggCall
from cairn.table.group_window import window_property
from cairn.table.operators import INSERT, open_functions
from cairn.table.slices import SliceAssigner
from cairn.table.slicing_window_code import MergeCode, SliceAggCode, register_windows
from cairn.table.timestamps import epoch_millis
from cairn.table.window import GroupWindow
from cairn.table.window_entry_cache import CachedWindowBatch

__all__ = ["SLICES_STATE", "SlicingWindowAggFunction"]

#: The map state's name: not the per-window aggregate's (``group-window``), whose entries
#: are whole windows.
SLICES_STATE = "window-slices"


class SlicingWindowAggFunction(KeyedProcessFunction[Any, Any, Any]):
    """Sliding or cumulating windows per key, kept as slices, emitted when the watermark
    passes them."""

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
        self.slices = SliceAssigner.of(window)
        self.time_index = time_index
        self.calls = tuple(calls)
        self.properties = tuple(properties)
        self.processing_time = processing_time
        self.keys = None if keys is None else tuple(keys)

    def open(self, runtime_context: Any) -> None:
        self._accumulators: list[Accumulator] = [accumulator_for(c) for c in self.calls]
        self._args = [
            -2 if a.takes_row else c.arg
            for a, c in zip(self._accumulators, self.calls, strict=True)
        ]
        self._slices = runtime_context.get_map_state(
            MapStateDescriptor(SLICES_STATE, Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )
        open_functions([c.wrapper for c in self.calls if c.wrapper is not None], runtime_context)
        self._merge = MergeCode(self.calls)
        self._window_end: int | None = None  # the last fired window's end, and its columns
        self._window: tuple[Any, ...] = ()
        if self.keys is not None and not self.processing_time:
            # Whole stamped batches through generated code (same state, same timers).
            code = SliceAggCode(self.keys, self.calls, self.time_index, self.slices)
            batch = CachedWindowBatch(code.function, self._slices)
            self.keyed_batch = batch.run
            self.keyed_flush = batch.write_back

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("a group window aggregate takes insert-only input")
        timers = ctx.timer_service()
        if self.processing_time:
            timestamp = timers.current_processing_time()
            watermark = timestamp - 1  # a window ending now or before fired already
            register = timers.register_processing_time_timer
        else:
            at = row[self.time_index]
            if at is None:
                return ()  # no time: no window (Flink drops rows with a NULL rowtime)
            timestamp = epoch_millis(at)
            watermark = timers.current_watermark()
            register = timers.register_event_time_timer
        slices = self.slices
        end = slices.slice_end(timestamp)
        if slices.last_window_end(end) - 1 <= watermark:
            return ()  # late: every window of its slice fired already
        accs = self._slices.get(end)
        if accs is None:
            accs = [a.create() for a in self._accumulators]
            previous = self._slices.contains(end - slices.slice_ms)
            register_windows(slices, end, watermark, previous, register)
        for i, (agg, arg) in enumerate(zip(self._accumulators, self._args, strict=True)):
            accs[i] = agg.add(accs[i], row if arg == -2 else None if arg < 0 else row[arg])
        self._slices.put(end, accs)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        """Emit the key's window ending at ``timestamp + 1``, merged from its slices."""
        end = timestamp + 1
        slices = self.slices
        start = slices.window_start(end)
        kept = [(e, accs) for e, accs in sorted(self._slices.items()) if start < e <= end]
        if not kept:
            return ()
        code = self._merge
        if slices.cumulate:
            merged = self._fold(start, end, kept)
        else:
            merged = code.merge_into(code.fresh(), [accs for _, accs in kept])
            expiring = start + slices.window_step  # slices up to here have no later window
            for slice_end, _ in kept:
                if slice_end <= expiring:
                    self._slices.remove(slice_end)
        if self._window_end != end:  # every key's window ending here: the same columns
            self._window_end = end
            self._window = tuple(window_property(p, start, end) for p in self.properties)
        return ((INSERT, ctx.get_current_key() + self._window + code.results(merged)),)

    def _fold(self, start: int, end: int, kept: list[tuple[int, list[Any]]]) -> list[Any]:
        """A cumulating window's accumulators: the period's first slice with the later
        slices up to ``end`` folded into it (kept there, or all removed at the period's
        end)."""
        state, first = self._slices, start + self.slices.slice_ms
        folded = kept[0][1] if kept[0][0] == first else self._merge.fresh()
        self._merge.merge_into(folded, [accs for e, accs in kept if e != first])
        for slice_end, _ in kept:
            if slice_end != first:
                state.remove(slice_end)
        if end == start + self.slices.size_ms:
            state.remove(first)
        else:
            state.put(first, folded)
        return folded
