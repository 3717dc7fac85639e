"""The event-time temporal join: each row of a table joined with the version a versioned
table held for its key at the row's time (Flink's ``TemporalRowTimeJoinOperator``).

Invariant: per join key, the right side's versions wait in keyed map state (version time →
the row valid from then on, or ``None`` after a deletion), the left side's rows in keyed map
state (time → rows) until the watermark — the smaller of the two inputs' — passes their time;
then each is joined with the latest version at or before its time (``LEFT JOIN``: padded with
NULLs when there is none, or it was deleted) and forgotten. So a left row meets every version
the right side had up to its time, whatever the order the two streams arrived in. Versions
older than the latest one at or before the watermark can no longer be chosen by a row that is
not late, and are dropped. A left row that arrives late (at or below the watermark) is joined
at once with the versions still kept. Right-side ``-U`` rows carry nothing a ``+U`` does not
replace and are ignored; a ``-D`` ends the key's version from the deleted row's time. The
left row's kind is kept; rows are emitted before the watermark that releases them, so they
are not late downstream.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.api.co_functions import KeyedCoProcessFunction
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.codegen import CompiledCalc
from cairn.table.operators import DELETE, INSERT, UPDATE_AFTER
from cairn.table.timestamps import epoch_millis

__all__ = ["TemporalJoinFunction"]


class TemporalJoinFunction(KeyedCoProcessFunction):
    """``left [LEFT] JOIN right FOR SYSTEM_TIME AS OF left.time ON keys [AND condition]``
    on rowtime attributes (``left_time``, ``right_time``: column indexes in each side)."""

    def __init__(
        self,
        right_arity: int,
        left_time: int,
        right_time: int,
        outer: bool,
        condition: CompiledCalc | None,
    ) -> None:
        self.right_arity = right_arity
        self.left_time = left_time
        self.right_time = right_time
        self.outer = outer
        self.condition = condition

    def open(self, runtime_context: Any) -> None:
        pickled = Types.PICKLED_BYTE_ARRAY()
        self._left = runtime_context.get_map_state(
            MapStateDescriptor("temporal-join-left", Types.LONG(), pickled)
        )
        self._versions = runtime_context.get_map_state(
            MapStateDescriptor("temporal-join-versions", Types.LONG(), pickled)
        )
        self._matches = None if self.condition is None else self.condition.function()
        self._nulls = (None,) * self.right_arity

    def process_element1(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        at = row[self.left_time]
        if at is None:  # no time: no version to join
            return [(kind, row + self._nulls)] if self.outer else ()
        t = epoch_millis(at)
        timers = ctx.timer_service()
        if t <= timers.current_watermark():  # late: join with the versions kept
            return self._joined(kind, row, t, sorted(self._versions.keys()))
        waiting = self._left.get(t) or []
        waiting.append((kind, row))
        self._left.put(t, waiting)
        timers.register_event_time_timer(t)
        return ()

    def process_element2(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        at = row[self.right_time]
        if at is None or kind not in (INSERT, UPDATE_AFTER, DELETE):
            return ()  # a -U: the +U after it is the new version
        t = epoch_millis(at)
        self._versions.put(t, row if kind != DELETE else None)
        ctx.timer_service().register_event_time_timer(t)  # to drop the versions it replaces
        return ()

    def _version(self, t: int, times: list[int]) -> tuple[Any, ...] | None:
        """The right row valid at ``t`` (``times``: the version times, ascending)."""
        chosen = None
        for v in times:
            if v > t:
                break
            chosen = v
        return None if chosen is None else self._versions.get(chosen)

    def _joined(
        self, kind: int, row: tuple[Any, ...], t: int, times: list[int]
    ) -> list[tuple[int, tuple[Any, ...]]]:
        version = self._version(t, times)
        if version is not None:
            joined = row + version
            if self._matches is None or self._matches(joined) is not None:
                return [(kind, joined)]
        return [(kind, row + self._nulls)] if self.outer else []

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        watermark = ctx.timer_service().current_watermark()
        times = sorted(self._versions.keys())
        out: list[Any] = []
        for t in sorted(self._left.keys()):
            if t > watermark:
                break
            for kind, row in self._left.get(t):
                out.extend(self._joined(kind, row, t, times))
            self._left.remove(t)
        # versions a row that is not late can no longer choose
        current = [v for v in times if v <= watermark]
        for v in current[:-1]:
            self._versions.remove(v)
        if current and self._versions.get(current[-1]) is None and len(times) == len(current):
            self._versions.remove(current[-1])  # deleted, and nothing newer: the key is gone
        return out
