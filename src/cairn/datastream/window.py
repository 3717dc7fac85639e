"""Windows and window assigners with PyFlink's names (``pyflink.datastream.window``).

Invariant: an assigner is a pure function of (element, timestamp, current processing time)
to windows, with Flink's formulas: a window ``[start, end)`` has ``max_timestamp() == end - 1``;
tumbling and sliding starts are ``t - (t - offset) mod size`` (a non-negative remainder, so
negative timestamps land in the window below them); session windows merge when they
intersect or touch. Triggers and evictors live in ``window_triggers`` and are re-exported.

>>> TumblingEventTimeWindows.of(Time.seconds(1)).assign_windows(None, 1500, None)
[TimeWindow(start=1000, end=2000)]
>>> TumblingEventTimeWindows.of(Time.seconds(1)).assign_windows(None, -1, None)
[TimeWindow(start=-1000, end=0)]
>>> SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1)).assign_windows(None, 1500, None)
[TimeWindow(start=1000, end=3000), TimeWindow(start=0, end=2000)]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from cairn.common.time import Duration, Time
from cairn.datastream.window_triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountTrigger,
    EventTimeTrigger,
    Evictor,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    TimeEvictor,
    TimestampedValue,
    Trigger,
    TriggerResult,
)

__all__ = [
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountEvictor",
    "CountSlidingWindowAssigner",
    "CountTrigger",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "Evictor",
    "GlobalWindow",
    "GlobalWindows",
    "MergingWindowAssigner",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "SessionWindowTimeGapExtractor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeEvictor",
    "TimeWindow",
    "TimestampedValue",
    "Trigger",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
]

MAX_LONG = 2**63 - 1
MIN_LONG = -(2**63)

TimeSpan = Time | Duration | int
"""A size, slide, offset or gap: ``Time``, ``Duration`` or milliseconds."""


def to_millis(span: TimeSpan, what: str) -> int:
    """Milliseconds of ``span``; a clear ``TypeError`` for anything else."""
    if isinstance(span, bool) or not isinstance(span, (Time, Duration, int)):
        raise TypeError(f"{what} must be a Time, a Duration or milliseconds, got {span!r}")
    return span if isinstance(span, int) else span.to_milliseconds()


class Window(ABC):
    """A group of elements; ``max_timestamp()`` is the largest timestamp that belongs to it."""

    @abstractmethod
    def max_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True, order=True)
class TimeWindow(Window):
    """``[start, end)`` in ms.

    >>> w = TimeWindow(0, 1000); w.max_timestamp(), w.intersects(TimeWindow(1000, 2000))
    (999, True)
    >>> w.cover(TimeWindow(500, 3000))
    TimeWindow(start=0, end=3000)
    """

    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1

    def __reduce__(self) -> tuple[type[TimeWindow], tuple[int, int]]:
        # Every checkpoint pickles each live window of every key (contents, timers): the
        # slots dataclass default (__getstate__ through dataclasses.fields) costs several
        # times this. Pickles written with the default still load (__setstate__ is kept).
        return (TimeWindow, (self.start, self.end))

    def intersects(self, other: TimeWindow) -> bool:
        """Overlapping or touching (Flink merges touching session windows)."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` containing ``timestamp`` (Flink's formula).

        >>> TimeWindow.get_window_start_with_offset(-1, 0, 1000)
        -1000
        >>> TimeWindow.get_window_start_with_offset(1200, 300, 1000)
        300
        """
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable[TimeWindow]) -> list[tuple[TimeWindow, list[TimeWindow]]]:
        """Groups of intersecting windows and what each group covers (sorted by start)."""
        merged: list[tuple[TimeWindow, list[TimeWindow]]] = []
        for w in sorted(windows):
            if merged and merged[-1][0].intersects(w):
                cover, members = merged[-1]
                merged[-1] = (cover.cover(w), [*members, w])
            else:
                merged.append((w, [w]))
        return merged


@dataclass(frozen=True, slots=True)
class GlobalWindow(Window):
    """The one window of ``GlobalWindows``: it never ends."""

    @staticmethod
    def get() -> GlobalWindow:
        return _GLOBAL

    def max_timestamp(self) -> int:
        return MAX_LONG


_GLOBAL = GlobalWindow()


@dataclass(frozen=True, slots=True)
class CountWindow(Window):
    """A window of a count assigner, numbered by ``id``."""

    id: int

    def max_timestamp(self) -> int:
        return MAX_LONG


class WindowAssigner(ABC):
    """Assigns each element to zero or more windows; ``context`` gives processing time."""

    @abstractmethod
    def assign_windows(self, element: Any, timestamp: int, context: Any) -> Collection[Window]: ...

    @abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger: ...

    @abstractmethod
    def is_event_time(self) -> bool: ...


class MergingWindowAssigner(WindowAssigner):
    """An assigner whose windows merge (sessions)."""

    def merge_windows(
        self,
        windows: Iterable[TimeWindow],
        callback: Callable[[Collection[TimeWindow], TimeWindow], None],
    ) -> None:
        """Call ``callback(to_be_merged, merge_result)`` for every group of > 1 windows."""
        for cover, members in TimeWindow.merge_windows(windows):
            if len(members) > 1:
                callback(members, cover)


class _Tumbling(WindowAssigner):
    def __init__(self, size: TimeSpan, offset: TimeSpan = 0) -> None:
        self.size = to_millis(size, "size")
        self.offset = to_millis(offset, "offset")
        if self.size <= 0 or abs(self.offset) >= self.size:
            raise ValueError(
                f"{type(self).__name__} needs 0 < size and |offset| < size, "
                f"got size={self.size} ms, offset={self.offset} ms"
            )

    def _windows(self, timestamp: int) -> list[Window]:
        start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.offset})"


class TumblingEventTimeWindows(_Tumbling):
    """Fixed-size, non-overlapping event-time windows: ``TumblingEventTimeWindows.of(size)``."""

    @staticmethod
    def of(size: TimeSpan, offset: TimeSpan = 0) -> TumblingEventTimeWindows:
        return TumblingEventTimeWindows(size, offset)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[Window]:
        return self._windows(require_timestamp(timestamp))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class TumblingProcessingTimeWindows(_Tumbling):
    """Fixed-size, non-overlapping windows of the processing time an element arrives at."""

    @staticmethod
    def of(size: TimeSpan, offset: TimeSpan = 0) -> TumblingProcessingTimeWindows:
        return TumblingProcessingTimeWindows(size, offset)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[Window]:
        return self._windows(context.get_current_processing_time())

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False


class _Sliding(WindowAssigner):
    def __init__(self, size: TimeSpan, slide: TimeSpan, offset: TimeSpan = 0) -> None:
        self.size = to_millis(size, "size")
        self.slide = to_millis(slide, "slide")
        self.offset = to_millis(offset, "offset")
        if self.slide <= 0 or self.size <= 0 or abs(self.offset) >= self.slide:
            raise ValueError(
                f"{type(self).__name__} needs 0 < size, 0 < slide and |offset| < slide, got "
                f"size={self.size} ms, slide={self.slide} ms, offset={self.offset} ms"
            )

    def _windows(self, timestamp: int) -> list[Window]:
        """Latest window first, as Flink lists them."""
        last_start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.slide)
        windows: list[Window] = []
        start = last_start
        while start > timestamp - self.size:
            windows.append(TimeWindow(start, start + self.size))
            start -= self.slide
        return windows

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide}, {self.offset})"


class SlidingEventTimeWindows(_Sliding):
    """Event-time windows of ``size`` starting every ``slide``: an element is in
    ``ceil(size / slide)`` of them (fewer when ``slide`` does not divide ``size``)."""

    @staticmethod
    def of(size: TimeSpan, slide: TimeSpan, offset: TimeSpan = 0) -> SlidingEventTimeWindows:
        return SlidingEventTimeWindows(size, slide, offset)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[Window]:
        return self._windows(require_timestamp(timestamp))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class SlidingProcessingTimeWindows(_Sliding):
    """Processing-time windows of ``size`` starting every ``slide``."""

    @staticmethod
    def of(size: TimeSpan, slide: TimeSpan, offset: TimeSpan = 0) -> SlidingProcessingTimeWindows:
        return SlidingProcessingTimeWindows(size, slide, offset)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[Window]:
        return self._windows(context.get_current_processing_time())

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False


class SessionWindowTimeGapExtractor(ABC):
    """The gap of a dynamic session window, per element, in ms."""

    @abstractmethod
    def extract(self, element: Any) -> int: ...


class _Session(MergingWindowAssigner):
    def __init__(self, gap: TimeSpan | SessionWindowTimeGapExtractor | Callable[[Any], int]):
        if isinstance(gap, SessionWindowTimeGapExtractor):
            self._gap: Callable[[Any], int] = gap.extract
        elif callable(gap) and not isinstance(gap, (Time, Duration, int)):
            self._gap = gap
        else:
            fixed = to_millis(gap, "session gap")
            if fixed <= 0:
                raise ValueError(f"{type(self).__name__} needs a gap > 0, got {fixed} ms")
            self._gap = lambda _element: fixed

    def _windows(self, element: Any, timestamp: int) -> list[Window]:
        gap = self._gap(element)
        if not isinstance(gap, int) or isinstance(gap, bool) or gap <= 0:
            raise ValueError(f"a session gap must be an int of ms > 0, the extractor gave {gap!r}")
        return [TimeWindow(timestamp, timestamp + gap)]


class EventTimeSessionWindows(_Session):
    """Event-time sessions: ``with_gap(gap)`` or ``with_dynamic_gap(extractor)``."""

    @staticmethod
    def with_gap(size: TimeSpan) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(size)

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[Window]:
        return self._windows(element, require_timestamp(timestamp))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


class ProcessingTimeSessionWindows(_Session):
    """Processing-time sessions: ``with_gap(gap)`` or ``with_dynamic_gap(extractor)``."""

    @staticmethod
    def with_gap(size: TimeSpan) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(size)

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[Window]:
        return self._windows(element, context.get_current_processing_time())

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False


DynamicEventTimeSessionWindows = EventTimeSessionWindows
DynamicProcessingTimeSessionWindows = ProcessingTimeSessionWindows


class GlobalWindows(WindowAssigner):
    """Every element in the one ``GlobalWindow``; fires only with a custom trigger."""

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[Window]:
        return [_GLOBAL]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False


class CountTumblingWindowAssigner(GlobalWindows):
    """``count_window(size)``: a firing (and purge) every ``size`` elements of a key (Flink's
    ``GlobalWindows`` with ``PurgingTrigger.of(CountTrigger.of(size))``)."""

    def __init__(self, window_size: int) -> None:
        self.window_size = _positive_count(window_size, "count window size")

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        return CountTumblingWindowAssigner(window_size)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger.of(CountTrigger.of(self.window_size))


class CountSlidingWindowAssigner(GlobalWindows):
    """``count_window(size, slide)``: every ``slide`` elements, the last ``size`` of them
    (``CountTrigger.of(slide)``; ``WindowedStream`` adds ``CountEvictor.of(size)``)."""

    def __init__(self, window_size: int, window_slide: int) -> None:
        self.window_size = _positive_count(window_size, "count window size")
        self.window_slide = _positive_count(window_slide, "count window slide")

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:
        return CountSlidingWindowAssigner(window_size, window_slide)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return CountTrigger.of(self.window_slide)


def _positive_count(n: int, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"{what} must be an int > 0, got {n!r}")
    return n


def require_timestamp(timestamp: int | None) -> int:
    """Event-time assigners need a timestamp (Flink's message when there is none)."""
    if timestamp is None:
        raise ValueError(
            "Record has no timestamp. Is the time characteristic set to processing time, or did "
            "you forget to call 'DataStream.assign_timestamps_and_watermarks(...)'?"
        )
    return timestamp
