"""Windows with PyFlink's names (``pyflink.table.window``): the group windows ``Tumble``,
``Slide``, ``Session`` and the over window ``Over``; ``Cumulate`` (no PyFlink class: SQL's
``CUMULATE`` window TVF) shares their one ``GroupWindow`` description.

Invariant: a window is an immutable description — its kind, size (and slide, step or gap) in
milliseconds, its offset, the time attribute it is ``on`` and its alias; assigning rows to
windows is the
pure function ``windows_of`` (tested without a job), and the window aggregate
(``cairn.table.window_operator``) fires a window once the watermark passes its end, as Flink's
group window aggregate does with no allowed lateness.

>>> from cairn.table.expressions import col, lit
>>> w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
>>> w.kind, w.size_ms, w.time_field, w.alias_name
('tumble', 5000, 'ts', 'w')
>>> windows_of(Slide.over(lit(10).seconds).every(lit(5).seconds).on(col("ts")).alias("w"), 12_000)
[(5000, 15000), (10000, 20000)]
>>> windows_of(Cumulate.over(lit(10).seconds).every(lit(5).seconds).on("ts").alias("w"), 3_000)
[(0, 5000), (0, 10000)]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression

__all__ = [
    "UNBOUNDED",
    "Cumulate",
    "GroupWindow",
    "Over",
    "OverWindow",
    "Session",
    "Slide",
    "Tumble",
    "window_start",
    "windows_of",
]


def _millis(value: Any, what: str) -> int:
    interval = (
        isinstance(value, Expression)
        and value.kind == "literal"
        and value.data_type is not None
        and value.data_type.root == "INTERVAL"
    )
    if interval:
        return int(value.value)
    if isinstance(value, int):
        return value
    raise ValidationError(f"A window's {what} is a time interval (lit(5).seconds), got {value}")


def _field(value: Any) -> str:
    if isinstance(value, Expression) and value.kind == "field":
        return value.name
    if isinstance(value, str):
        return value
    raise ValidationError(f"A window is on a time attribute column (col('ts')), got {value}")


@dataclass(frozen=True)
class GroupWindow:
    """A tumbling, sliding, cumulating or session window on a time attribute, with its alias
    (``slide_ms``: a cumulating window's step; ``offset_ms``: Flink's window offset, windows
    start at ``offset + n * size`` or ``offset + n * slide``)."""

    kind: str
    size_ms: int = 0
    slide_ms: int = 0
    gap_ms: int = 0
    time_field: str = ""
    alias_name: str = ""
    offset_ms: int = 0

    def on(self, time_field: Any) -> GroupWindow:
        return replace(self, time_field=_field(time_field))

    def every(self, slide: Any) -> GroupWindow:
        return replace(self, slide_ms=_millis(slide, "slide"))

    def alias(self, alias: str) -> GroupWindow:
        return replace(self, alias_name=alias)

    def offset(self, offset: Any) -> GroupWindow:
        """Windows shifted by ``offset`` (Flink's window TVF ``offset`` argument)."""
        return replace(self, offset_ms=_millis(offset, "offset"))

    def check(self) -> None:
        if not self.time_field:
            raise ValidationError(f"The {self.kind} window needs a time attribute: .on(col('ts'))")
        if not self.alias_name:
            raise ValidationError(f"The {self.kind} window needs an alias: .alias('w')")
        if self.kind in ("slide", "cumulate") and self.slide_ms <= 0:
            what = "sliding window needs a slide" if self.kind == "slide" else "cumulating window"
            raise ValidationError(f"A {what} needs a step: .every(lit(5).seconds)")
        if self.kind == "session" and self.gap_ms <= 0:
            raise ValidationError("A session window's gap must be positive")
        if self.kind != "session" and self.size_ms <= 0:
            raise ValidationError(f"A {self.kind} window's size must be positive")
        if self.kind == "cumulate" and self.size_ms % self.slide_ms:
            raise ValidationError(
                "A cumulating window's max size must be an integral multiple of its step,"
                f" got size {self.size_ms} ms and step {self.slide_ms} ms"
            )

    def describe(self) -> str:
        if self.kind == "cumulate":
            return (
                f"CumulativeGroupWindow('{self.alias_name}, {self.time_field}, {self.size_ms},"
                f" {self.slide_ms}{self._offset_text()})"
            )
        if self.offset_ms:
            return replace(self, offset_ms=0).describe()[:-1] + self._offset_text() + ")"
        if self.kind == "tumble":
            return f"TumblingGroupWindow('{self.alias_name}, {self.time_field}, {self.size_ms})"
        if self.kind == "slide":
            return (
                f"SlidingGroupWindow('{self.alias_name}, {self.time_field}, {self.size_ms},"
                f" {self.slide_ms})"
            )
        return f"SessionGroupWindow('{self.alias_name}, {self.time_field}, {self.gap_ms})"

    def _offset_text(self) -> str:
        return f", offset={self.offset_ms}" if self.offset_ms else ""


class Tumble:
    """Fixed-size, non-overlapping windows: ``Tumble.over(lit(5).seconds).on(col('ts'))``."""

    @staticmethod
    def over(size: Any) -> GroupWindow:
        return GroupWindow("tumble", size_ms=_millis(size, "size"))


class Slide:
    """Fixed-size windows every ``slide``: ``Slide.over(size).every(slide).on(...)``."""

    @staticmethod
    def over(size: Any) -> GroupWindow:
        return GroupWindow("slide", size_ms=_millis(size, "size"))


class Cumulate:
    """Windows from one start growing by ``step`` up to ``size`` (SQL's ``CUMULATE``):
    ``Cumulate.over(size).every(step).on(...)``."""

    @staticmethod
    def over(size: Any) -> GroupWindow:
        return GroupWindow("cumulate", size_ms=_millis(size, "size"))


class Session:
    """Windows of activity separated by a gap: ``Session.with_gap(lit(10).minutes)``."""

    @staticmethod
    def with_gap(gap: Any) -> GroupWindow:
        return GroupWindow("session", gap_ms=_millis(gap, "gap"))


def window_start(timestamp: int, offset: int, size: int) -> int:
    """The start of the window of length ``size`` (ms) that holds ``timestamp``, windows
    starting at ``offset + n * size`` (Flink's ``TimeWindow.getWindowStartWithOffset``).

    >>> window_start(7_500, 0, 5_000), window_start(7_500, 1_000, 5_000), window_start(-1, 0, 10)
    (5000, 6000, -10)
    """
    return timestamp - (timestamp - offset) % size


def windows_of(window: GroupWindow, timestamp: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` windows a row at ``timestamp`` (ms) belongs to, earliest end first
    (a session window: the row's own ``[t, t + gap)``, merged later; a cumulating window: each
    window of the row's period whose end is after it)."""
    offset = window.offset_ms
    if window.kind == "tumble":
        start = window_start(timestamp, offset, window.size_ms)
        return [(start, start + window.size_ms)]
    if window.kind == "slide":
        last = window_start(timestamp, offset, window.slide_ms)
        out = []
        start = last
        while start > timestamp - window.size_ms:
            out.append((start, start + window.size_ms))
            start -= window.slide_ms
        return sorted(out)
    if window.kind == "cumulate":
        start = window_start(timestamp, offset, window.size_ms)
        first_end = window_start(timestamp, offset, window.slide_ms) + window.slide_ms
        step = window.slide_ms
        return [(start, end) for end in range(first_end, start + window.size_ms + 1, step)]
    return [(timestamp, timestamp + window.gap_ms)]


UNBOUNDED = -1


def _bound(value: Any) -> tuple[str, int]:
    """``("rows", n)``, ``("range", ms)``, or an unbounded/current bound."""
    if isinstance(value, Expression) and value.kind == "literal":
        if value.names == ("rows",):
            return ("rows", int(value.value))
        if value.names == ("unbounded_row",):
            return ("rows", UNBOUNDED)
        if value.names == ("unbounded_range",):
            return ("range", UNBOUNDED)
        if value.names in (("current_row",), ("current_range",)):
            return (value.names[0].split("_")[1], 0)
        if value.data_type is not None and value.data_type.root == "INTERVAL":
            return ("range", int(value.value))
    raise ValidationError(
        f"An over window's bound is row_interval(n), an interval (lit(1).hours), UNBOUNDED_ROW,"
        f" UNBOUNDED_RANGE, CURRENT_ROW or CURRENT_RANGE; got {value}"
    )


@dataclass(frozen=True)
class OverWindow:
    """``Over.partition_by(keys).order_by(time).preceding(bound).alias(name)``."""

    partition_by: tuple[str, ...] = ()
    order_by: str = ""
    kind: str = "range"  # rows or range
    lower: int = UNBOUNDED  # rows, or milliseconds, before the current row; UNBOUNDED
    alias_name: str = ""

    def order_by_(self, field: Any) -> OverWindow:
        if not (isinstance(field, Expression) and field.kind == "field"):
            raise ValidationError(f"An over window is ordered by a time attribute, got {field}")
        return replace(self, order_by=field.name)

    def preceding(self, bound: Any) -> OverWindow:
        kind, amount = _bound(bound)
        return replace(self, kind=kind, lower=amount)

    def following(self, bound: Any) -> OverWindow:
        _, amount = _bound(bound)
        if amount != 0:
            raise ValidationError("An over window on a stream only follows to the current row")
        return self

    def alias(self, alias: str) -> OverWindow:
        return replace(self, alias_name=alias)

    def describe(self) -> str:
        lower = "UNBOUNDED" if self.lower == UNBOUNDED else str(self.lower)
        return (
            f"partitionBy=[{', '.join(self.partition_by)}], orderBy=[{self.order_by}],"
            f" window=[{self.kind.upper()} BETWEEN {lower} PRECEDING AND CURRENT ROW]"
        )


class _OverBuilder:
    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys

    def order_by(self, field: Any) -> OverWindow:
        return OverWindow(partition_by=self.keys).order_by_(field)


class Over:
    """PyFlink's ``Over``: ``Over.partition_by(col('k')).order_by(col('ts'))...``."""

    @staticmethod
    def partition_by(*fields: Any) -> _OverBuilder:
        keys = []
        for f in fields:
            if not (isinstance(f, Expression) and f.kind == "field"):
                raise ValidationError(f"An over window is partitioned by columns, got {f}")
            keys.append(f.name)
        return _OverBuilder(tuple(keys))

    @staticmethod
    def order_by(field: Any) -> OverWindow:
        return OverWindow().order_by_(field)
