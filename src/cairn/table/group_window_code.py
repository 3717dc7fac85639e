"""Generated code of an event-time tumbling or sliding group window: a batch per call.

Invariant: the generated ``window_agg`` does for each record, in order, what
``GroupWindowAggFunction.process_element`` does for a tumbling or sliding event-time window:
refuse a non-insert row, skip a row without time, and add the row to each of its windows that
the watermark has not passed yet — the key's map state entry ``start -> [end, row count,
accumulators]``, created with an event-time timer at ``end - 1`` on its first row. An entry
read once stays in a cache, keyed by ``(key, start)``, that the operator writes back into the
map state before any timer fires and before any snapshot, so what fires and what is saved is
what the row path would have stored; the watermark is the same for a whole batch
(watermarks arrive between batches). A naive
``datetime`` is read as UTC milliseconds without a call (``timestamps.epoch_millis`` for
anything else).

>>> from cairn.table.analysis import AggCall
>>> from cairn.table.types import DataTypes
>>> from cairn.table.window import GroupWindow
>>> calls = [AggCall("count_star", -1, DataTypes.BIGINT(False))]
>>> source = window_agg_source((0,), calls, 1, GroupWindow("tumble", size_ms=1000))
>>> print(source.splitlines()[12])
        start = ts - ts % 1000
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

from cairn.table.analysis import AggCall
from cairn.table.group_agg_code import (
    accumulate_lines,
    accumulator_namespace,
    creates_source,
    key_source,
)
from cairn.table.timestamps import epoch_millis
from cairn.table.window import GroupWindow, windows_of

__all__ = ["WindowAggCode", "has_window_code", "window_agg_source"]

#: ``window_agg(records, set_key, get, register, watermark, cache)``: ``cache`` maps
#: ``(key, window start)`` to the entry being added to, written back by the caller
#: (``GroupWindowAggFunction.keyed_flush``) before timers fire and before a snapshot.
WindowAggBatch = Callable[..., None]


def has_window_code(window: GroupWindow, processing_time: bool) -> bool:
    """Whether ``window`` runs through generated code (event-time tumble and slide; session
    windows merge, processing-time ones read the clock: their rows go one by one)."""
    return not processing_time and window.kind in ("tumble", "slide")


def window_agg_source(
    keys: Sequence[int], calls: Sequence[AggCall], time_index: int, window: GroupWindow
) -> str:
    """The source of ``window_agg`` for ``window`` on column ``time_index``."""
    if window.kind == "tumble":
        shifted = f"(ts - {window.offset_ms})" if window.offset_ms else "ts"
        windows = [
            f"        start = ts - {shifted} % {window.size_ms}",
            f"        for start, end in ((start, start + {window.size_ms}),):",
        ]
    else:
        windows = ["        for start, end in _windows_of(_window, ts):"]
    lines = [
        "def window_agg(records, set_key, get, register, watermark, cache):",
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
        *windows,
        "            if end - 1 <= watermark:",
        "                continue  # late: this window fired already",
        "            entry = cache.get((key, start))",
        "            if entry is None:",
        "                set_key(key)",
        "                entry = get(start)",
        "                if entry is None:",
        f"                    entry = [end, 0, {creates_source(calls)}]",
        "                    register(end - 1)",
        "                cache[key, start] = entry",
        "            accs = entry[2]",
        *(f"            {line}" for line in accumulate_lines(calls, "accs", adding=True)),
        "            entry[1] += 1",
    ]
    return "\n".join(lines)


class WindowAggCode:
    """``window_agg`` compiled once per subtask, with what it calls."""

    def __init__(
        self, keys: Sequence[int], calls: Sequence[AggCall], time_index: int, window: GroupWindow
    ) -> None:
        namespace: dict[str, Any] = {
            **accumulator_namespace(calls),
            "_datetime": datetime.datetime,
            "_EPOCH": datetime.datetime(1970, 1, 1),
            "_MILLISECOND": datetime.timedelta(milliseconds=1),
            "_epoch_millis": epoch_millis,
            "_windows_of": windows_of,
            "_window": window,
        }
        source = window_agg_source(keys, calls, time_index, window)
        exec(compile(source, "<cairn-group-window>", "exec"), namespace)
        self.function: WindowAggBatch = namespace["window_agg"]
