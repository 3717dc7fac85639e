"""``DataStream``, ``DataStreamSink`` (``pyflink.datastream.data_stream``; ``CloseableIterator``,
which PyFlink also has here, lives in ``closeable_iterator.py``).

Invariant: every API call appends exactly one ``Transformation`` to the logical plan and never
changes an existing one, except the setters (name, uid, parallelism, chaining...;
``operator_settings.py``) applied to the transformation the previous call returned. Only sinks
are registered with the environment; operators reachable from no sink are not executed.

>>> from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> ds = env.from_collection([1, 2, 3]).map(lambda x: x * 2).uid("double")
>>> ds.get_name(), ds.get_transformation().operator.kind.value
('Map', 'map')
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, overload

from cairn.api.connectors import Sink
from cairn.api.functions import (
    FilterFunction,
    FlatMapFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    SinkFunction,
)
from cairn.api.output_tag import OutputTag
from cairn.api.partitioning import CustomPartitioning
from cairn.common.typeinfo import TypeInformation, Types
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream.closeable_iterator import CloseableIterator
from cairn.datastream.java_text import with_declared_type
from cairn.datastream.operator_settings import OperatorSetters
from cairn.datastream.print_sink import PrintSinkFunction
from cairn.datastream.projection import Projection
from cairn.graph.transformations import (
    OneInputTransformation,
    OperatorKind,
    OperatorSpec,
    PartitionKind,
    PartitionTransformation,
    SideOutputTransformation,
    SinkTransformation,
    Transformation,
    UnionTransformation,
)

if TYPE_CHECKING:
    from cairn.api.state import MapStateDescriptor
    from cairn.common.execution_config import ExecutionConfig
    from cairn.datastream.connected_streams import BroadcastStream
    from cairn.datastream.keyed_stream import KeyedStream
    from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
    from cairn.datastream.window import WindowAssigner
    from cairn.datastream.windowed_stream import AllWindowedStream

__all__ = ["CloseableIterator", "DataStream", "DataStreamSink", "KeyedStream", "TwoStageSink"]

# Operators whose functions may yield ``(output_tag, value)``.
_PROCESS_KINDS = frozenset(
    {
        OperatorKind.PROCESS,
        OperatorKind.KEYED_PROCESS,
        OperatorKind.CO_PROCESS,
        OperatorKind.KEYED_CO_PROCESS,
        OperatorKind.BROADCAST_PROCESS,
        OperatorKind.KEYED_BROADCAST_PROCESS,
    }
)


class DataStream(OperatorSetters):
    """A stream of records; each method returns a new stream (``ds.map(f).filter(g)``)."""

    # Set by KeyedStream: every operator ``append_operator`` adds to a keyed stream runs keyed.
    _key_selector: Callable[[Any], Any] | None = None

    def __init__(
        self,
        transformation: Transformation,
        env: StreamExecutionEnvironment,
        *,
        non_parallel: bool = False,
    ) -> None:
        """``non_parallel``: the operator runs at parallelism 1 and refuses any other (a
        non-parallel source)."""
        self._transformation = transformation
        self._env = env
        if non_parallel:
            self._non_parallel = True

    # -- introspection -----------------------------------------------------------------------

    def get_transformation(self) -> Transformation:
        """The node of the logical plan behind this stream (Cairn extension)."""
        return self._transformation

    def get_type(self) -> TypeInformation:
        hint = self._transformation.output_type
        return hint if hint is not None else Types.PICKLED_BYTE_ARRAY()

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    def get_key_selector(self) -> Callable[[Any], Any] | None:
        """The key selector operators on this stream run keyed by, None if it is not keyed
        (Cairn extension; Flink's ``KeyedStream.getKeySelector``)."""
        return self._key_selector

    def get_execution_config(self) -> ExecutionConfig:
        return self._env.get_config()

    def force_non_parallel(self) -> DataStream:
        """Parallelism and max parallelism 1, and no other parallelism allowed later."""
        self.set_parallelism(1)
        self.set_max_parallelism(1)
        self._non_parallel = True
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> DataStream:
        """Per-operator network flush interval (``-1``: the job's default)."""
        self._set_option("buffer_timeout_ms", int(timeout_millis))
        return self

    # -- transformations ---------------------------------------------------------------------

    def append_operator(
        self, name: str, kind: OperatorKind, function: Any, output_type: TypeInformation | None
    ) -> DataStream:
        """A one-input operator ``kind`` running ``function`` after this stream, keyed if this
        stream is (Cairn extension, for the stream builders; Flink's ``DataStream.transform``)."""
        t = OneInputTransformation(
            name=name,
            inputs=[self._transformation],
            output_type=output_type,
            operator=OperatorSpec(kind, function, self._key_selector),
        )
        return DataStream(t, self._env)

    def map(
        self, func: MapFunction | Callable[[Any], Any], output_type: TypeInformation | None = None
    ) -> DataStream:
        """One output per record: ``ds.map(lambda x: x + 1)`` or ``ds.map(MyMapFunction())``."""
        check_function(func, MapFunction)
        return self.append_operator("Map", OperatorKind.MAP, func, output_type)

    def flat_map(
        self,
        func: FlatMapFunction | Callable[[Any], Any],
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """Zero or more outputs per record (the function yields or returns an iterable)."""
        check_function(func, FlatMapFunction)
        return self.append_operator("FlatMap", OperatorKind.FLAT_MAP, func, output_type)

    def filter(self, func: FilterFunction | Callable[[Any], Any]) -> DataStream:
        """Keep the records for which ``func`` is true."""
        check_function(func, FilterFunction)
        return self.append_operator(
            "Filter", OperatorKind.FILTER, func, self._transformation.output_type
        )

    def process(
        self, func: ProcessFunction[Any, Any], output_type: TypeInformation | None = None
    ) -> DataStream:
        """Apply a ``ProcessFunction`` (a ``KeyedProcessFunction`` needs ``key_by`` first)."""
        if not isinstance(func, ProcessFunction):
            raise TypeError(
                f"process() on a DataStream needs a ProcessFunction, got {type(func).__name__}"
                " (a KeyedProcessFunction needs key_by() first)"
            )
        return self.append_operator("Process", OperatorKind.PROCESS, func, output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: WatermarkStrategy) -> DataStream:
        """Timestamps from the strategy's ``TimestampAssigner`` (without one, records keep
        theirs) and watermarks every ``pipeline.auto-watermark-interval``; the watermarks of
        the input are replaced (only the final one passes).

        >>> from cairn.common import Duration, TimestampAssigner, WatermarkStrategy
        >>> from cairn.datastream import StreamExecutionEnvironment
        >>> class First(TimestampAssigner):
        ...     def extract_timestamp(self, value, record_timestamp): return value[0]
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
        ...             .with_timestamp_assigner(First()))
        >>> env.from_collection([(1000, "a")]).assign_timestamps_and_watermarks(strategy).get_name()
        'Timestamps/Watermarks'
        """
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise TypeError(
                "assign_timestamps_and_watermarks() needs a WatermarkStrategy, got "
                f"{type(watermark_strategy).__name__}"
            )
        return self.append_operator(
            "Timestamps/Watermarks",
            OperatorKind.TIMESTAMPS,
            watermark_strategy,
            self._transformation.output_type,
        )

    def get_side_output(self, output_tag: OutputTag) -> DataStream:
        """The records the process function of this stream yielded as ``(output_tag, value)``.

        Only process functions emit side outputs; a tag the job never reads stays in the main
        output as a ``(tag, value)`` pair (PyFlink's behaviour).
        """
        if not isinstance(output_tag, OutputTag):
            raise TypeError(
                f"get_side_output() needs an OutputTag, got {type(output_tag).__name__}"
            )
        t = self._transformation
        spec = t.operator if isinstance(t, OneInputTransformation) else None
        if spec is None or spec.kind not in _PROCESS_KINDS:
            raise TypeError(
                f"get_side_output() needs the result of process(), not of {t.name!r}: only "
                "process functions emit side outputs (yield output_tag, value)"
            )
        side = SideOutputTransformation(
            name=f"SideOutput({output_tag.tag_id})",
            inputs=[t],
            output_type=output_tag.type_info,
            tag_id=output_tag.tag_id,
        )
        return DataStream(side, self._env)

    def cache(self) -> NoReturn:
        """PyFlink caches a bounded stream's result across jobs in BATCH mode; Cairn does
        not keep results between jobs, so this fails as the job is defined."""
        raise TypeError(
            "cache() is not supported: Flink caches intermediate results of bounded streams "
            "across jobs in BATCH execution mode, and Cairn keeps no results between jobs"
        )

    def infer(self, *args: Any, **kwargs: Any) -> NoReturn:
        """PyFlink's model inference (``infer(model=..., input_col=...)``) is not in Cairn."""
        raise TypeError("infer() is not supported: Cairn has no model inference operator")

    def window_all(self, window_assigner: WindowAssigner) -> AllWindowedStream:
        """Windows over the whole stream, computed by one subtask (parallelism 1)."""
        from cairn.datastream.windowed_stream import AllWindowedStream

        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> AllWindowedStream:
        """``window_all`` of ``size`` records, every ``slide`` records when given."""
        from cairn.datastream.window import (
            CountSlidingWindowAssigner,
            CountTumblingWindowAssigner,
        )

        if slide == 0:
            return self.window_all(CountTumblingWindowAssigner.of(size))
        return self.window_all(CountSlidingWindowAssigner.of(size, slide))

    def key_by(
        self,
        key_selector: KeySelector | Callable[[Any], Any],
        key_type: TypeInformation | None = None,
    ) -> KeyedStream:
        """Partition by key: records with the same key go to the same subtask, and operators
        on the result have keyed state and timers."""
        from cairn.datastream.keyed_stream import KeyedStream

        if not isinstance(key_selector, KeySelector) and not callable(key_selector):
            raise TypeError(
                "Parameter key_selector should be type of KeySelector or a callable function."
            )
        t = PartitionTransformation(
            name="KeyBy",
            inputs=[self._transformation],
            output_type=self._transformation.output_type,
            partition=PartitionKind.HASH,
            key_selector=key_selector,
        )
        return KeyedStream(t, self._env, self, key_type)

    def union(self, *streams: DataStream) -> DataStream:
        """Merge streams of the same type; the result interleaves their records."""
        for s in streams:
            if not isinstance(s, DataStream):
                raise TypeError(f"union() takes DataStreams, got {type(s).__name__}")
            if s.get_execution_environment() is not self._env:
                raise ValueError("Cannot union streams of different StreamExecutionEnvironments")
        t = UnionTransformation(
            name="Union",
            inputs=[self._transformation, *(s.get_transformation() for s in streams)],
            output_type=self._transformation.output_type,
        )
        return DataStream(t, self._env)

    def _partition(self, name: str, kind: PartitionKind, key_selector: Any = None) -> DataStream:
        t = PartitionTransformation(
            name=name,
            inputs=[self._transformation],
            output_type=self._transformation.output_type,
            partition=kind,
            key_selector=key_selector,
        )
        return DataStream(t, self._env)

    def partition_custom(
        self,
        partitioner: Partitioner | Callable[[Any, int], int],
        key_selector: KeySelector | Callable[[Any], Any],
    ) -> DataStream:
        """Send each record to the subtask ``partitioner.partition(key, num_partitions)``
        names for its ``key_selector`` key (``num_partitions``: the next operator's
        parallelism). The next operator is not keyed (no keyed state), as in Flink.

        >>> from cairn.datastream import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> ds = env.from_collection([1, 2]).partition_custom(lambda k, n: k % n, lambda x: x)
        >>> ds.get_transformation().partition.value
        'custom'
        """
        return self._partition(
            "Partition", PartitionKind.CUSTOM, CustomPartitioning(partitioner, key_selector)
        )

    def project(self, *field_indexes: int) -> DataStream:
        """Keep the tuple fields at ``field_indexes``, in that order; only for streams typed
        ``Types.TUPLE`` (the result is typed with the kept fields).

        >>> from cairn.common import Types
        >>> from cairn.datastream import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> pairs = env.from_collection([("a", 1)], Types.TUPLE([Types.STRING(), Types.INT()]))
        >>> pairs.project(1, 0).get_type()
        TupleTypeInfo(Integer, String)
        """
        projection = Projection.of(self._transformation.output_type, field_indexes)
        projected = self.map(projection, projection.output_type)
        projected.name("Projection")
        return projected

    def shuffle(self) -> DataStream:
        """Send each record to a uniformly random downstream subtask."""
        return self._partition("Shuffle", PartitionKind.SHUFFLE)

    def rebalance(self) -> DataStream:
        """Round-robin over all downstream subtasks."""
        return self._partition("Rebalance", PartitionKind.REBALANCE)

    def rescale(self) -> DataStream:
        """Round-robin over a subset of downstream subtasks (local groups)."""
        return self._partition("Rescale", PartitionKind.RESCALE)

    def forward(self) -> DataStream:
        """Subtask i sends to subtask i (parallelisms must be equal)."""
        return self._partition("Forward", PartitionKind.FORWARD)

    @overload
    def broadcast(self) -> DataStream: ...
    @overload
    def broadcast(
        self, broadcast_state_descriptor: MapStateDescriptor, *other: MapStateDescriptor
    ) -> BroadcastStream: ...
    def broadcast(
        self, broadcast_state_descriptor: MapStateDescriptor | None = None, *other: Any
    ) -> DataStream | BroadcastStream:
        """Send every record to every downstream subtask; with ``MapStateDescriptor``s, a
        ``BroadcastStream`` to ``connect`` whose operator keeps those broadcast states."""
        if broadcast_state_descriptor is None:
            if other:
                raise TypeError("broadcast(): the first broadcast state descriptor is None")
            return self._partition("Broadcast", PartitionKind.BROADCAST)
        from cairn.datastream.connected_streams import BroadcastStream

        return BroadcastStream(self, (broadcast_state_descriptor, *other))

    def connect(self, ds: DataStream | BroadcastStream) -> Any:
        """Two inputs, one operator: a ``ConnectedStreams`` (``map``/``flat_map``/``process``/
        ``key_by``), or with a ``BroadcastStream`` a ``BroadcastConnectedStream``."""
        from cairn.datastream.connected_streams import connect

        return connect(self, ds)

    def global_(self) -> DataStream:
        """Send every record to downstream subtask 0 (Flink's ``global()``; Cairn extension,
        named with ``_`` because ``global`` is a Python keyword)."""
        return self._partition("Global", PartitionKind.GLOBAL)

    # -- sinks -------------------------------------------------------------------------------

    def _sink(self, name: str, spec: OperatorSpec) -> DataStreamSink:
        t = SinkTransformation(name=name, inputs=[self._transformation], operator=spec)
        self._env.add_sink_transformation(t)
        return DataStreamSink(t)

    def add_sink(self, sink_func: SinkFunction | Sink) -> DataStreamSink:
        """A legacy ``SinkFunction`` (``invoke(value, context)`` per record); a ``Sink``
        (``JdbcSink.sink(...)``, which PyFlink adds this way) goes to :meth:`sink_to`."""
        if isinstance(sink_func, Sink):
            return self.sink_to(sink_func)
        if not isinstance(sink_func, SinkFunction) and not callable(
            getattr(sink_func, "invoke", None)
        ):
            raise TypeError(f"add_sink() needs a SinkFunction, got {type(sink_func).__name__}")
        return self._sink("Unnamed", OperatorSpec(OperatorKind.SINK_FUNCTION, sink_func))

    def sink_to(self, sink: Sink) -> DataStreamSink:
        """A ``Sink`` (``FileSink``...): writers per subtask, exactly-once when it commits."""
        if not isinstance(sink, Sink):
            raise TypeError(
                f"sink_to() needs a cairn.datastream.connectors Sink, got {type(sink).__name__}"
                " (use add_sink() for a SinkFunction)"
            )
        # As PyFlink's Java FileSink: a declared type's values are written as their Java text.
        sink = with_declared_type(sink, self._transformation.output_type)
        if sink.global_committer:
            return self._sink_with_global_committer(sink)
        return self._sink("Sink", OperatorSpec(OperatorKind.SINK, sink))

    def _sink_with_global_committer(self, sink: Sink) -> DataStreamSink:
        from cairn.datastream.connectors.global_commit import GlobalCommitStage

        # Not keyed even after key_by: the writers keep no keyed state (as ``_sink``).
        writer_t = OneInputTransformation(
            name="Sink: Writer",
            inputs=[self._transformation],
            output_type=None,
            operator=OperatorSpec(OperatorKind.SINK_WRITER, sink),
        )
        writers = DataStream(writer_t, self._env)
        committer = writers.global_()._sink(
            "Sink: Committer", OperatorSpec(OperatorKind.SINK, GlobalCommitStage(sink))
        )
        t = committer.get_transformation()
        t.parallelism, t.parallelism_fixed = 1, True
        return TwoStageSink(t, writers)

    def print(self, sink_identifier: str | None = None) -> DataStreamSink:
        """Write every record to stdout as PyFlink does: ``"<subtask+1>> value"`` when the sink
        runs at parallelism > 1, the value alone at 1 (``"<id>:<subtask+1>> "`` / ``"<id>> "``
        with an identifier); declared rows as Flink's ``+I[a, 1]``, typed tuples as Java's
        ``(a,1)``, undeclared values as ``str(value)``."""
        sink = PrintSinkFunction(sink_identifier, type_info=self._transformation.output_type)
        return self._sink("Print to Std. Out", OperatorSpec(OperatorKind.SINK_FUNCTION, sink))

    def execute_and_collect(
        self, job_execution_name: str | None = None, limit: int | None = None
    ) -> CloseableIterator | list[Any]:
        """Run the job and return its records: an iterator (close it, or use ``with``, to stop
        the job), or with ``limit`` a list of the first ``limit`` records (the job is then
        cancelled if it still runs)."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(f"Limit must be greater than 0, got {limit!r}")
        t = SinkTransformation(
            name="Collect",
            inputs=[self._transformation],
            parallelism=1,
            parallelism_fixed=True,
            operator=OperatorSpec(OperatorKind.COLLECT, None),
        )
        self._env.add_sink_transformation(t)
        client = self._env.execute_async(job_execution_name)
        iterator = CloseableIterator(client.collect_iterator(t.id), client)
        if limit is None:
            return iterator
        with iterator:
            return list(itertools.islice(iterator, limit))


class DataStreamSink(OperatorSetters):
    """The end of a stream (``add_sink``, ``sink_to``, ``print``): name, uid, parallelism."""

    def __init__(self, transformation: SinkTransformation) -> None:
        self._transformation = transformation

    def get_transformation(self) -> SinkTransformation:
        assert isinstance(self._transformation, SinkTransformation)
        return self._transformation


class TwoStageSink(DataStreamSink):
    """``sink_to`` of a sink with a global committer: parallel writers, then one committer
    (as Flink's SinkV2). ``name``/``uid`` name both (``<uid>`` the writers, ``<uid>-committer``
    the committer); ``set_parallelism`` sets the writers' (the committer runs as one)."""

    def __init__(self, committer: SinkTransformation, writers: DataStream) -> None:
        super().__init__(committer)
        self._writers = writers

    def name(self, name: str) -> Any:
        super().name(f"{name}: Committer")
        self._writers.name(f"{name}: Writer")
        return self

    def uid(self, uid: str) -> Any:
        super().uid(f"{uid}-committer")
        self._writers.uid(uid)
        return self

    def set_parallelism(self, parallelism: int) -> Any:
        self._writers.set_parallelism(parallelism)
        return self

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        self._writers.set_max_parallelism(max_parallelism)
        return self

    def get_writer_transformation(self) -> Transformation:
        return self._writers.get_transformation()


def check_function(func: Any, expected: type) -> None:
    if not isinstance(func, expected) and not callable(func):
        raise TypeError(f"The input must be a {expected.__name__} or a callable function")


def __getattr__(name: str) -> Any:
    # PyFlink's path ``data_stream.KeyedStream``; lazy because KeyedStream extends DataStream.
    if name == "KeyedStream":
        from cairn.datastream.keyed_stream import KeyedStream

        return KeyedStream
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
