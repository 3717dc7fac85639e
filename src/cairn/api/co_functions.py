"""Functions of two inputs (PyFlink's ``CoMapFunction``, ``CoFlatMapFunction``,
``CoProcessFunction``, ``KeyedCoProcessFunction``, ``BroadcastProcessFunction``,
``KeyedBroadcastProcessFunction``), re-exported by ``cairn.api.functions``.

Invariant: interfaces only; the runtime calls the ``…1`` method for records of the first
input and the ``…2`` method for the second (``process_element`` and
``process_broadcast_element`` for broadcast-connected streams), one record at a time on one
thread, so a function may share plain attributes between its two methods.

>>> class Join(CoFlatMapFunction):
...     def flat_map1(self, value):
...         yield ("left", value)
...     def flat_map2(self, value):
...         yield ("right", value)
>>> list(Join().flat_map2(3))
[('right', 3)]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from cairn.api.runtime_context import Function
from cairn.api.state import MapStateDescriptor
from cairn.api.time_domain import TimeDomain
from cairn.api.timerservice import TimerService

__all__ = [
    "BroadcastProcessFunction",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
]


class CoMapFunction(Function):
    """One output per record of either input."""

    @abstractmethod
    def map1(self, value: Any) -> Any: ...

    @abstractmethod
    def map2(self, value: Any) -> Any: ...


class CoFlatMapFunction(Function):
    """Zero or more outputs per record of either input (yield them)."""

    @abstractmethod
    def flat_map1(self, value: Any) -> Iterable[Any] | None: ...

    @abstractmethod
    def flat_map2(self, value: Any) -> Iterable[Any] | None: ...


class CoProcessFunction(Function):
    """Low-level function of two non-keyed inputs (no timers: they need keys)."""

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int | None: ...

        @abstractmethod
        def timer_service(self) -> TimerService: ...

    @abstractmethod
    def process_element1(self, value: Any, ctx: CoProcessFunction.Context) -> Any: ...

    @abstractmethod
    def process_element2(self, value: Any, ctx: CoProcessFunction.Context) -> Any: ...


class KeyedCoProcessFunction(Function):
    """Function of two keyed inputs with keyed state and timers (``a.connect(b).key_by(k1,
    k2).process(f)``); records of both inputs with the same key see the same state."""

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int | None: ...

        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(Context):
        @abstractmethod
        def time_domain(self) -> TimeDomain: ...

    @abstractmethod
    def process_element1(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Any: ...

    @abstractmethod
    def process_element2(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Any: ...

    def on_timer(self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext) -> Any:
        """A timer of ``ctx.get_current_key()`` fired; emit like ``process_element1``."""
        return None


class _BaseBroadcastContext(ABC):
    @abstractmethod
    def timestamp(self) -> int | None: ...

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...


class BroadcastProcessFunction(Function):
    """Non-broadcast records with read-only broadcast state, broadcast records with writable
    broadcast state (``ds.connect(rules.broadcast(descriptor)).process(f)``)."""

    class ReadOnlyContext(_BaseBroadcastContext):
        @abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
            """A ``ReadOnlyBroadcastState``: reads only."""

    class Context(_BaseBroadcastContext):
        @abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
            """The ``BroadcastState``: update it alike on every subtask."""

    @abstractmethod
    def process_element(self, value: Any, ctx: BroadcastProcessFunction.ReadOnlyContext) -> Any: ...

    @abstractmethod
    def process_broadcast_element(
        self, value: Any, ctx: BroadcastProcessFunction.Context
    ) -> Any: ...


class KeyedBroadcastProcessFunction(Function):
    """As ``BroadcastProcessFunction`` on a keyed stream: keyed state and timers on the
    non-broadcast side, ``ctx.apply_to_keyed_state`` on the broadcast side."""

    class ReadOnlyContext(_BaseBroadcastContext):
        @abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any: ...

        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def get_current_key(self) -> Any: ...

    class Context(_BaseBroadcastContext):
        @abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any: ...

        @abstractmethod
        def apply_to_keyed_state(
            self, state_descriptor: Any, function: Callable[[Any, Any], None]
        ) -> None:
            """Call ``function(key, state)`` for every key of this subtask with that state."""

    class OnTimerContext(ReadOnlyContext):
        @abstractmethod
        def time_domain(self) -> TimeDomain: ...

    @abstractmethod
    def process_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext
    ) -> Any: ...

    @abstractmethod
    def process_broadcast_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.Context
    ) -> Any: ...

    def on_timer(self, timestamp: int, ctx: KeyedBroadcastProcessFunction.OnTimerContext) -> Any:
        return None
