"""Time spans and instants with PyFlink's names (``pyflink.common.time``).

Invariant: every value is an immutable, hashable wrapper around an integer number of
milliseconds (nanoseconds for ``Duration``), so equal spans compare and hash equal whatever
factory built them; ``to_milliseconds()`` is the single conversion the engine reads.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Duration", "Instant", "Time"]

_NANOS_PER_MILLI = 1_000_000


@dataclass(frozen=True, slots=True)
class Time:
    """A span of time (PyFlink 1.x ``Time``), e.g. for ``StateTtlConfig.new_builder``.

    >>> Time.seconds(5).to_milliseconds()
    5000
    """

    _milliseconds: int

    @classmethod
    def milliseconds(cls, milliseconds: int) -> Time:
        return cls(int(milliseconds))

    @classmethod
    def seconds(cls, seconds: int) -> Time:
        return cls(int(seconds * 1000))

    @classmethod
    def minutes(cls, minutes: int) -> Time:
        return cls(int(minutes * 60_000))

    @classmethod
    def hours(cls, hours: int) -> Time:
        return cls(int(hours * 3_600_000))

    @classmethod
    def days(cls, days: int) -> Time:
        return cls(int(days * 86_400_000))

    def to_milliseconds(self) -> int:
        return self._milliseconds

    def __str__(self) -> str:
        return f"{self._milliseconds} ms"


@dataclass(frozen=True, slots=True)
class Duration:
    """A span of time (PyFlink 2.x / ``java.time.Duration``), nanosecond precision.

    >>> Duration.of_seconds(5).to_milliseconds()
    5000
    >>> Duration.of_millis(1500) == Duration.of_nanos(1_500_000_000)
    True
    """

    _nanos: int

    @classmethod
    def of_nanos(cls, nanos: int) -> Duration:
        return cls(int(nanos))

    @classmethod
    def of_millis(cls, millis: int) -> Duration:
        return cls(int(millis * _NANOS_PER_MILLI))

    @classmethod
    def of_seconds(cls, seconds: int) -> Duration:
        return cls(int(seconds * 1000 * _NANOS_PER_MILLI))

    @classmethod
    def of_minutes(cls, minutes: int) -> Duration:
        return cls(int(minutes * 60_000 * _NANOS_PER_MILLI))

    @classmethod
    def of_hours(cls, hours: int) -> Duration:
        return cls(int(hours * 3_600_000 * _NANOS_PER_MILLI))

    @classmethod
    def of_days(cls, days: int) -> Duration:
        return cls(int(days * 86_400_000 * _NANOS_PER_MILLI))

    def to_milliseconds(self) -> int:
        """Whole milliseconds, rounded down like ``java.time.Duration.toMillis``."""
        return self._nanos // _NANOS_PER_MILLI

    def to_nanos(self) -> int:
        return self._nanos

    def __str__(self) -> str:
        return f"{self._nanos / 1e9:g}s"


@dataclass(frozen=True, slots=True)
class Instant:
    """An instant on the time line (PyFlink ``Instant``): seconds plus nanos since the epoch.

    >>> Instant.of_epoch_milli(1_500).to_epoch_milli()
    1500
    """

    seconds: int
    nanos: int

    @classmethod
    def of_epoch_milli(cls, epoch_milli: int) -> Instant:
        secs, millis = divmod(int(epoch_milli), 1000)
        return cls(secs, millis * _NANOS_PER_MILLI)

    def to_epoch_milli(self) -> int:
        return self.seconds * 1000 + self.nanos // _NANOS_PER_MILLI
