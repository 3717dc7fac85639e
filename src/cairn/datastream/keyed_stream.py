"""``KeyedStream``: a stream partitioned by key (``ds.key_by(selector)``).

Invariant: the stream itself is a HASH partitioning, not an operator; every operator applied to
it (map, flat_map, filter, process, reduce, sum...) carries the key selector in its
``OperatorSpec`` (``DataStream.append_operator`` adds it), so it runs keyed: keyed state and
timers are scoped to the current key, even inside a plain ``RichMapFunction``-style
``MapFunction``.

>>> from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> keyed = env.from_collection([("a", 1), ("b", 2)]).key_by(lambda r: r[0])
>>> summed = keyed.sum(1)
>>> summed.get_transformation().operator.kind.value, summed.get_transformation().operator.function
('reduce', sum(1))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from cairn.api.aggregations import AccumulateReduceFunction
from cairn.api.functions import KeyedProcessFunction, KeySelector, ReduceFunction
from cairn.common.typeinfo import RowTypeInfo, TypeInformation
from cairn.datastream.data_stream import DataStream, check_function
from cairn.graph.transformations import OperatorKind, PartitionTransformation

if TYPE_CHECKING:
    from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
    from cairn.datastream.window import WindowAssigner
    from cairn.datastream.windowed_stream import WindowedStream

__all__ = ["KeyedStream"]


class KeyedStream(DataStream):
    """Operators on a KeyedStream see one key at a time; partitioning cannot be changed."""

    def __init__(
        self,
        transformation: PartitionTransformation,
        env: StreamExecutionEnvironment,
        origin: DataStream,
        key_type: TypeInformation | None = None,
    ) -> None:
        super().__init__(transformation, env)
        self._origin = origin
        self._key_type = key_type
        assert transformation.key_selector is not None
        self._key_selector = transformation.key_selector

    def get_key_type(self) -> TypeInformation | None:
        return self._key_type

    # -- keyed operators (map, flat_map and filter are DataStream's, keyed by append_operator) -

    def process(  # type: ignore[override]
        self, func: KeyedProcessFunction[Any, Any, Any], output_type: TypeInformation | None = None
    ) -> DataStream:
        """Apply a ``KeyedProcessFunction`` (keyed state, event- and processing-time timers)."""
        if not isinstance(func, KeyedProcessFunction):
            raise TypeError(
                "KeyedProcessFunction is required for KeyedStream, got " + type(func).__name__
            )
        return self.append_operator("KeyedProcess", OperatorKind.KEYED_PROCESS, func, output_type)

    def reduce(self, func: ReduceFunction | Callable[[Any, Any], Any]) -> DataStream:
        """Rolling reduce per key: emits the combined value after every record."""
        check_function(func, ReduceFunction)
        return self.append_operator(
            "Reduce", OperatorKind.REDUCE, func, self._transformation.output_type
        )

    def _aggregate(self, position: int | str, aggregation: str) -> DataStream:
        hint = self._transformation.output_type
        names = hint.get_field_names() if isinstance(hint, RowTypeInfo) else None
        return self.reduce(AccumulateReduceFunction(position, aggregation, names))

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        """Rolling sum of a field per key: ``key_by(lambda r: r[0]).sum(1)``."""
        return self._aggregate(position_to_sum, "sum")

    def min(self, position_to_min: int | str = 0) -> DataStream:
        """Rolling minimum of a field; other fields come from the key's first record."""
        return self._aggregate(position_to_min, "min")

    def max(self, position_to_max: int | str = 0) -> DataStream:
        """Rolling maximum of a field; other fields come from the key's first record."""
        return self._aggregate(position_to_max, "max")

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        """The record with the smallest field value so far (the first one on ties)."""
        return self._aggregate(position_to_min_by, "min_by")

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        """The record with the largest field value so far (the first one on ties)."""
        return self._aggregate(position_to_max_by, "max_by")

    # -- windows ------------------------------------------------------------------------------

    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        """Cut each key's records into windows: ``.window(TumblingEventTimeWindows.of(...))``."""
        from cairn.datastream.windowed_stream import WindowedStream

        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        """Windows of ``size`` records per key, every ``slide`` records when given (Flink's
        ``GlobalWindows`` with a count trigger, and a count evictor when sliding)."""
        from cairn.datastream.window import (
            CountSlidingWindowAssigner,
            CountTumblingWindowAssigner,
        )

        if slide == 0:
            return self.window(CountTumblingWindowAssigner.of(size))
        return self.window(CountSlidingWindowAssigner.of(size, slide))

    def key_by(
        self,
        key_selector: KeySelector | Callable[[Any], Any],
        key_type: TypeInformation | None = None,
    ) -> KeyedStream:
        """Re-key the stream that was keyed (PyFlink semantics: replaces this key)."""
        return self._origin.key_by(key_selector, key_type)

    # -- not an operator, and partitioning is fixed ------------------------------------------

    def _unsupported(self, what: str) -> NoReturn:
        raise TypeError(f"{what} for KeyedStream is not supported.")

    def _fixed_partitioning(self) -> NoReturn:
        raise TypeError("Cannot override partitioning for KeyedStream.")

    def set_parallelism(self, parallelism: int) -> NoReturn:
        self._unsupported("Set parallelism")

    def set_max_parallelism(self, max_parallelism: int) -> NoReturn:
        self._unsupported("Set max parallelism")

    def name(self, name: str) -> NoReturn:
        self._unsupported("Set name")

    def get_name(self) -> NoReturn:
        self._unsupported("Get name")

    def uid(self, uid: str) -> NoReturn:
        self._unsupported("Set uid")

    def set_uid_hash(self, uid_hash: str) -> NoReturn:
        self._unsupported("Set uid hash")

    def force_non_parallel(self) -> NoReturn:
        self._unsupported("Set force non-parallel")

    def set_buffer_timeout(self, timeout_millis: int) -> NoReturn:
        self._unsupported("Set buffer timeout")

    def start_new_chain(self) -> NoReturn:
        self._unsupported("Start new chain")

    def disable_chaining(self) -> NoReturn:
        self._unsupported("Disable chaining")

    def slot_sharing_group(self, slot_sharing_group: Any) -> NoReturn:
        self._unsupported("Setting slot sharing group")

    def shuffle(self) -> NoReturn:
        self._fixed_partitioning()

    def rebalance(self) -> NoReturn:
        self._fixed_partitioning()

    def rescale(self) -> NoReturn:
        self._fixed_partitioning()

    def forward(self) -> NoReturn:
        self._fixed_partitioning()

    def broadcast(self, *broadcast_state_descriptors: Any) -> NoReturn:
        self._fixed_partitioning()

    def global_(self) -> NoReturn:
        self._fixed_partitioning()

    def partition_custom(self, partitioner: Any, key_selector: Any) -> NoReturn:
        self._fixed_partitioning()
