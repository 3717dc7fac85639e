"""The one clock abstraction: ``Clock.now_ms()``, injected wherever time is read.

Invariant: a ``ManualClock`` never goes backwards; code given a clock reads it only on events
it times (barriers, checkpoint triggers, state accesses with TTL, file rolling and
monitoring), never through another time source.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Milliseconds.

    ``SystemClock`` (and a ``ManualClock`` started there) is on the scale of
    ``CheckpointBarrier.timestamp_ms`` (wall clock), which barrier handlers, the checkpoint
    coordinator, state TTL and time buckets need; ``MonotonicClock`` only measures intervals.
    """

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


class MonotonicClock:
    """Milliseconds of ``time.monotonic``: for intervals only (unaffected by clock steps).

    >>> clock = MonotonicClock()
    >>> clock.now_ms() <= clock.now_ms()
    True
    """

    __slots__ = ()

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """Deterministic clock for tests: time moves only when ``advance`` or ``advance_to`` is
    called, and never backwards.

    >>> clock = ManualClock(1_000)
    >>> clock.advance(250)
    >>> clock.now_ms()
    1250
    >>> clock.advance_to(2_000)
    >>> clock.now_ms()
    2000
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

    def advance_to(self, now_ms: int) -> None:
        """Set the time to ``now_ms``, which must not be earlier than the current time."""
        if now_ms < self._now_ms:
            raise ValueError(
                f"a ManualClock cannot go backwards (advance_to({now_ms}) at {self._now_ms})"
            )
        self._now_ms = now_ms
