"""Keyed timers of one RocksDB backend: ordered on the heap, written through to RocksDB.

Invariant: a timer has its key in the ``_timers`` column family (``codecs.timer_key``)
exactly while it is live in its domain's ``TimerQueue`` (registered, neither fired nor
deleted), so a RocksDB checkpoint of the database holds every live timer, and ``load`` after
a restore rebuilds the queues of the backend's key groups from the column family alone.

>>> import tempfile
>>> from cairn.state.key_groups import KeyGroupAssigner, KeyGroupRange
>>> from cairn.state.rocksdb.db import RocksDBMemory, StateDB
>>> from cairn.state.keyed_states import KeyContext
>>> from cairn.state.timers import EVENT_TIME
>>> db = StateDB.open(tempfile.mkdtemp() + "/db", RocksDBMemory(block_cache_bytes=1 << 20))
>>> ctx, kgs = KeyContext(), KeyGroupRange(0, 127)
>>> timers = RocksTimers(ctx, kgs, KeyGroupAssigner(128), lambda: db)
>>> ctx.key, ctx.key_group = "a", KeyGroupAssigner(128).key_group("a")
>>> timers.register(EVENT_TIME, 10); timers.register(EVENT_TIME, 20)
>>> timers.pop_due(EVENT_TIME, 15), len(timers)
([(10, 'a')], 1)
>>> again = RocksTimers(ctx, kgs, KeyGroupAssigner(128), lambda: db); again.load(db)
>>> again.peek(EVENT_TIME)
20
>>> db.close()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.state.key_groups import KeyGroupAssigner, KeyGroupRange
from cairn.state.keyed_states import NO_KEY, KeyContext, raise_no_key
from cairn.state.rocksdb.codecs import key_group_bytes, timer_key, timer_parts
from cairn.state.rocksdb.db import TIMERS_CF, Column, StateDB
from cairn.state.timers import EVENT_TIME, PROCESSING_TIME, TimerQueue, timer_owner

__all__ = ["RocksTimers"]


class RocksTimers:
    """The processing- and event-time timers of the current key (``ctx``) in ``key_group_range``.

    ``open_db`` opens the backend's database on first use (a backend without state or timers
    never creates one).
    """

    __slots__ = ("_assigner", "_ctx", "_open_db", "_queues", "_range")

    def __init__(
        self,
        ctx: KeyContext,
        key_group_range: KeyGroupRange,
        assigner: KeyGroupAssigner,
        open_db: Callable[[], StateDB],
    ) -> None:
        self._ctx = ctx
        self._range = key_group_range
        self._assigner = assigner
        self._open_db = open_db
        self._queues = {PROCESSING_TIME: TimerQueue(), EVENT_TIME: TimerQueue()}

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def _column(self) -> Column:
        return self._open_db().column_family(TIMERS_CF)

    def register(self, domain: str, timestamp_ms: int) -> None:
        """A timer of the current key, which must be of this backend's key groups."""
        key, key_group = timer_owner(self._ctx, self._range)
        self._queues[domain].register(timestamp_ms, key, key_group)
        self._column().put(timer_key(key_group, domain, timestamp_ms, key), b"")

    def delete(self, domain: str, timestamp_ms: int) -> None:
        key = self._ctx.key
        if key is NO_KEY:
            raise_no_key("<current key>")
        self._queues[domain].delete(timestamp_ms, key)
        self._column().delete(timer_key(self._ctx.key_group, domain, timestamp_ms, key))

    def peek(self, domain: str) -> int | None:
        """The earliest live timer of ``domain``, or ``None``."""
        return self._queues[domain].peek()

    def pop_due(self, domain: str, until: int) -> list[tuple[int, Any]]:
        """Remove and return the timers of ``domain`` ``<= until`` as ``(ts, key)``, by time."""
        due = self._queues[domain].pop_due(until)
        if due:
            cf = self._column()
            for ts, key in due:
                cf.delete(timer_key(self._assigner.key_group(key), domain, ts, key))
        return due

    def load(self, db: StateDB) -> None:
        """Queue the timers of this backend's key groups that ``db`` holds (after a restore)."""
        if not db.has_column_family(TIMERS_CF):
            return
        lo, hi = key_group_bytes(self._range.start), key_group_bytes(self._range.end + 1)
        for k in db.column_family(TIMERS_CF).keys(from_key=lo):
            if k >= hi:
                break
            kg, domain, ts, key = timer_parts(k)
            self._queues[domain].register(ts, key, kg)

    def clear(self) -> None:
        """Forget every queued timer (the database is being disposed of)."""
        self._queues = {PROCESSING_TIME: TimerQueue(), EVENT_TIME: TimerQueue()}
