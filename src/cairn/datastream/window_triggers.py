"""Triggers and evictors with PyFlink's names (re-exported by ``cairn.datastream.window``).

Invariant: a trigger decides from its arguments and the state and timers it reaches through
its ``TriggerContext`` only (both scoped to the current key and window by the operator), so
its results are a pure function of what it saw; Flink's built-in triggers keep Flink's rules
(``EventTimeTrigger`` fires a window at once when the watermark already passed its end).

>>> from cairn.datastream.window import TimeWindow
>>> class Ctx:
...     def get_current_watermark(self): return 500
...     def register_event_time_timer(self, t): print("timer", t)
>>> EventTimeTrigger.create().on_element("x", 10, TimeWindow(0, 1000), Ctx())
timer 999
<TriggerResult.CONTINUE: (False, False)>
>>> EventTimeTrigger.create().on_event_time(999, TimeWindow(0, 1000), Ctx()).is_fire()
True
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from cairn.api.state import ReducingStateDescriptor
from cairn.common.time import Duration, Time

__all__ = [
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountEvictor",
    "CountTrigger",
    "EventTimeTrigger",
    "Evictor",
    "NeverTrigger",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "TimeEvictor",
    "TimestampedValue",
    "Trigger",
    "TriggerResult",
]


class TriggerResult(enum.Enum):
    """What a trigger asks for: (fire the window function, purge the window's contents)."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class Trigger(ABC):
    """Decides when a window fires. ``ctx`` is a ``Trigger.TriggerContext``; timers set
    through it call back ``on_event_time``/``on_processing_time`` for the same window."""

    class TriggerContext(ABC):
        @abstractmethod
        def get_current_processing_time(self) -> int: ...

        @abstractmethod
        def get_current_watermark(self) -> int: ...

        @abstractmethod
        def register_processing_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def register_event_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def delete_processing_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def delete_event_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def get_partitioned_state(self, state_descriptor: Any) -> Any:
            """Value or reducing state of the current key and window."""

    class OnMergeContext(TriggerContext):
        @abstractmethod
        def merge_partitioned_state(self, state_descriptor: Any) -> None: ...

    @abstractmethod
    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult: ...

    @abstractmethod
    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult: ...

    @abstractmethod
    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult: ...

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: Any, ctx: Any) -> None:
        raise TypeError(f"{type(self).__name__} does not support merging windows")

    @abstractmethod
    def clear(self, window: Any, ctx: Any) -> None: ...


class EventTimeTrigger(Trigger):
    """Fires once the watermark passes the window's end (the event-time default)."""

    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # late but within allowed lateness: fire at once
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())


class ProcessingTimeTrigger(Trigger):
    """Fires when processing time passes the window's end (the processing-time default)."""

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.FIRE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())


class NeverTrigger(Trigger):
    """``GlobalWindows``' default: never fires."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        pass

    def clear(self, window: Any, ctx: Any) -> None:
        pass


def _add(a: int, b: int) -> int:
    return a + b


class CountTrigger(Trigger):
    """Fires each time the window got ``count`` more elements."""

    def __init__(self, count: int) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ValueError(f"CountTrigger needs a count > 0, got {count!r}")
        self.count = count
        self._state = ReducingStateDescriptor("count", _add)

    @staticmethod
    def of(count: int) -> CountTrigger:
        return CountTrigger(count)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        state = ctx.get_partitioned_state(self._state)
        state.add(1)
        if state.get() >= self.count:
            state.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        ctx.merge_partitioned_state(self._state)

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.get_partitioned_state(self._state).clear()


class PurgingTrigger(Trigger):
    """Turns every FIRE of ``nested_trigger`` into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger) -> None:
        if not isinstance(nested_trigger, Trigger):
            raise TypeError(f"PurgingTrigger needs a Trigger, got {type(nested_trigger).__name__}")
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Any, ctx: Any) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def clear(self, window: Any, ctx: Any) -> None:
        self.nested_trigger.clear(window, ctx)


def _interval(interval: Time | Duration | int) -> int:
    ms = interval if isinstance(interval, int) else interval.to_milliseconds()
    if ms <= 0:
        raise ValueError(f"a trigger interval must be > 0 ms, got {ms}")
    return ms


