"""The event-time interval join of two insert-only tables: inner, left, right or full outer.

Invariant: per join key, each side's rows wait in keyed map state (time → rows, each with
whether it has joined) only while a row of the other side that is not late can still match
them: a left row at ``l`` matches right rows at ``r`` with ``lower <= l - r <= upper``, so it
is kept while the watermark ``w`` is below ``l - lower`` and forgotten once ``l <= w + lower
- 1`` (the right side's rows: ``r <= w - upper - 1``), by an event-time cleanup timer per side
and key, or when a row of the other side finds it expired — Flink's ``RowTimeIntervalJoin``
(allowed lateness 0). A row of an outer side that never joined is emitted padded with NULLs
when it is forgotten, or at once when it arrives too late to wait. Each row arriving is joined
with the other side's rows of its interval that are still kept; a row expired by the
watermark never joins again (Flink may still join one its lazy cleanup has not reached: only
late rows can tell). The output is insert-only and its watermark is held back by ``max(-lower,
upper)`` so joined rows are not late downstream; state is empty once the final watermark
passed. Bounds with ``upper < lower`` match nothing: rows of an outer side go out padded at
once, as Flink plans such a join.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.api.co_functions import KeyedCoProcessFunction
from cairn.api.state import MapStateDescriptor, ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.codegen import CompiledCalc
from cairn.table.operators import INSERT
from cairn.table.timestamps import epoch_millis

__all__ = ["IntervalJoinFunction"]


class IntervalJoinFunction(KeyedCoProcessFunction):
    """``left JOIN right ON keys AND lower <= left.time - right.time <= upper [AND
    condition]`` on rowtime attributes (``left_time``, ``right_time``: column indexes);
    ``left_outer`` / ``right_outer`` pad a side's rows that never joined."""

    def __init__(
        self,
        left_arity: int,
        right_arity: int,
        left_time: int,
        right_time: int,
        lower_ms: int,
        upper_ms: int,
        condition: CompiledCalc | None,
        left_outer: bool = False,
        right_outer: bool = False,
    ) -> None:
        self.left_arity = left_arity
        self.right_arity = right_arity
        self.left_time = left_time
        self.right_time = right_time
        self.lower_ms = lower_ms
        self.upper_ms = upper_ms
        self.condition = condition
        self.left_outer = left_outer
        self.right_outer = right_outer
        #: how far the output watermark trails the input's (Flink's ``getMaxOutputDelay``)
        self.output_watermark_delay_ms = max(-lower_ms, upper_ms, 0)

    def open(self, runtime_context: Any) -> None:
        pickled = Types.PICKLED_BYTE_ARRAY()
        self._caches = (
            runtime_context.get_map_state(
                MapStateDescriptor("interval-join-left", Types.LONG(), pickled)
            ),
            runtime_context.get_map_state(
                MapStateDescriptor("interval-join-right", Types.LONG(), pickled)
            ),
        )
        # the time of each side's pending cleanup timer (None: none registered)
        self._timers = (
            runtime_context.get_state(
                ValueStateDescriptor("interval-join-left-timer", Types.LONG())
            ),
            runtime_context.get_state(
                ValueStateDescriptor("interval-join-right-timer", Types.LONG())
            ),
        )
        self._matches = None if self.condition is None else self.condition.function()
        self._outer = (self.left_outer, self.right_outer)
        # a side's rows stay while w < t + relative[side]: left l - lower, right r + upper
        self._relative = (-self.lower_ms, self.upper_ms)

    def _padded(self, row: tuple[Any, ...], side: int) -> tuple[int, tuple[Any, ...]]:
        if side == 0:
            return INSERT, row + (None,) * self.right_arity
        return INSERT, (None,) * self.left_arity + row

    def _expiry(self, side: int, watermark: int) -> int:
        """The time at or below which ``side``'s rows can no longer join."""
        return watermark - self._relative[side] - 1

    def process_element1(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        return self._process(value, ctx, 0)

    def process_element2(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        return self._process(value, ctx, 1)

    def _process(self, value: tuple[int, tuple[Any, ...]], ctx: Any, side: int) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("an interval join takes insert-only input")
        at = row[self.left_time if side == 0 else self.right_time]
        if at is None or self.upper_ms < self.lower_ms:  # it can match nothing
            return [self._padded(row, side)] if self._outer[side] else ()
        t = epoch_millis(at)
        timers = ctx.timer_service()
        watermark = timers.current_watermark()
        other = 1 - side
        # the other side's times this row matches: l - upper <= r <= l - lower, and back
        if side == 0:
            low, high = t - self.upper_ms, t - self.lower_ms
        else:
            low, high = t + self.lower_ms, t + self.upper_ms
        out: list[Any] = []
        joined_any = False
        cache = self._caches[other]
        expiry = self._expiry(other, watermark)
        for at_time in list(cache.keys()):
            if at_time <= expiry:
                out.extend(self._forget(cache, at_time, other))
                continue
            if not low <= at_time <= high:
                continue
            entries = cache.get(at_time)
            changed = False
            for entry in entries:
                pair = row + entry[0] if side == 0 else entry[0] + row
                if self._matches is not None and self._matches(pair) is None:
                    continue
                out.append((INSERT, pair))
                joined_any = True
                if not entry[1] and self._outer[other]:
                    entry[1] = True
                    changed = True
            if changed:
                cache.put(at_time, entries)
        if watermark < t + self._relative[side]:  # rows of the other side may still come
            mine = self._caches[side]
            waiting = mine.get(t) or []
            waiting.append([row, joined_any])
            mine.put(t, waiting)
            if self._timers[side].value() is None:
                self._register(ctx, side, t)
        elif not joined_any and self._outer[side]:
            out.append(self._padded(row, side))
        return out

    def _register(self, ctx: Any, side: int, t: int) -> None:
        """A cleanup timer for ``side``'s rows at ``t``: when the watermark passes it they
        can no longer join."""
        cleanup = t + self._relative[side] + 1
        ctx.timer_service().register_event_time_timer(cleanup)
        self._timers[side].update(cleanup)

    def _forget(self, cache: Any, at_time: int, side: int) -> list[Any]:
        """Drop ``side``'s rows at ``at_time``; those of an outer side that never joined go
        out padded."""
        entries = cache.get(at_time) or []
        cache.remove(at_time)
        if not self._outer[side]:
            return []
        return [self._padded(r, side) for r, joined in entries if not joined]

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        watermark = ctx.timer_service().current_watermark()
        out: list[Any] = []
        for side in (0, 1):
            if self._timers[side].value() != timestamp:
                continue
            cache = self._caches[side]
            expiry = self._expiry(side, watermark)
            remaining: int | None = None
            for at_time in list(cache.keys()):
                if at_time <= expiry:
                    out.extend(self._forget(cache, at_time, side))
                elif remaining is None or at_time < remaining:
                    remaining = at_time
            if remaining is None:
                self._timers[side].clear()
            else:
                self._register(ctx, side, remaining)
        return out
