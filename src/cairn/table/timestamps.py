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

from cairn.common.time import Duration
from cairn.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
    "TimeColumnAssigner",
    "epoch_millis",
    "source_watermarks",
    "timestamp_of_millis",
    "watermark_strategy",
]

_EPOCH = datetime.datetime(1970, 1, 1)
_MILLISECOND = datetime.timedelta(milliseconds=1)


def epoch_millis(value: Any) -> int:
    """A time attribute's value as milliseconds since the epoch (a naive timestamp is UTC)."""
    if type(value) is datetime.datetime and value.tzinfo is None:
        return (value - _EPOCH) // _MILLISECOND  # floored, as for times before 1970
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


class TimeColumnAssigner(TimestampAssigner):
    """A table record's timestamp: its time column, in epoch milliseconds."""

    def __init__(self, index: int) -> None:
        self.index = index

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        at = value[1][self.index]
        return record_timestamp if at is None else epoch_millis(at)


def watermark_strategy(time_index: int, delay_ms: int, idle_ms: int = 0) -> WatermarkStrategy:
    """Watermarks ``delay_ms`` behind the highest time seen, as Flink SQL's
    ``WATERMARK FOR t AS t - INTERVAL ...`` (the DataStream strategy subtracts one more
    millisecond, so it is given one less; a zero delay stays one millisecond behind); with
    ``idle_ms`` (``table.exec.source.idle-timeout``), a subtask without rows for that long
    is idle and does not hold the watermark back."""
    return source_watermarks(delay_ms, idle_ms).with_timestamp_assigner(
        TimeColumnAssigner(time_index)
    )


def source_watermarks(delay_ms: int, idle_ms: int = 0) -> WatermarkStrategy:
    """``watermark_strategy`` without a timestamp assigner: for a scan that stamps its rows
    itself (a watermark pushed into the scan)."""
    bound = Duration.of_millis(max(delay_ms - 1, 0))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(bound)
    if idle_ms > 0:
        strategy = strategy.with_idleness(Duration.of_millis(idle_ms))
    return strategy
