"""Windows with PyFlink's names (``pyflink.table.window``): the group windows ``Tumble``,
``Slide``, ``Session`` and the over window ``Over``.

Invariant: a window is an immutable description — its kind, size (and slide or gap) in
milliseconds, the time attribute it is ``on`` and its alias; assigning rows to windows is the
pure function ``windows_of`` (tested without a job), and the window aggregate
(``cairn.table.window_operator``) fires a window once the watermark passes its end, as Flink's
group window aggregate does with no allowed lateness.

>>> from cairn.table.expressions import col, lit
>>> w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
>>> w.kind, w.size_ms, w.time_field, w.alias_name
('tumble', 5000, 'ts', 'w')
>>> windows_of(Slide.over(lit(10).seconds).every(lit(5).seconds).on(col("ts")).alias("w"), 12_000)
[(5000, 15000), (10000, 20000)]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression

__all__ = [
    "UNBOUNDED",
    "GroupWindow",
    "Over",
    "OverWindow",
    "Session",
    "Slide",
    "Tumble",
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
    """A tumbling, sliding or session window on a time attribute, with its alias."""

    kind: str
    size_ms: int = 0
    slide_ms: int = 0
    gap_ms: int = 0
    time_field: str = ""
    alias_name: str = ""

    def on(self, time_field: Any) -> GroupWindow:
        return replace(self, time_field=_field(time_field))

    def every(self, slide: Any) -> GroupWindow:
        return replace(self, slide_ms=_millis(slide, "slide"))

    def alias(self, alias: str) -> GroupWindow:
        return replace(self, alias_name=alias)

    def check(self) -> None:
        if not self.time_field:
            raise ValidationError(f"The {self.kind} window needs a time attribute: .on(col('ts'))")
        if not self.alias_name:
            raise ValidationError(f"The {self.kind} window needs an alias: .alias('w')")
        if self.kind == "slide" and self.slide_ms <= 0:
            raise ValidationError("A sliding window needs a slide: .every(lit(5).seconds)")

    def describe(self) -> str:
        if self.kind == "tumble":
            return f"TumblingGroupWindow('{self.alias_name}, {self.time_field}, {self.size_ms})"
        if self.kind == "slide":
            return (
                f"SlidingGroupWindow('{self.alias_name}, {self.time_field}, {self.size_ms},"
                f" {self.slide_ms})"
            )
        return f"SessionGroupWindow('{self.alias_name}, {self.time_field}, {self.gap_ms})"


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


class Session:
    """Windows of activity separated by a gap: ``Session.with_gap(lit(10).minutes)``."""

    @staticmethod
    def with_gap(gap: Any) -> GroupWindow:
        return GroupWindow("session", gap_ms=_millis(gap, "gap"))


def windows_of(window: GroupWindow, timestamp: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` windows a row at ``timestamp`` (ms) belongs to, earliest first
    (a session window: the row's own ``[t, t + gap)``, merged later)."""
    if window.kind == "tumble":
        start = timestamp - timestamp % window.size_ms
        return [(start, start + window.size_ms)]
    if window.kind == "slide":
        last = timestamp - timestamp % window.slide_ms
        out = []
        start = last
        while start > timestamp - window.size_ms:
            out.append((start, start + window.size_ms))
            start -= window.slide_ms
        return sorted(out)
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
