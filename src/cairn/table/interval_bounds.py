"""Recognising an interval join: the time bounds in a join's condition, and which columns of a
plan are event-time (rowtime) attributes.

Invariant: pure. ``rowtime_indexes`` follows a rowtime attribute from the ``WATERMARK`` that
declares it (or a DataStream's ``rowtime`` with ``SOURCE_WATERMARK()``) through what forwards
it unchanged (a calc's plain column reference, a union of attributes at the same position, an
interval join, a window's ``rowtime``, an over window's input columns); anything else — a
computation on it, a regular join, an aggregate — makes it a plain timestamp, as Flink
materializes it. ``window_bounds`` finds, among a join condition's
conjuncts, a lower and an upper bound on ``left.time - right.time`` over one pair of rowtime
attributes (Flink's ``IntervalJoinUtil.extractWindowBoundsFromPredicate``): comparisons
``l.ts >= r.ts - INTERVAL ...``, ``l.ts < r.ts + INTERVAL ...`` (either side first, several
intervals added or subtracted) and ``BETWEEN``; a strict comparison moves its bound by one
millisecond. The conjuncts it used leave the condition; the others stay.

>>> from cairn.table.analysis import Columns, resolve
>>> from cairn.table.expressions import col, lit
>>> from cairn.table.types import DataTypes
>>> ts = DataTypes.TIMESTAMP(3)
>>> both = Columns.of([("a", DataTypes.INT()), ("ts", ts), ("b", DataTypes.INT()), ("rts", ts)])
>>> rex = resolve(col("ts").between(col("rts") - lit(4).hours, col("rts")), both)
>>> found = window_bounds([rex], 2, frozenset({1}), frozenset({1}))
>>> found.lower_ms, found.upper_ms, found.left_time, found.right_time, found.rest
(-14400000, 0, 1, 1, [])
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.table.analysis import Rex
from cairn.table.plan import (
    Calc,
    Deduplicate,
    IntervalJoin,
    LookupJoin,
    OverAggregate,
    PlanNode,
    StreamScan,
    TemporalJoin,
    TemporalSort,
    Union,
    WatermarkAssigner,
    WindowAggregate,
    WindowDeduplicate,
    WindowRank,
    WindowTableFunction,
)
from cairn.table.time_attributes import is_proctime

__all__ = ["WindowBounds", "rowtime_indexes", "window_bounds"]


def rowtime_indexes(node: PlanNode) -> frozenset[int]:
    """The positions of ``node``'s columns that are event-time attributes."""
    if isinstance(node, StreamScan):
        return frozenset(node.rowtimes)
    if isinstance(node, WatermarkAssigner):
        return rowtime_indexes(node.input) | {node.time_index}
    if isinstance(node, Calc):
        inner = rowtime_indexes(node.input)
        if node.projections is None:
            return inner
        return frozenset(
            i for i, p in enumerate(node.projections) if p.kind == "input" and p.index in inner
        )
    if isinstance(node, IntervalJoin):
        shift = len(node.left.columns)
        right = rowtime_indexes(node.right)
        return rowtime_indexes(node.left) | {shift + i for i in right}
    if isinstance(node, Union):
        found = [rowtime_indexes(i) for i in node.inputs]
        return frozenset.intersection(*found) if found else frozenset()
    if isinstance(node, WindowTableFunction):
        n = len(node.input.columns)
        proctime = is_proctime(node.columns.types[n + 2])
        return rowtime_indexes(node.input) | (frozenset() if proctime else {n + 2})
    if isinstance(node, WindowRank | WindowDeduplicate):
        return frozenset(i for i in rowtime_indexes(node.input) if i < len(node.input.columns))
    if isinstance(node, WindowAggregate):
        if "rowtime" not in node.properties:
            return frozenset()
        at = len(node.keys) + node.properties.index("rowtime")
        return frozenset() if is_proctime(node.columns.types[at]) else frozenset({at})
    if isinstance(node, OverAggregate | Deduplicate | LookupJoin | TemporalSort):
        return rowtime_indexes(node.input)  # the input's columns first, as they were
    if isinstance(node, TemporalJoin):
        return rowtime_indexes(node.left)  # the left's time attribute stays one, as in Flink
    return frozenset()


