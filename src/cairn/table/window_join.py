"""Window joins at run time (Flink's ``WindowJoinOperator``): inner, left, right and full outer.

Invariant: per join key (which holds both windows' start and end), each side's rows of a
window live in keyed map state (window end → rows), so the join is checkpointed, restored and
rescaled like any keyed state; when the watermark passes a window's end (an event-time timer
at ``end - 1``) that window's rows of both sides are joined — every pair satisfying the rest
of the condition, then, for an outer side, each of its rows that matched nothing padded with
NULLs — emitted insert-only, and the window's state is dropped. A row whose window has fired
already is late and dropped; a key holding a NULL matches nothing (SQL's ``=``), its rows only
come out padded on an outer side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.api.co_functions import KeyedCoProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.codegen import CompiledCalc
from cairn.table.operators import INSERT
from cairn.table.timestamps import epoch_millis

__all__ = ["WindowJoinFunction"]

Row = tuple[Any, ...]


class WindowJoinFunction(KeyedCoProcessFunction):
    """``left [LEFT|RIGHT|FULL] JOIN right`` per window (``left_end``/``right_end``: each
    side's ``window_end`` column)."""

    def __init__(
        self,
        left_arity: int,
        right_arity: int,
        left_end: int,
        right_end: int,
        condition: CompiledCalc | None,
        left_outer: bool,
        right_outer: bool,
    ) -> None:
        self.left_arity = left_arity
        self.right_arity = right_arity
        self.ends = (left_end, right_end)
        self.condition = condition
        self.outer = (left_outer, right_outer)

    def open(self, runtime_context: Any) -> None:
        self._sides = tuple(
            runtime_context.get_map_state(
                MapStateDescriptor(name, Types.LONG(), Types.PICKLED_BYTE_ARRAY())
            )
            for name in ("window-join-left", "window-join-right")
        )
        self._matches = None if self.condition is None else self.condition.function()

    def process_element1(self, value: tuple[int, Row], ctx: Any) -> Iterable[Any]:
        return self._process(value, ctx, 0)

    def process_element2(self, value: tuple[int, Row], ctx: Any) -> Iterable[Any]:
        return self._process(value, ctx, 1)

    def _process(self, value: tuple[int, Row], ctx: Any, side: int) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("a window join takes insert-only input")
        timers = ctx.timer_service()
        end = epoch_millis(row[self.ends[side]])
        if end - 1 <= timers.current_watermark():
            return ()  # late: its window fired already
        state = self._sides[side]
        rows = state.get(end)
        if rows is None:
            rows = []
            timers.register_event_time_timer(end - 1)  # once per key and window: same time
        rows.append(row)
        state.put(end, rows)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        end = timestamp + 1
        left, right = (s.get(end) or [] for s in self._sides)
        for s in self._sides:
            s.remove(end)
        key = ctx.get_current_key()
        null_key = key is None or (isinstance(key, tuple) and None in key)
        out: list[Any] = []
        right_matched = [False] * len(right)
        for lrow in left:
            matched = False
            for i, rrow in enumerate([] if null_key else right):
                joined = lrow + rrow
                if self._matches is not None and self._matches(joined) is None:
                    continue
                matched = right_matched[i] = True
                out.append((INSERT, joined))
            if not matched and self.outer[0]:
                out.append((INSERT, lrow + (None,) * self.right_arity))
        if self.outer[1]:
            pad = (None,) * self.left_arity
            out.extend(
                (INSERT, pad + r) for r, m in zip(right, right_matched, strict=True) if not m
            )
        return out
