"""``ConnectedStreams``, ``BroadcastStream`` and ``BroadcastConnectedStream``
(``pyflink.datastream.data_stream``): one operator over two inputs.

Invariant: each call adds one ``TwoInputTransformation`` whose first input is the stream
``connect`` was called on and whose second is its argument; keyed connected streams carry
both key selectors (the first in the spec, the second in its options), so records of either
input with the same key reach the same subtask and see the same keyed state and timers. A
broadcast stream reaches every subtask of the operator and names its broadcast states.

>>> from cairn.datastream import StreamExecutionEnvironment
>>> from cairn.api.co_functions import CoMapFunction
>>> class Tag(CoMapFunction):
...     def map1(self, value): return ("a", value)
...     def map2(self, value): return ("b", value)
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> both = env.from_collection([1]).connect(env.from_collection([2])).map(Tag())
>>> both.get_name(), [i.name for i in both.get_transformation().inputs]
('Co-Map', ['Collection Source', 'Collection Source'])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.api.co_functions import (
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
)
from cairn.api.functions import KeySelector
from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import TypeInformation
from cairn.datastream.data_stream import DataStream
from cairn.graph.transformations import (
    BROADCAST_STATES,
    KEY_SELECTOR2,
    OperatorKind,
    OperatorSpec,
    PartitionKind,
    PartitionTransformation,
    TwoInputTransformation,
)

__all__ = ["BroadcastConnectedStream", "BroadcastStream", "ConnectedStreams"]


def _two_input(
    name: str,
    first: DataStream,
    second: DataStream,
    kind: OperatorKind,
    func: Any,
    output_type: TypeInformation | None,
    options: dict[str, Any],
) -> DataStream:
    t = TwoInputTransformation(
        name=name,
        inputs=[first.get_transformation(), second.get_transformation()],
        output_type=output_type,
        operator=OperatorSpec(kind, func, first.get_key_selector(), options),
    )
    return DataStream(t, first.get_execution_environment())


class ConnectedStreams:
    """Two streams, possibly of different types, processed by one operator
    (``a.connect(b)``). Keyed when both are keyed (``key_by`` here or before ``connect``)."""

    def __init__(self, stream1: DataStream, stream2: DataStream) -> None:
        if stream1.get_execution_environment() is not stream2.get_execution_environment():
            raise ValueError("Cannot connect streams of different StreamExecutionEnvironments")
        self.stream1 = stream1
        self.stream2 = stream2

    def _is_keyed(self) -> bool:
        return (
            self.stream1.get_key_selector() is not None
            and self.stream2.get_key_selector() is not None
        )

    def key_by(
        self,
        key_selector1: KeySelector | Callable[[Any], Any],
        key_selector2: KeySelector | Callable[[Any], Any],
        key_type: TypeInformation | None = None,
    ) -> ConnectedStreams:
        """Key both inputs: records with equal keys meet in the same subtask and state."""
        return ConnectedStreams(
            self.stream1.key_by(key_selector1, key_type),
            self.stream2.key_by(key_selector2, key_type),
        )

    def _options(self) -> dict[str, Any]:
        return {KEY_SELECTOR2: self.stream2.get_key_selector()} if self._is_keyed() else {}

    def _first(self) -> DataStream:
        # Non-keyed connected streams run non-keyed even when one input is keyed.
        if self._is_keyed():
            return self.stream1
        return DataStream(
            self.stream1.get_transformation(), self.stream1.get_execution_environment()
        )

    def map(self, func: CoMapFunction, output_type: TypeInformation | None = None) -> DataStream:
        """``func.map1`` for the first input's records, ``func.map2`` for the second's."""
        if not isinstance(func, CoMapFunction):
            raise TypeError(f"map() on ConnectedStreams needs a CoMapFunction, got {func!r}")
        return _two_input(
            "Co-Map",
            self._first(),
            self.stream2,
            OperatorKind.CO_MAP,
            func,
            output_type,
            self._options(),
        )

    def flat_map(
        self, func: CoFlatMapFunction, output_type: TypeInformation | None = None
    ) -> DataStream:
        """``func.flat_map1``/``flat_map2`` yield zero or more outputs per record."""
        if not isinstance(func, CoFlatMapFunction):
            raise TypeError(
                f"flat_map() on ConnectedStreams needs a CoFlatMapFunction, got {func!r}"
            )
        return _two_input(
            "Co-Flat Map",
            self._first(),
            self.stream2,
            OperatorKind.CO_FLAT_MAP,
            func,
            output_type,
            self._options(),
        )

    def process(
        self,
        func: CoProcessFunction | KeyedCoProcessFunction,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """A ``CoProcessFunction``, or on keyed inputs a ``KeyedCoProcessFunction`` (keyed
        state, event- and processing-time timers)."""
        if self._is_keyed():
            if not isinstance(func, KeyedCoProcessFunction):
                raise TypeError(
                    "KeyedCoProcessFunction is required for keyed ConnectedStreams, got "
                    + type(func).__name__
                )
            kind, name = OperatorKind.KEYED_CO_PROCESS, "Keyed Co-Process"
        else:
            if not isinstance(func, CoProcessFunction):
                raise TypeError(
                    "CoProcessFunction is required for non-keyed ConnectedStreams, got "
                    + type(func).__name__
                    + " (a KeyedCoProcessFunction needs key_by() first)"
                )
            kind, name = OperatorKind.CO_PROCESS, "Co-Process"
        return _two_input(
            name, self._first(), self.stream2, kind, func, output_type, self._options()
        )


class BroadcastStream:
    """A stream sent to every subtask of the operator it is connected to, with the broadcast
    states (``MapStateDescriptor``s) that operator's broadcast side may write
    (``rules.broadcast(descriptor)``). It has no operators of its own: ``connect`` it."""

    def __init__(self, stream: DataStream, descriptors: tuple[MapStateDescriptor, ...]) -> None:
        if not descriptors:
            raise ValueError("broadcast() with state needs at least one MapStateDescriptor")
        for d in descriptors:
            if not isinstance(d, MapStateDescriptor):
                raise TypeError(f"broadcast state is described by MapStateDescriptors, got {d!r}")
        names = [d.name for d in descriptors]
        if len(set(names)) != len(names):
            raise ValueError(f"broadcast state names must be unique, got {names}")
        # The input as the connected operator receives it: broadcast to every subtask.
        self.partitioned_stream = DataStream(
            PartitionTransformation(
                name="Broadcast",
                inputs=[stream.get_transformation()],
                output_type=stream.get_transformation().output_type,
                partition=PartitionKind.BROADCAST,
            ),
            stream.get_execution_environment(),
        )
        self.broadcast_state_descriptors = descriptors

    def get_execution_environment(self) -> Any:
        return self.partitioned_stream.get_execution_environment()


class BroadcastConnectedStream:
    """A (keyed or non-keyed) stream connected with a ``BroadcastStream``
    (``ds.connect(rules.broadcast(descriptor))``)."""

    def __init__(self, non_broadcast: DataStream, broadcast: BroadcastStream) -> None:
        if non_broadcast.get_execution_environment() is not broadcast.get_execution_environment():
            raise ValueError("Cannot connect streams of different StreamExecutionEnvironments")
        self.non_broadcast_stream = non_broadcast
        self.broadcast_stream = broadcast

    def process(
        self,
        func: BroadcastProcessFunction | KeyedBroadcastProcessFunction,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """A ``BroadcastProcessFunction``, or after ``key_by`` a
        ``KeyedBroadcastProcessFunction``."""
        first = self.non_broadcast_stream
        if first.get_key_selector() is not None:
            if not isinstance(func, KeyedBroadcastProcessFunction):
                raise TypeError(
                    "KeyedBroadcastProcessFunction is required for a keyed stream connected "
                    "with a BroadcastStream, got " + type(func).__name__
                )
            kind, name = OperatorKind.KEYED_BROADCAST_PROCESS, "Co-Process-Broadcast-Keyed"
        else:
            if not isinstance(func, BroadcastProcessFunction):
                raise TypeError(
                    "BroadcastProcessFunction is required for a non-keyed stream connected "
                    "with a BroadcastStream, got " + type(func).__name__
                )
            kind, name = OperatorKind.BROADCAST_PROCESS, "Co-Process-Broadcast"
        options = {BROADCAST_STATES: self.broadcast_stream.broadcast_state_descriptors}
        second = self.broadcast_stream.partitioned_stream
        return _two_input(name, first, second, kind, func, output_type, options)


def connect(
    stream: DataStream, other: DataStream | BroadcastStream
) -> ConnectedStreams | BroadcastConnectedStream:
    """``stream.connect(other)``: see ``DataStream.connect``."""
    if isinstance(other, BroadcastStream):
        return BroadcastConnectedStream(stream, other)
    if not isinstance(other, DataStream):
        raise TypeError(
            f"connect() takes a DataStream or a BroadcastStream, got {type(other).__name__}"
        )
    return ConnectedStreams(stream, other)
