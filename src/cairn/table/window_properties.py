"""Which columns of a plan are a window's ``window_start`` and ``window_end`` (Flink's
``RelWindowProperties``): what makes a Top-N, a deduplication or a join a *window* one.

Invariant: pure and read-only. A window TVF's output has them (its last three columns:
``window_start``, ``window_end``, ``window_time``); a window aggregate's output has those of
its properties it computes (``start``, ``end``, ``rowtime``); a calc keeps them where it
forwards them unchanged; a window Top-N or deduplication keeps its input's. Anything else has
none (``None``): both a start and an end must be there.

>>> from cairn.table.analysis import Columns
>>> from cairn.table.plan import Values, WindowTableFunction
>>> from cairn.table.types import DataTypes
>>> from cairn.table.window import Tumble
>>> rows = Values((), Columns.of([("ts", DataTypes.TIMESTAMP(3)), ("v", DataTypes.INT())]))
>>> w = Tumble.over(1000).on("ts").alias("w$")
>>> t = DataTypes.TIMESTAMP(3, False)
>>> cols = Columns.of([*zip(rows.columns.names, rows.columns.types), ("window_start", t),
...                    ("window_end", t), ("window_time", t)])
>>> tvf = WindowTableFunction(columns=cols, input=rows, window=w, time_index=0)
>>> found = window_columns(tvf)
>>> found.start, found.end, found.time
(2, 3, 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn.table.plan import (
    Calc,
    PlanNode,
    WindowAggregate,
    WindowDeduplicate,
    WindowRank,
    WindowTableFunction,
)
from cairn.table.time_attributes import is_proctime

__all__ = ["WindowColumns", "window_columns"]


@dataclass(frozen=True)
class WindowColumns:
    """A window's columns in a node's output (``time``: its ``window_time``, or None;
    ``processing``: a processing-time window)."""

    window: Any
    start: int
    end: int
    time: int | None = None
    processing: bool = False


def window_columns(node: PlanNode) -> WindowColumns | None:
    """The window columns of ``node``'s output, or None when it has no window start and end."""
    if isinstance(node, WindowTableFunction):
        n = len(node.input.columns)
        processing = is_proctime(node.input.columns.types[node.time_index])
        return WindowColumns(node.window, n, n + 1, n + 2, processing)
    if isinstance(node, WindowAggregate):
        at = {p: len(node.keys) + i for i, p in enumerate(node.properties)}
        if "start" not in at or "end" not in at:
            return None
        processing = is_proctime(node.input.columns.types[node.time_index])
        return WindowColumns(node.window, at["start"], at["end"], at.get("rowtime"), processing)
    if isinstance(node, WindowRank | WindowDeduplicate):
        return window_columns(node.input)
    if isinstance(node, Calc):
        inner = window_columns(node.input)
        if inner is None or node.projections is None:
            return inner
        forwarded: dict[int, int] = {}
        for position, rex in enumerate(node.projections):
            if rex.kind == "input":
                forwarded.setdefault(rex.index, position)
        if inner.start not in forwarded or inner.end not in forwarded:
            return None
        time = forwarded.get(inner.time) if inner.time is not None else None
        start, end = forwarded[inner.start], forwarded[inner.end]
        return WindowColumns(inner.window, start, end, time, inner.processing)
    return None
