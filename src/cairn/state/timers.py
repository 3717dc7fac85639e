"""A priority queue of keyed timers, deduplicated per ``(timestamp, key)``, and the check
every keyed backend makes before it registers one (``timer_owner``).

Invariant: ``_live`` maps exactly the registered timers to their key group; the heap may
additionally hold stale entries (deleted, or duplicates of fired timers) that are skipped
when they surface, so register/delete are O(log n)/O(1) and every live timer fires once.

>>> q = TimerQueue()
>>> q.register(20, "a", 0); q.register(10, "b", 0); q.register(10, "b", 0)
>>> q.pop_due(15), q.peek()
([(10, 'b')], 20)
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from typing import Any

from cairn.state.errors import KeyGroupRangeError
from cairn.state.key_groups import KeyGroupRange
from cairn.state.keyed_states import NO_KEY, KeyContext, raise_no_key

__all__ = ["EVENT_TIME", "PROCESSING_TIME", "TimerQueue", "timer_owner"]

PROCESSING_TIME = "processing"
EVENT_TIME = "event"


def timer_owner(ctx: KeyContext, key_groups: KeyGroupRange) -> tuple[Any, int]:
    """The current key and its key group, for a new timer: a key must be current, and of
    ``key_groups`` (a timer of another subtask's key would never fire there)."""
    if ctx.key is NO_KEY:
        raise_no_key("<timer service>")
    if ctx.key_group not in key_groups:
        raise KeyGroupRangeError(
            f"timer for key {ctx.key!r} of key group {ctx.key_group}, outside this "
            f"subtask's key groups {key_groups.start}..{key_groups.end}"
        )
    return ctx.key, ctx.key_group


class TimerQueue:
    """Timers of one time domain (processing or event time) of one keyed backend."""

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        # Heap entries carry a sequence number so keys are never compared with each other
        # (keys of different types are not orderable) and ties fire in registration order.
        self._heap: list[tuple[int, int, Any]] = []
        self._live: dict[tuple[int, Any], int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def register(self, timestamp: int, key: Any, key_group: int) -> None:
        entry = (timestamp, key)
        if entry in self._live:
            return
        self._live[entry] = key_group
        heapq.heappush(self._heap, (timestamp, next(self._seq), key))

    def delete(self, timestamp: int, key: Any) -> None:
        self._live.pop((timestamp, key), None)
        # Deleted entries stay in the heap until they surface; rebuild if they dominate.
        if len(self._heap) > 2 * len(self._live) + 64:
            self._compact()

    def peek(self) -> int | None:
        """Timestamp of the earliest live timer, or ``None``."""
        heap, live = self._heap, self._live
        while heap:
            ts, _, key = heap[0]
            if (ts, key) in live:
                return ts
            heapq.heappop(heap)
        return None

    def pop_due(self, until: int) -> list[tuple[int, Any]]:
        """Remove and return every live timer with ``timestamp <= until``, ordered by time."""
        heap, live = self._heap, self._live
        due: list[tuple[int, Any]] = []
        while heap and heap[0][0] <= until:
            ts, _, key = heapq.heappop(heap)
            entry = (ts, key)
            if live.pop(entry, None) is not None:
                due.append(entry)
        return due

    def snapshot(self) -> dict[tuple[int, Any], int]:
        """A copy of the live timers and their key groups (entries are immutable)."""
        return dict(self._live)

    def add_all(self, entries: Iterable[tuple[int, Any]], key_group: int) -> None:
        """Register restored timers, earliest first so equal timestamps keep a stable order."""
        for ts, key in sorted(entries, key=lambda e: e[0]):
            self.register(ts, key, key_group)

    def _compact(self) -> None:
        """Drop deleted entries and duplicates (a timer deleted and registered again has
        two), keeping each live timer's earliest registration; one pass and ``heapify``,
        no sort: sessions delete and register a timer per row."""
        live = self._live
        kept: dict[tuple[int, Any], tuple[int, int, Any]] = {}
        for item in self._heap:
            entry = (item[0], item[2])
            if entry in live:
                known = kept.get(entry)
                if known is None or item[1] < known[1]:
                    kept[entry] = item
        heap = list(kept.values())
        heapq.heapify(heap)
        self._heap = heap
