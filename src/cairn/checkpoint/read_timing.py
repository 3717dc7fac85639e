"""How much state a restore read from checkpoint storage, and for how long.

Invariant: ``ReadTiming.busy_s`` is the wall time during which at least one read of a reader
it wraps was in flight (reads running at once on transfer threads count once), so it never
exceeds the restore's own duration; ``bytes`` counts what the reads returned. Wrapping changes
nothing a reader returns or raises.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cairn.checkpoint.handles import StateFileReader

__all__ = ["ReadTiming", "TimedStateReader"]


class ReadTiming:
    """Totals of the state reads of one worker's restore (any thread).

    >>> ticks = iter([0.0, 2.0, 3.0, 3.5])  # the clock is read when the first read begins
    >>> timing = ReadTiming(clock=lambda: next(ticks))  # and when the last one ends
    >>> timing.begin(); timing.begin(); timing.end(100); timing.end(20)  # 0.0 to 2.0, at once
    >>> timing.begin(); timing.end(30)  # 3.0 to 3.5
    >>> timing.busy_s, timing.bytes, timing.reads
    (2.5, 150, 3)
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._active = 0
        self._since = 0.0
        self.busy_s = 0.0
        self.bytes = 0
        self.reads = 0

    def wrap(self, reader: StateFileReader) -> TimedStateReader:
        """``reader``, its reads counted here."""
        return TimedStateReader(reader, self)

    def begin(self) -> None:
        with self._lock:
            if self._active == 0:
                self._since = self._clock()
            self._active += 1

    def end(self, nbytes: int) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self.busy_s += self._clock() - self._since
            self.bytes += nbytes
            self.reads += 1


class TimedStateReader:
    """A ``StateFileReader`` whose reads ``timing`` counts (a failed read counts 0 bytes)."""

    def __init__(self, reader: StateFileReader, timing: ReadTiming) -> None:
        self._reader = reader
        self._timing = timing

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        self._timing.begin()
        data = b""
        try:
            data = self._reader.read_state_range(path, offset, length)
        finally:
            self._timing.end(len(data))
        return data
