"""The queue of an async wait operator: which inputs may be emitted, and when.

Invariant: touched by the task thread only. An entry is a record (emitted once its result is
there) or a watermark (emitted once every record before it was). Ordered: entries leave in
the order they came. Unordered: records leave as they complete, but only within their
segment, the records between two watermarks, so no record ever crosses a watermark (Flink's
``UnorderedStreamElementQueue``). ``entries()`` lists what has not left yet, in input order:
what a checkpoint stores and a restore adds again.

>>> q = AsyncQueue(ordered=False)
>>> a, b = q.add(Entry("a", 1)), q.add(Entry("b", 2))
>>> w = q.add(Entry(None, None, watermark=2))
>>> c = q.add(Entry("c", 3))
>>> q.complete(c, ["C"]); q.complete(b, ["B"]); [e.value for e in q.pop_ready()]
['b']
>>> q.complete(a, ["A"]); [e.watermark or e.value for e in q.pop_ready()]
['a', 2, 'c']
>>> q.records, len(q.entries())
(0, 0)
>>> o = AsyncQueue(ordered=True)
>>> x, y = o.add(Entry("x", None)), o.add(Entry("y", None))
>>> o.complete(y, ["Y"]); o.pop_ready(), [e.value for e in o.entries()]
([], ['x', 'y'])
>>> o.complete(x, ["X"]); [e.result for e in o.pop_ready()]
[['X'], ['Y']]
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["AsyncQueue", "Entry"]


class Entry:
    """One input of the operator: a record with its timestamp, or a watermark."""

    __slots__ = ("done", "result", "segment", "timestamp", "value", "watermark")

    def __init__(self, value: Any, timestamp: int | None, watermark: int | None = None) -> None:
        self.value = value
        self.timestamp = timestamp
        self.watermark = watermark
        self.result: list[Any] = []
        self.done = watermark is not None
        self.segment: _Segment | None = None

    def __repr__(self) -> str:
        if self.watermark is not None:
            return f"Entry(watermark={self.watermark})"
        return f"Entry({self.value!r}, done={self.done})"


class _Segment:
    """Unordered mode: a watermark, or the records between two watermarks."""

    __slots__ = ("members", "ready", "watermark")

    def __init__(self, watermark: Entry | None) -> None:
        self.watermark = watermark
        self.members: dict[int, Entry] = {}  # by id(), insertion (= input) order
        self.ready: deque[Entry] = deque()  # completed, not yet emitted


class AsyncQueue:
    """Entries between ``add`` and ``pop_ready``; ``records``: how many of them are records."""

    def __init__(self, ordered: bool) -> None:
        self.ordered = ordered
        self.records = 0
        self._ordered: deque[Entry] = deque()
        self._segments: deque[_Segment] = deque()

    def add(self, entry: Entry) -> Entry:
        if entry.watermark is None:
            self.records += 1
        if self.ordered:
            self._ordered.append(entry)
            return entry
        if entry.watermark is not None:
            self._segments.append(_Segment(entry))
            return entry
        if not self._segments or self._segments[-1].watermark is not None:
            self._segments.append(_Segment(None))
        segment = self._segments[-1]
        segment.members[id(entry)] = entry
        entry.segment = segment
        return entry

    def complete(self, entry: Entry, result: list[Any]) -> None:
        """``entry``'s result is there (its request completed or timed out)."""
        entry.result = result
        entry.done = True
        if entry.segment is not None:
            entry.segment.ready.append(entry)

    def pop_ready(self) -> list[Entry]:
        """The entries that may be emitted now, in the order to emit them."""
        out: list[Entry] = []
        if self.ordered:
            q = self._ordered
            while q and q[0].done:
                out.append(q.popleft())
        else:
            segments = self._segments
            while segments:
                head = segments[0]
                if head.watermark is not None:
                    out.append(head.watermark)
                    segments.popleft()
                    continue
                while head.ready:
                    entry = head.ready.popleft()
                    del head.members[id(entry)]
                    entry.segment = None
                    out.append(entry)
                if head.members:
                    break
                segments.popleft()
        self.records -= sum(1 for e in out if e.watermark is None)
        return out

    def entries(self) -> list[Entry]:
        """Every entry not emitted yet, in input order (watermarks where they came)."""
        if self.ordered:
            return list(self._ordered)
        out: list[Entry] = []
        for segment in self._segments:
            if segment.watermark is not None:
                out.append(segment.watermark)
            else:
                out.extend(segment.members.values())
        return out

    def __len__(self) -> int:
        return (
            len(self._ordered)
            if self.ordered
            else sum(1 if s.watermark is not None else len(s.members) for s in self._segments)
        )
