"""User function interfaces with PyFlink's names (``pyflink.datastream.functions``).

Invariant: these are abstract interfaces and base classes only; the runtime implements every
context (``RuntimeContext``, ``ProcessFunction.Context``, ``TimerService``...). A function
object is created on the driver, pickled with cloudpickle and unpickled once per subtask; then
``open`` → per-record methods → ``close`` run on one thread. Resources (connections, files,
locks) belong in ``open``, not ``__init__``, because they do not pickle.

Wherever PyFlink accepts a function object, a plain callable works too
(``ds.map(lambda x: x + 1)``). Per-record methods that produce several outputs
(``flat_map``, ``process_element``, ``on_timer``) may ``yield``, return an iterable, or return
``None`` for no output.

``Function`` and ``RuntimeContext`` live in ``cairn.api.runtime_context``; source, sink
and checkpoint interfaces in ``cairn.api.source_sink_functions``; all are re-exported
here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from cairn.api.async_functions import (
    AsyncFunction,
    AsyncRetryPredicate,
    AsyncRetryStrategy,
    ResultFuture,
)
from cairn.api.co_functions import (
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
)
from cairn.api.runtime_context import Function, KeyedStateStore, MetricGroup, RuntimeContext
from cairn.api.source_sink_functions import (
    CheckpointedFunction,
    CheckpointListener,
    FunctionInitializationContext,
    FunctionSnapshotContext,
    OperatorStateStore,
    SinkFunction,
    SourceContext,
    SourceFunction,
)
from cairn.api.time_domain import TimeDomain
from cairn.api.timerservice import TimerService
from cairn.api.window_functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "BroadcastProcessFunction",
    "CheckpointListener",
    "CheckpointedFunction",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "FilterFunction",
    "FlatMapFunction",
    "Function",
    "FunctionInitializationContext",
    "FunctionSnapshotContext",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStateStore",
    "MapFunction",
    "MetricGroup",
    "OperatorStateStore",
    "Partitioner",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "ResultFuture",
    "RuntimeContext",
    "SinkFunction",
    "SourceContext",
    "SourceFunction",
    "TimeDomain",
    "TimerService",
    "WindowFunction",
    "key_function",
]

KEY = TypeVar("KEY")
IN = TypeVar("IN")
OUT = TypeVar("OUT")
ACC = TypeVar("ACC")


class MapFunction(Function):
    """One output per input: ``ds.map(MyMap())``."""

    @abstractmethod
    def map(self, value: Any) -> Any: ...


class FlatMapFunction(Function):
    """Zero or more outputs per input: ``yield`` them or return an iterable."""

    @abstractmethod
    def flat_map(self, value: Any) -> Iterable[Any] | None: ...


class FilterFunction(Function):
    """Keeps the records for which ``filter`` returns a true value."""

    @abstractmethod
    def filter(self, value: Any) -> bool: ...


class ReduceFunction(Function):
    """Combines two values of the same type into one (``KeyedStream.reduce``)."""

    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class AggregateFunction(Function, Generic[IN, ACC, OUT]):
    """Incremental aggregation through an accumulator (``AggregatingStateDescriptor``)."""

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC:
        raise NotImplementedError(f"{type(self).__name__} does not implement merge()")


class KeySelector(Function):
    """Extracts the key of a record (``ds.key_by(MySelector())``); also callable."""

    @abstractmethod
    def get_key(self, value: Any) -> Any: ...

    def __call__(self, value: Any) -> Any:
        return self.get_key(value)


def key_function(selector: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The callable the runtime calls per record for ``selector``: a ``KeySelector``'s bound
    ``get_key`` (one call instead of two through ``__call__``), any other callable itself.

    >>> class First(KeySelector):
    ...     def get_key(self, value): return value[0]
    >>> key_function(First())(("a", 1)), key_function(len)("ab")
    ('a', 2)
    """
    if isinstance(selector, KeySelector) and type(selector).__call__ is KeySelector.__call__:
        return selector.get_key
    return selector


class Partitioner(Function):
    """Chooses the downstream subtask of a key (``ds.partition_custom(partitioner, selector)``).

    >>> class Modulo(Partitioner):
    ...     def partition(self, key, num_partitions): return key % num_partitions
    >>> Modulo().partition(7, 3)
    1
    """

    @abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int:
        """A partition in ``[0, num_partitions)`` for ``key``."""


class ProcessFunction(Function, Generic[IN, OUT]):
    """Low-level per-record function on a non-keyed stream (``ds.process(f)``)."""

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int | None:
            """Event-time timestamp of the current record; ``None`` if it has none."""

        @abstractmethod
        def timer_service(self) -> TimerService:
            """Current time only: timers need a keyed stream."""

    @abstractmethod
    def process_element(self, value: IN, ctx: ProcessFunction.Context) -> Iterable[OUT] | None:
        """Emit outputs by yielding them (or returning an iterable)."""


class KeyedProcessFunction(Function, Generic[KEY, IN, OUT]):
    """Per-record function on a ``KeyedStream`` with keyed state and timers.

    >>> class KeyedSum(KeyedProcessFunction[str, int, int]):
    ...     def process_element(self, value, ctx):
    ...         yield value
    """

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int | None:
            """Timestamp of the current record (``None`` if it has none), or of the timer."""

        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def get_current_key(self) -> Any:
            """The key of the record (or timer) being processed."""

    class OnTimerContext(Context):
        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """Which clock fired the timer: EVENT_TIME (a watermark) or PROCESSING_TIME."""

    @abstractmethod
    def process_element(
        self, value: IN, ctx: KeyedProcessFunction.Context
    ) -> Iterable[OUT] | None: ...

    def on_timer(
        self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext
    ) -> Iterable[OUT] | None:
        """A timer of ``ctx.get_current_key()`` fired; emit like ``process_element``."""
        return None
