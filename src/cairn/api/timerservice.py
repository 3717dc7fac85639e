"""Timers and the current time for process functions (``pyflink.datastream.TimerService``).

Invariant: implemented by the runtime, one per keyed operator subtask; timers are scoped to
the current key and checkpointed with the keyed state (restored at any parallelism, with their
key groups). An event-time timer fires once the operator's watermark reaches its timestamp.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["MIN_WATERMARK", "TimerService"]

MIN_WATERMARK = -(2**63)
"""Flink's initial watermark (``Long.MIN_VALUE``)."""

_EVENT_TIME_MESSAGE = "this timer service has no event-time timers"


class TimerService(ABC):
    """Current time and timers of the current key.

    >>> class Clock(TimerService):
    ...     def current_processing_time(self): return 42
    ...     def register_processing_time_timer(self, timestamp): pass
    ...     def delete_processing_time_timer(self, timestamp): pass
    >>> Clock().current_watermark() == MIN_WATERMARK
    True
    """

    @abstractmethod
    def current_processing_time(self) -> int:
        """Wall-clock time of the worker, epoch milliseconds."""

    def current_watermark(self) -> int:
        """The operator's current event-time watermark (``MIN_WATERMARK`` before the first)."""
        return MIN_WATERMARK

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` once processing time reaches ``timestamp`` (epoch ms), for the
        current key. Registering the same timestamp twice fires once."""

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Remove a timer of the current key; no-op if there is none."""

    def register_event_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` once the watermark reaches ``timestamp``, for the current key;
        its outputs carry ``timestamp``. Registering the same timestamp twice fires once."""
        raise NotImplementedError(_EVENT_TIME_MESSAGE)

    def delete_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError(_EVENT_TIME_MESSAGE)