@dataclass(frozen=True)
class WindowBounds:
    """``left_time - right_time`` in ``[lower_ms, upper_ms]`` (column indexes in each
    input); ``rest``: the conjuncts that are not these bounds."""

    left_time: int
    right_time: int
    lower_ms: int
    upper_ms: int
    rest: list[Rex]


_FLIPPED = {
    "greater_than": "less_than",
    "greater_than_or_equal": "less_than_or_equal",
    "less_than": "greater_than",
    "less_than_or_equal": "greater_than_or_equal",
}


def _linear(rex: Rex) -> tuple[int, int] | None:
    """``rex`` as ``(column, offset_ms)``: a column plus or minus interval literals."""
    if rex.kind == "input":
        return rex.index, 0
    if rex.kind == "call" and rex.op in ("plus", "minus") and len(rex.operands) == 2:
        a, b = rex.operands
        if rex.op == "plus" and _interval(a) is not None:
            a, b = b, a
        shift = _interval(b)
        inner = _linear(a)
        if shift is None or inner is None:
            return None
        return inner[0], inner[1] + (shift if rex.op == "plus" else -shift)
    return None


def _interval(rex: Rex) -> int | None:
    if rex.kind == "literal" and rex.data_type.root == "INTERVAL" and isinstance(rex.value, int):
        return rex.value
    return None


def _comparisons(rex: Rex) -> list[tuple[str, Rex, Rex]]:
    """``rex`` as comparisons ``(op, a, b)`` (``BETWEEN`` is two), or none."""
    if rex.kind != "call":
        return []
    if rex.op in _FLIPPED and len(rex.operands) == 2:
        return [(rex.op, rex.operands[0], rex.operands[1])]
    if rex.op == "between" and len(rex.operands) == 3:
        x, low, high = rex.operands
        return [("greater_than_or_equal", x, low), ("less_than_or_equal", x, high)]
    return []


def window_bounds(
    conjuncts: list[Rex], n_left: int, left_rowtimes: frozenset[int], right_rowtimes: frozenset[int]
) -> WindowBounds | None:
    """The interval join's bounds in ``conjuncts`` (over the left's ``n_left`` columns, then
    the right's), or ``None`` when they do not bound one pair of rowtime attributes from
    both sides."""
    pair: tuple[int, int] | None = None  # (left_time, right_time)
    lower: int | None = None
    upper: int | None = None
    used: list[int] = []
    for position, c in enumerate(conjuncts):
        bounds: list[tuple[str, int, int, int]] = []
        for op, a, b in _comparisons(c):
            one, two = _linear(a), _linear(b)
            if one is None or two is None:
                break
            if one[0] >= n_left and two[0] < n_left:  # right op left: flip it
                one, two, op = two, one, _FLIPPED[op]
            if not (one[0] < n_left <= two[0]):
                break
            left_time, right_time = one[0], two[0] - n_left
            if left_time not in left_rowtimes or right_time not in right_rowtimes:
                break
            # l + c1 op r + c2  <=>  l - r op c2 - c1
            bounds.append((op, left_time, right_time, two[1] - one[1]))
        else:
            pairs = {(lt, rt) for _, lt, rt, _ in bounds}
            if len(pairs) != 1 or (pair is not None and pairs != {pair}):
                continue  # no bound, or one of another pair of times: a plain condition
            pair = next(iter(pairs))
            for op, _, _, k in bounds:
                if op.startswith("greater"):
                    bound = k if op.endswith("equal") else k + 1
                    lower = bound if lower is None else max(lower, bound)
                else:
                    bound = k if op.endswith("equal") else k - 1
                    upper = bound if upper is None else min(upper, bound)
            used.append(position)
    if pair is None or lower is None or upper is None:
        return None
    rest = [c for i, c in enumerate(conjuncts) if i not in used]
    return WindowBounds(pair[0], pair[1], lower, upper, rest)
