"""Generated code of an event-time sliding or cumulating window aggregate kept by slices:
a batch per call.

Invariant: the generated ``slice_agg`` does for each record, in order, what
``SlicingWindowAggFunction.process_element`` does on event time: refuse a non-insert row,
skip a row without time or whose slice's last window the watermark has passed, and add the
row to its ONE slice's accumulators — the key's map state entry ``slice end ->
accumulators``; a slice's first row registers the event-time timers (``end - 1``) of its
windows that have not fired, but for those its previous slice's creation registered
(``opened``). An entry read once stays in a cache, keyed by ``(key, slice end)``, that the
operator writes back into the map state before any timer fires and before any snapshot, so
what fires and what is saved is what the row path would have stored; the watermark is the
same for a whole batch (watermarks arrive between batches).

>>> from cairn.table.aggregates import accumulator_for, unfiltered
>>> from cairn.table.analysis import AggCall
>>> from cairn.table.types import DataTypes
>>> from cairn.table.window import Slide
>>> calls = [AggCall("count_star", -1, DataTypes.BIGINT(False))]
>>> source = slice_agg_source((0,), calls, 1, SliceAssigner.of(Slide.over(10).every(2)))
>>> print(source.splitlines()[12])
        end = ts - ts % 2 + 2
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cairn.table.aggregates import accumulator_for, unfiltered
from cairn.table.analysis import AggCall
from cairn.table.group_agg_code import (
    accumulate_lines,
    accumulator_namespace,
    creates_source,
    key_source,
)
from cairn.table.slices import SliceAssigner
from cairn.table.timestamps import epoch_millis

__all__ = ["MergeCode", "SliceAggCode", "merge_source", "register_windows", "slice_agg_source"]

#: ``slice_agg(records, set_key, get, register, watermark, cache)``: ``cache`` maps
#: ``(key, slice end)`` to the accumulators being added to, written back by the caller
#: (``SlicingWindowAggFunction.keyed_flush``) before timers fire and before a snapshot.
SliceAggBatch = Callable[..., None]


def register_windows(
    slices: SliceAssigner,
    end: int,
    watermark: int,
    previous_open: bool,
    register: Callable[[int], None],
) -> None:
    """Register the timers of the windows of the new slice ending at ``end`` that have not
    fired, earliest first; ``previous_open``: the key's previous slice is kept, and its
    creation registered the windows both are part of."""
    first = slices.first_open_window_end(end, watermark)
    if previous_open:
        first = max(first, slices.last_window_end(end - slices.slice_ms) + slices.window_step)
    for window_end in range(first, slices.last_window_end(end) + 1, slices.window_step):
        register(window_end - 1)


def _shifted(name: str, offset: int) -> str:
    return f"({name} - {offset})" if offset else name


def slice_agg_source(
    keys: Sequence[int], calls: Sequence[AggCall], time_index: int, slices: SliceAssigner
) -> str:
    """The source of ``slice_agg`` for ``slices`` on column ``time_index``."""
    piece, offset = slices.slice_ms, slices.offset_ms
    period = slices.size_ms if slices.cumulate else slices.window_step
    lines = [
        "def slice_agg(records, set_key, get, register, watermark, cache):",
        "    for kind, row in records:",
        "        if kind != 0:",
        "            raise ValueError('a group window aggregate takes insert-only input')",
        f"        at = row[{time_index}]",
        "        if at is None:",
        "            continue  # no time: no window (Flink drops rows with a NULL rowtime)",
        "        if type(at) is _datetime and at.tzinfo is None:",
        "            ts = (at - _EPOCH) // _MILLISECOND",
        "        else:",
        "            ts = _epoch_millis(at)",
        f"        key = {key_source(keys)}",
        f"        end = ts - {_shifted('ts', offset)} % {piece} + {piece}",
        f"        first = end - {piece}",
        f"        if first - {_shifted('first', offset)} % {period} + {slices.size_ms - 1}"
        " <= watermark:",
        "            continue  # late: the last window of its slice fired already",
        "        accs = cache.get((key, end))",
        "        if accs is None:",
        "            set_key(key)",
        "            accs = get(end)",
        "            if accs is None:",
        f"                accs = {creates_source(calls)}",
        "                previous = cache.get((key, first))",
        "                if previous is None:",
        "                    previous = get(first)",
        "                _opened(_slices, end, watermark, previous is not None, register)",
        "            cache[key, end] = accs",
        *(f"        {line}" for line in accumulate_lines(calls, "accs", adding=True)),
    ]
    return "\n".join(lines)


def merge_source(calls: Sequence[AggCall]) -> str:
    """The source of ``fresh()`` (new accumulators), ``merge_into(accs, slices)`` (every
    slice's accumulators merged into ``accs``, the slices left as they were) and
    ``results(accs)`` (the aggregates' values)."""
    merges = [
        accumulator_for(unfiltered(c)).inline_merge(f"accs[{i}]", f"other[{i}]", f"_agg{i}")
        for i, c in enumerate(calls)
    ]
    results = "".join(
        accumulator_for(unfiltered(c)).inline_result(f"accs[{i}]", f"_agg{i}") + ", "
        for i, c in enumerate(calls)
    )
    lines = [
        "def fresh():",
        f"    return {creates_source(calls)}",
        "def merge_into(accs, slices):",
        "    for other in slices:",
        *(f"        {line}" for line in merges),
        "    return accs",
        "def results(accs):",
        f"    return ({results})",
    ]
    return "\n".join(lines)


class SliceAggCode:
    """``slice_agg`` compiled once per subtask, with what it calls."""

    def __init__(
        self,
        keys: Sequence[int],
        calls: Sequence[AggCall],
        time_index: int,
        slices: SliceAssigner,
    ) -> None:
        namespace: dict[str, Any] = {
            **accumulator_namespace(calls),
            "_datetime": datetime.datetime,
            "_EPOCH": datetime.datetime(1970, 1, 1),
            "_MILLISECOND": datetime.timedelta(milliseconds=1),
            "_epoch_millis": epoch_millis,
            "_opened": register_windows,
            "_slices": slices,
        }
        source = slice_agg_source(keys, calls, time_index, slices)
        exec(compile(source, "<cairn-slicing-window>", "exec"), namespace)
        self.function: SliceAggBatch = namespace["slice_agg"]


class MergeCode:
    """``fresh``, ``merge_into`` and ``results`` of ``merge_source``, compiled."""

    def __init__(self, calls: Sequence[AggCall]) -> None:
        namespace = accumulator_namespace(calls)
        exec(compile(merge_source(calls), "<cairn-slice-merge>", "exec"), namespace)
        self.fresh: Callable[[], list[Any]] = namespace["fresh"]
        self.merge_into: Callable[[list[Any], Iterable[list[Any]]], list[Any]] = namespace[
            "merge_into"
        ]
        self.results: Callable[[list[Any]], tuple[Any, ...]] = namespace["results"]
