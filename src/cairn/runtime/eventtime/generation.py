"""From a ``WatermarkStrategy`` to timestamps and watermarks (Flink's ``WatermarkGenerator``,
``WatermarksWithIdleness`` and ``TimestampsAndWatermarksOperator`` logic, without I/O).

Invariants: the watermarks a ``WatermarkEmitter`` returns strictly increase; an idle status is
returned at most once per idle period, and an active one only just before the next watermark;
bounded out-of-orderness ``B`` gives ``max timestamp - B - 1`` (monotonous: ``B = 0``),
Flink's formula; ``no_watermarks()`` gives none but the final ``MAX_WATERMARK``.

>>> from cairn.common import Duration, WatermarkStrategy
>>> e = WatermarkEmitter(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5)))
>>> e.on_event(100); e.on_event(90)
>>> e.on_periodic_emit(now_ms=0)
(Watermark(timestamp=94),)
>>> e.on_periodic_emit(now_ms=200)  # nothing new
()
>>> e.on_end_of_input()
(Watermark(timestamp=9223372036854775807),)
"""

from __future__ import annotations

from typing import Any, cast

from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.events import ACTIVE, IDLE, MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from cairn.runtime.eventtime.stamped import StampedBatch, stamp

__all__ = ["IdlenessTimer", "TimestampStamper", "WatermarkEmitter"]

Emitted = tuple[Watermark | WatermarkStatus, ...]


class IdlenessTimer:
    """Flink's ``IdlenessTimer``: idle once no event was seen for longer than ``timeout_ms``,
    measured from the first periodic check that saw no new activity.

    >>> t = IdlenessTimer(100)
    >>> t.check_if_idle(0), t.check_if_idle(50), t.check_if_idle(101)
    (False, False, True)
    >>> t.activity(); t.check_if_idle(102)
    False
    """

    __slots__ = ("_counter", "_last_counter", "_since", "timeout_ms")

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self._counter = 0
        self._last_counter = 0
        self._since: int | None = None

    def activity(self) -> None:
        self._counter += 1

    def check_if_idle(self, now_ms: int) -> bool:
        if self._counter != self._last_counter:
            self._last_counter = self._counter
            self._since = None
            return False
        if self._since is None:
            self._since = now_ms
            return False
        return now_ms - self._since > self.timeout_ms


class WatermarkEmitter:
    """The watermark generator of one subtask, with its output's deduplication."""

    __slots__ = (
        "_bound",
        "_emitted",
        "_ended",
        "_idle",
        "_idleness",
        "_max_timestamp",
        "_periodic",
    )

    def __init__(self, strategy: WatermarkStrategy) -> None:
        self._periodic = strategy.kind != "no_watermarks"
        self._bound = strategy.max_out_of_orderness_ms
        self._max_timestamp = MIN_WATERMARK + self._bound + 1
        timeout = strategy.idle_timeout_ms
        self._idleness = IdlenessTimer(timeout) if timeout is not None and timeout > 0 else None
        self._emitted = MIN_WATERMARK
        self._idle = False
        self._ended = False

    def on_event(self, timestamp: int) -> None:
        """A record with ``timestamp`` was emitted (call with the batch's largest one)."""
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        if self._idleness is not None:
            self._idleness.activity()

    def on_periodic_emit(self, now_ms: int) -> Emitted:
        """What to send now (``pipeline.auto-watermark-interval``): a higher watermark, an
        idle status, or nothing (always nothing after the end of input)."""
        if self._ended:
            return ()
        if self._idleness is not None and self._idleness.check_if_idle(now_ms):
            if self._idle:
                return ()
            self._idle = True
            return (IDLE,)
        if not self._periodic:
            return ()
        return self._emit(self._max_timestamp - self._bound - 1)

    def on_end_of_input(self) -> Emitted:
        """The final watermark: every timer and window may fire."""
        self._ended = True
        return self._emit(MAX_WATERMARK)

    def _emit(self, watermark: int) -> Emitted:
        if watermark <= self._emitted:
            return ()
        self._emitted = watermark
        if self._idle:
            self._idle = False
            return (ACTIVE, Watermark(watermark))
        return (Watermark(watermark),)


class TimestampStamper:
    """Assigns timestamps with the strategy's ``TimestampAssigner`` (``None``: keep the
    records' own) and tells the emitter about them.

    >>> from cairn.common import TimestampAssigner, WatermarkStrategy
    >>> class First(TimestampAssigner):
    ...     def extract_timestamp(self, value, record_timestamp): return value[0]
    >>> s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(First())
    >>> stamper = TimestampStamper(s, WatermarkEmitter(s))
    >>> b = stamper.assign([(5, "a"), (3, "b")]); b.timestamps
    [5, 3]
    """

    __slots__ = ("_assigner", "emitter")

    def __init__(self, strategy: WatermarkStrategy, emitter: WatermarkEmitter) -> None:
        self._assigner = strategy.timestamp_assigner
        self.emitter = emitter

    def assign_read(
        self, records: list[Any], timestamps: list[int | None], max_read: int | None
    ) -> list[Any]:
        """Records a reader stamped itself (``TimestampedBatch``): the emitter sees
        ``max_read``, the largest event time the reader read, rows it dropped included;
        an assigner, if any, re-stamps them as in ``assign``."""
        if self._assigner is not None:
            return self.assign(stamp(list(records), timestamps))
        if max_read is not None:
            self.emitter.on_event(max_read)
        return stamp(list(records), timestamps)

    def assign(self, records: list[Any]) -> list[Any]:
        assigner = self._assigner
        if assigner is None:
            if type(records) is StampedBatch:
                known = [t for t in records.timestamps if t is not None]
                if known:
                    self.emitter.on_event(max(known))
            return records
        extract = assigner.extract_timestamp
        if type(records) is StampedBatch:
            timestamps = [
                int(extract(r, MIN_WATERMARK if t is None else t))
                for r, t in zip(records, records.timestamps, strict=True)
            ]
        else:
            timestamps = [int(extract(r, MIN_WATERMARK)) for r in records]
        if timestamps:
            self.emitter.on_event(max(timestamps))
        # Every record has a timestamp now (int is an int | None: no copy needed).
        return stamp(
            records if type(records) is list else list(records),
            cast("list[int | None]", timestamps),
        )