class _ContinuousTrigger(Trigger):
    """What Flink's two continuous triggers share: the next fire time (aligned to multiples
    of ``interval``, at most the window's end) in a reducing state kept at its minimum, with
    one timer for it in the trigger's time domain (``_register``/``_delete``)."""

    def __init__(self, interval: Time | Duration | int) -> None:
        self.interval = _interval(interval)
        self._state = ReducingStateDescriptor("fire-time", min)

    @abstractmethod
    def _register(self, ctx: Any, time: int) -> None:
        """Register a timer at ``time`` in the trigger's time domain."""

    @abstractmethod
    def _delete(self, ctx: Any, time: int) -> None:
        """Delete the timer at ``time`` of the trigger's time domain."""

    def _first(self, time: int, window: Any, ctx: Any) -> None:
        """An element at ``time`` (its domain's): set the first fire time if none is set."""
        state = ctx.get_partitioned_state(self._state)
        if state.get() is None:
            self._next(time - time % self.interval, window, state, ctx)

    def _next(self, time: int, window: Any, state: Any, ctx: Any) -> None:
        fire = min(time + self.interval, window.max_timestamp())
        state.add(fire)
        self._register(ctx, fire)

    def _on_own_timer(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        """A timer of the trigger's domain: fire if it is the set fire time, set the next."""
        state = ctx.get_partitioned_state(self._state)
        if state.get() == time:
            state.clear()
            self._next(time, window, state, ctx)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        ctx.merge_partitioned_state(self._state)
        fire = ctx.get_partitioned_state(self._state).get()
        if fire is not None:
            self._register(ctx, fire)

    def clear(self, window: Any, ctx: Any) -> None:
        state = ctx.get_partitioned_state(self._state)
        fire = state.get()
        if fire is not None:
            self._delete(ctx, fire)
            state.clear()


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of event time (aligned to multiples of it) and at the end."""

    @staticmethod
    def of(interval: Time | Duration | int) -> ContinuousEventTimeTrigger:
        return ContinuousEventTimeTrigger(interval)

    def _register(self, ctx: Any, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete(self, ctx: Any, time: int) -> None:
        ctx.delete_event_time_timer(time)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        self._first(timestamp, window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._on_own_timer(time, window, ctx)

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of processing time (aligned to multiples of it)."""

    @staticmethod
    def of(interval: Time | Duration | int) -> ContinuousProcessingTimeTrigger:
        return ContinuousProcessingTimeTrigger(interval)

    def _register(self, ctx: Any, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete(self, ctx: Any, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        self._first(ctx.get_current_processing_time(), window, ctx)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return self._on_own_timer(time, window, ctx)

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE


@dataclass(frozen=True, slots=True)
class TimestampedValue:
    """An element of a window with an evictor, with its timestamp (``None``: none)."""

    value: Any
    timestamp: int | None

    def get_value(self) -> Any:
        return self.value

    def get_timestamp(self) -> int | None:
        return self.timestamp

    def has_timestamp(self) -> bool:
        return self.timestamp is not None


class Evictor(ABC):
    """Removes elements of a firing window (from the ``elements`` list, in place) before
    and/or after the window function runs."""

    @abstractmethod
    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None: ...

    @abstractmethod
    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None: ...


class CountEvictor(Evictor):
    """Keeps the last ``max_count`` elements.

    >>> e = [TimestampedValue(v, None) for v in "abcd"]
    >>> CountEvictor.of(2).evict_before(e, 4, None, None); [x.value for x in e]
    ['c', 'd']
    """

    def __init__(self, max_count: int, do_evict_after: bool = False) -> None:
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 0:
            raise ValueError(f"CountEvictor needs a max_count >= 0, got {max_count!r}")
        self.max_count = max_count
        self.do_evict_after = do_evict_after

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> CountEvictor:
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        if size > self.max_count:
            del elements[: size - self.max_count]

    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if self.do_evict_after:
            self._evict(elements, size)


class TimeEvictor(Evictor):
    """Keeps elements newer than the window's newest timestamp minus ``window_size``.

    >>> e = [TimestampedValue(v, t) for v, t in [("a", 1), ("b", 5), ("c", 9)]]
    >>> TimeEvictor.of(4).evict_before(e, 3, None, None); [x.value for x in e]
    ['c']
    """

    def __init__(self, window_size: Time | Duration | int, do_evict_after: bool = False) -> None:
        self.window_size = _interval(window_size)
        self.do_evict_after = do_evict_after

    @staticmethod
    def of(window_size: Time | Duration | int, do_evict_after: bool = False) -> TimeEvictor:
        return TimeEvictor(window_size, do_evict_after)

    def _evict(self, elements: list[TimestampedValue]) -> None:
        stamps = [e.timestamp for e in elements if e.timestamp is not None]
        if not stamps:
            return
        cutoff = max(stamps) - self.window_size
        elements[:] = [e for e in elements if e.timestamp is None or e.timestamp > cutoff]

    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if not self.do_evict_after:
            self._evict(elements)

    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if self.do_evict_after:
            self._evict(elements)
