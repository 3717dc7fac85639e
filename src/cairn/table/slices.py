"""Slices of sliding and cumulating windows (Flink's ``SliceAssigners.hopping`` and
``cumulative``): which slice a row goes to, which windows a slice is part of, which slices
a window is made of, and whether an aggregate can be computed from slices at all.

Invariant: pure. Slices are the windows' common pieces, ``slice_ms`` long (a sliding
window's: ``gcd(size, slide)``; a cumulating window's: its step), ``[end - slice_ms, end)``
and named by their end, aligned to the window's offset; every window is the union of the
slices it spans, so a row is kept in ONE slice's accumulators and a window's result is the
merge of its slices' accumulators — equal to adding the rows to every window one by one
only when every aggregate's ``merge`` is exact and order-free (``sliceable``). A slice
is part of the windows ending ``first_window_end(end) .. last_window_end(end)`` (every
``window_step`` ms); it is no longer needed once its last window fired.

>>> from cairn.table.window import Cumulate, Slide
>>> hop = SliceAssigner.of(Slide.over(10_000).every(4_000))
>>> hop.slice_ms, hop.slice_end(3_500), hop.first_window_end(4_000), hop.last_window_end(4_000)
(2000, 4000, 6000, 10000)
>>> hop.window_start(10_000), list(hop.slices_of(10_000))
(0, [2000, 4000, 6000, 8000, 10000])
>>> cumulate = SliceAssigner.of(Cumulate.over(6_000).every(2_000))
>>> cumulate.first_window_end(4_000), cumulate.last_window_end(4_000), cumulate.window_start(4_000)
(4000, 6000, 0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cairn.table.analysis import AggCall
from cairn.table.window import GroupWindow, window_start

__all__ = ["SliceAssigner", "sliceable"]

#: Aggregates whose accumulators merge exactly, whatever the order rows arrived in (a
#: floating-point sum does not: slices add its values in another order).
_MERGEABLE = {"count_star", "count", "min", "max", "count_distinct"}
_EXACT_NUMBERS = {"sum", "sum0", "avg", "stddev_pop", "stddev_samp", "var_pop", "var_samp"}


def _merges_exactly(call: AggCall) -> bool:
    if call.function in _MERGEABLE:
        return True
    if call.function in _EXACT_NUMBERS:
        arg_type = call.arg_type if call.arg_type is not None else call.data_type
        return arg_type.root not in ("FLOAT", "DOUBLE") and call.data_type.root not in (
            "FLOAT",
            "DOUBLE",
        )
    if call.function == "udaf":
        # A user's aggregate with its own ``merge`` (PyFlink's contract: order-free); a
        # vectorized one hands its function the rows in merge order, not arrival order.
        from cairn.table.udf import AggregateFunction, PandasAggregateFunction

        function = call.wrapper.function
        own_merge = type(function).merge is not AggregateFunction.merge
        return own_merge and not isinstance(function, PandasAggregateFunction)
    return False  # FIRST_VALUE, LAST_VALUE, LISTAGG: arrival order matters


def sliceable(window: GroupWindow, calls: Sequence[AggCall]) -> bool:
    """Whether the window aggregate of ``calls`` over ``window`` is kept by slices: a
    sliding window whose slide is shorter than its size, or a cumulating window, and every
    call merges exactly.

    >>> from cairn.table.types import DataTypes
    >>> from cairn.table.window import Slide, Tumble
    >>> n = AggCall("count_star", -1, DataTypes.BIGINT(False))
    >>> total = AggCall("sum", 0, DataTypes.DOUBLE(), DataTypes.DOUBLE())
    >>> hop = Slide.over(10_000).every(2_000)
    >>> sliceable(hop, [n]), sliceable(hop, [n, total]), sliceable(Tumble.over(10), [n])
    (True, False, False)
    """
    if window.kind == "slide":
        shared = window.slide_ms < window.size_ms
    else:
        shared = window.kind == "cumulate"
    return shared and all(_merges_exactly(c) for c in calls)


@dataclass(frozen=True)
class SliceAssigner:
    """The slices of one sliding (``cumulate`` False) or cumulating window."""

    size_ms: int
    slice_ms: int
    window_step: int  # between two window ends sharing slices: the slide, or the step
    offset_ms: int
    cumulate: bool

    @staticmethod
    def of(window: GroupWindow) -> SliceAssigner:
        if window.kind == "cumulate":
            step = window.slide_ms
            return SliceAssigner(window.size_ms, step, step, window.offset_ms, True)
        piece = math.gcd(window.size_ms, window.slide_ms)
        return SliceAssigner(window.size_ms, piece, window.slide_ms, window.offset_ms, False)

    def slice_end(self, timestamp: int) -> int:
        """The end of the slice holding ``timestamp``."""
        return window_start(timestamp, self.offset_ms, self.slice_ms) + self.slice_ms

    def first_window_end(self, slice_end: int) -> int:
        """The end of the earliest window the slice is part of (after ``last_window_end``
        when it is part of none: a sliding window's gap)."""
        if self.cumulate:
            return slice_end
        return slice_end + (self.offset_ms + self.size_ms - slice_end) % self.window_step

    def last_window_end(self, slice_end: int) -> int:
        """The end of the latest window the slice is part of: when it fires, the slice
        goes."""
        first = slice_end - self.slice_ms
        if self.cumulate:
            return window_start(first, self.offset_ms, self.size_ms) + self.size_ms
        return window_start(first, self.offset_ms, self.window_step) + self.size_ms

    def window_start(self, window_end: int) -> int:
        """The start of the window ending at ``window_end``."""
        if self.cumulate:
            return window_start(window_end - 1, self.offset_ms, self.size_ms)
        return window_end - self.size_ms

    def slices_of(self, window_end: int) -> range:
        """The ends of the slices the window ending at ``window_end`` spans, earliest first."""
        start = self.window_start(window_end)
        return range(start + self.slice_ms, window_end + 1, self.slice_ms)

    def first_open_window_end(self, slice_end: int, watermark: int) -> int:
        """The end of the earliest window of the slice that has not fired at ``watermark``
        (its ``end - 1`` after it); past ``last_window_end`` when none is left."""
        end = self.first_window_end(slice_end)
        if end - 1 <= watermark:
            step = self.window_step
            end += (watermark + 1 - end) // step * step + step
        return end
