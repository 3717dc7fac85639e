"""Window functions with PyFlink's names (``pyflink.datastream.functions``).

Invariant: interfaces only; the window operator (``window_operator``) calls them once per
firing of a window with the window's elements (or the single pre-aggregated value of
``reduce``/``aggregate``), with the window's key current for state access.

>>> class Count(ProcessWindowFunction):
...     def process(self, key, context, elements):
...         yield key, context.window().start, len(list(elements))
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Generic, TypeVar

from cairn.api.runtime_context import Function, KeyedStateStore

__all__ = [
    "AllWindowFunction",
    "ProcessAllWindowFunction",
    "ProcessWindowFunction",
    "WindowFunction",
]

KEY = TypeVar("KEY")
IN = TypeVar("IN")
OUT = TypeVar("OUT")
W = TypeVar("W")
W2 = TypeVar("W2")


class _WindowContext(ABC, Generic[W]):
    @abstractmethod
    def window(self) -> W: ...

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...

    @abstractmethod
    def window_state(self) -> KeyedStateStore:
        """State of the current key *and window* (cleared by you, in ``clear``)."""

    @abstractmethod
    def global_state(self) -> KeyedStateStore:
        """State of the current key, shared by all its windows."""


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Gets all elements of a firing window (or the pre-aggregated one) with a context."""

    class Context(_WindowContext[W2]):
        """Generic in the window type, as PyFlink's: ``Context[TimeWindow]``."""

    @abstractmethod
    def process(
        self, key: KEY, context: ProcessWindowFunction.Context[W], elements: Iterable[IN]
    ) -> Iterable[OUT] | None: ...

    def clear(self, context: ProcessWindowFunction.Context[W]) -> None:
        """Called when the window is purged at its cleanup time (free ``window_state``)."""


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """``window_all`` counterpart of ``ProcessWindowFunction`` (no key)."""

    class Context(_WindowContext[W2]):
        """Generic in the window type, as PyFlink's."""

    @abstractmethod
    def process(
        self, context: ProcessAllWindowFunction.Context[W], elements: Iterable[IN]
    ) -> Iterable[OUT] | None: ...

    def clear(self, context: ProcessAllWindowFunction.Context[W]) -> None:
        """Called when the window is purged at its cleanup time."""


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """``apply``: the key, the window and its elements."""

    @abstractmethod
    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Iterable[OUT] | None: ...


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """``window_all(...).apply``: the window and its elements."""

    @abstractmethod
    def apply(self, window: W, inputs: Iterable[IN]) -> Iterable[OUT] | None: ...
