"""Planning the window TVFs not aggregated, and what reads their windows: window Top-N,
window deduplication and window joins.

Invariant: pure, and decided as Flink's planner decides it. A window TVF on a time attribute
gives its input's columns then ``window_start``, ``window_end`` (``TIMESTAMP(3) NOT NULL``)
and ``window_time`` (the window's time attribute). A ``ROW_NUMBER()`` partitioned by both
window columns of a windowed input (``window_properties``) is a window one: ranks ``1..1``
ordered by one event-time attribute, without the rank number, is a ``WindowDeduplicate``,
anything else a ``WindowRank``; partitioned by one of them only it is refused (a regular
Top-N of windowed rows never ends, which is not what was meant). A join of two windowed
inputs whose keys pair both window columns, of the same window, is a ``WindowJoin``.
Processing-time windows are refused by all three (not built yet).
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.table.analysis import Columns, Rex
from cairn.table.errors import ValidationError
from cairn.table.interval_bounds import rowtime_indexes
from cairn.table.plan import (
    PlanNode,
    SortField,
    WindowDeduplicate,
    WindowJoin,
    WindowRank,
    WindowTableFunction,
)
from cairn.table.time_attributes import PROCTIME_TYPE, is_proctime, materialized
from cairn.table.types import DataType, DataTypes
from cairn.table.window import GroupWindow
from cairn.table.window_properties import WindowColumns, window_columns

__all__ = ["window_join", "window_rank", "window_tvf"]

WINDOW_COLUMNS = ("window_start", "window_end", "window_time")


def window_tvf(node: PlanNode, window: GroupWindow, partition_keys: Sequence[str] = ()) -> PlanNode:
    """``TUMBLE``/``HOP``/``CUMULATE``/``SESSION(TABLE node, DESCRIPTOR(time), ...)`` as a
    table: a ``WindowTableFunction``."""
    window.check()
    columns = node.columns
    if window.time_field not in columns.names:
        raise ValidationError(f"Column '{window.time_field}' not found in the window TVF's table")
    time_index = columns.index(window.time_field)
    time_type = columns.types[time_index]
    processing = is_proctime(time_type)
    if not processing and time_index not in rowtime_indexes(node):
        raise ValidationError(
            "The window function requires the timecol to be a time attribute (a column with a"
            f" WATERMARK, or PROCTIME()), but '{window.time_field}' is {time_type}"
        )
    if window.kind != "session" and partition_keys:
        raise ValidationError(f"Only SESSION takes PARTITION BY, not {window.kind.upper()}")
    for name in [*partition_keys, *WINDOW_COLUMNS]:
        if name in WINDOW_COLUMNS and name in columns.names:
            raise ValidationError(f"The window TVF's table already has a column '{name}'")
        if name not in WINDOW_COLUMNS and name not in columns.names:
            raise ValidationError(f"PARTITION BY column '{name}' not found in the table")
    window_time: DataType = PROCTIME_TYPE
    if not processing:
        window_time = DataTypes.TIMESTAMP_LTZ(3, False)
        if time_type.root == "TIMESTAMP":
            window_time = DataTypes.TIMESTAMP(3, False)
    bound = DataTypes.TIMESTAMP(3, False)
    out = Columns.of(
        [
            *zip(columns.names, [materialized(t) for t in columns.types], strict=True),
            ("window_start", bound),
            ("window_end", bound),
            ("window_time", window_time),
        ]
    )
    return WindowTableFunction(
        columns=out,
        input=node,
        window=window,
        time_index=time_index,
        partition_keys=tuple(columns.index(k) for k in partition_keys),
    )


def _event_time(windows: WindowColumns, what: str) -> None:
    if windows.processing:
        raise ValidationError(f"{what} on a processing-time window is not built yet")


def window_rank(
    node: PlanNode,
    keys: Sequence[int],
    order: Sequence[SortField],
    start: int,
    end: int,
    output_rank_number: bool,
    rank_name: str,
) -> PlanNode | None:
    """``ROW_NUMBER()`` over a windowed ``node`` partitioned by its window: a window Top-N or
    deduplication; None when ``keys`` name no window column (a regular Top-N)."""
    windows = window_columns(node)
    if windows is None:
        return None
    named = {windows.start, windows.end} & set(keys)
    if not named:
        return None
    if len(named) == 1:
        raise ValidationError(
            "A window Top-N (or deduplication) is partitioned by both window_start and"
            " window_end: PARTITION BY window_start, window_end[, keys]"
        )
    _event_time(windows, "A window Top-N")
    rest = tuple(k for k in keys if k not in named)
    single = len(order) == 1
    if start == end == 1 and not output_rank_number and single:  # noqa: SIM102
        if order[0].index in rowtime_indexes(node):  # by time: Flink's WindowDeduplicate
            return WindowDeduplicate(
                columns=node.columns,
                input=node,
                keys=rest,
                keep_last=not order[0].ascending,
                time_index=order[0].index,
                window=windows.window,
                window_start=windows.start,
                window_end=windows.end,
            )
    columns = node.columns
    if output_rank_number:
        pairs = list(zip(columns.names, columns.types, strict=True))
        columns = Columns.of([*pairs, (rank_name, DataTypes.BIGINT(False))])
    return WindowRank(
        columns=columns,
        input=node,
        keys=rest,
        order=tuple(order),
        start=start,
        end=end,
        output_rank_number=output_rank_number,
        window=windows.window,
        window_start=windows.start,
        window_end=windows.end,
    )


def window_join(
    left: PlanNode,
    right: PlanNode,
    left_keys: Sequence[int],
    right_keys: Sequence[int],
    condition: Rex | None,
    join_type: str,
    columns: Columns,
) -> WindowJoin | None:
    """A join of two windowed inputs on their windows' start and end: a ``WindowJoin``
    (None when the keys do not pair both windows' columns: a regular join)."""
    lw, rw = window_columns(left), window_columns(right)
    if lw is None or rw is None:
        return None
    pairs = set(zip(left_keys, right_keys, strict=True))
    if (lw.start, rw.start) not in pairs or (lw.end, rw.end) not in pairs:
        return None
    _event_time(lw, "A window join")
    _event_time(rw, "A window join")
    if _spec(lw.window) != _spec(rw.window):
        raise ValidationError(
            "A window join needs both inputs windowed alike: "
            f"{lw.window.describe()} and {rw.window.describe()}"
        )
    return WindowJoin(
        columns=columns,
        left=left,
        right=right,
        left_keys=tuple(left_keys),
        right_keys=tuple(right_keys),
        condition=condition,
        join_type=join_type,
        window=lw.window,
        left_window=(lw.start, lw.end),
        right_window=(rw.start, rw.end),
    )


def _spec(window: GroupWindow) -> tuple[str, int, int, int, int]:
    """What makes two windows the same windows (not their time column or alias)."""
    return (window.kind, window.size_ms, window.slide_ms, window.gap_ms, window.offset_ms)
