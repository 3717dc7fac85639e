"""Clocks for alignment statistics and timeouts.

Invariant: ``now_ms`` never goes backwards for a ``ManualClock``; handlers read the clock
only when a barrier-related event arrives, never per record.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Milliseconds on the same scale as ``CheckpointBarrier.timestamp_ms`` (wall clock)."""

    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock milliseconds since the epoch.

    Wall clock (not monotonic) because the start delay compares it with the coordinator's
    barrier timestamp; handlers clamp negative differences to zero.

    >>> SystemClock().now_ms() > 1_600_000_000_000
    True
    """

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """Deterministic clock for tests: time moves only when ``advance`` is called.

    >>> clock = ManualClock(1_000)
    >>> clock.advance(250)
    >>> clock.now_ms()
    1250
    """

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a ManualClock cannot go backwards (advance({ms}))")
        self._now_ms += ms
