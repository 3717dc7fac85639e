"""Time attribute values: a SQL ``TIMESTAMP``/``TIMESTAMP_LTZ`` value and epoch milliseconds.

Invariant: a naive ``datetime`` is read as UTC (Flink's ``TIMESTAMP`` has no zone, and windows
are computed on its wall-clock value), so ``timestamp_of_millis(epoch_millis(t)) == t`` to
the millisecond for every naive ``t``.

>>> timestamp_of_millis(epoch_millis(timestamp_of_millis(5_000)))
datetime.datetime(1970, 1, 1, 0, 0, 5)
"""

from __future__ import annotations

import calendar
import datetime
from typing import Any

__all__ = ["epoch_millis", "timestamp_of_millis"]

_EPOCH = datetime.datetime(1970, 1, 1)


def epoch_millis(value: Any) -> int:
    """A time attribute's value as milliseconds since the epoch (a naive timestamp is UTC)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            return int(value.timestamp() * 1000)
        return calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000
    if hasattr(value, "to_epoch_milli"):
        millis: int = value.to_epoch_milli()
        return millis
    return int(value)


def timestamp_of_millis(millis: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(milliseconds=millis)
