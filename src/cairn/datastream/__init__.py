"""Cairn's DataStream API, at PyFlink's import paths (``pyflink.datastream``).

Layers: ``stream_execution_environment`` (define, configure, submit) builds the logical plan
through ``data_stream``/``keyed_stream`` (one ``cairn.graph`` transformation per call), with
user logic given as ``functions`` (interfaces the runtime calls) and settings from
``checkpoint_config``, ``checkpoint_storage`` and ``state_backend``; ``job_builder`` validates
the whole job before the deploy layer runs it. ``state`` holds the state descriptors and
``connectors`` the sources and sinks.

The contracts the runtime also imports (``functions``, ``state``, ``output_tag``,
``time_domain``, ``timerservice``, ``async_functions``, ``async_retry_strategies``,
``connectors.base``) are defined in ``cairn.api``, below the runtime; the modules here
re-export them at PyFlink's paths. This package sits above ``cairn.launch``, which it submits
through, so no layer below imports it.
"""

from __future__ import annotations

from cairn.api.async_functions import (
    AsyncFunction,
    AsyncRetryPredicate,
    AsyncRetryStrategy,
    ResultFuture,
)
from cairn.api.functions import (
    AggregateFunction,
    AllWindowFunction,
    BroadcastProcessFunction,
    CheckpointedFunction,
    CheckpointListener,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    WindowFunction,
)
from cairn.api.output_tag import OutputTag
from cairn.api.time_domain import TimeDomain
from cairn.api.timerservice import TimerService
from cairn.common.checkpointing_mode import CheckpointingMode
from cairn.common.externalized_checkpoint_retention import (
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
)
from cairn.datastream import async_retry_predicates, async_retry_strategies
from cairn.datastream.async_data_stream import AsyncDataStream
from cairn.datastream.checkpoint_config import CheckpointConfig
from cairn.datastream.checkpoint_storage import (
    CheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)
from cairn.datastream.connected_streams import (
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedStreams,
)
from cairn.datastream.data_stream import CloseableIterator, DataStream, DataStreamSink
from cairn.datastream.execution_mode import RuntimeExecutionMode
from cairn.datastream.keyed_stream import KeyedStream
from cairn.datastream.state_backend import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.datastream.windowed_stream import AllWindowedStream, WindowedStream

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "AllWindowedStream",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "CheckpointConfig",
    "CheckpointListener",
    "CheckpointStorage",
    "CheckpointedFunction",
    "CheckpointingMode",
    "CloseableIterator",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "DataStream",
    "DataStreamSink",
    "EmbeddedRocksDBStateBackend",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "FileSystemCheckpointStorage",
    "FilterFunction",
    "FlatMapFunction",
    "HashMapStateBackend",
    "JobManagerCheckpointStorage",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "OutputTag",
    "Partitioner",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "ResultFuture",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "SourceFunction",
    "StateBackend",
    "StreamExecutionEnvironment",
    "TimeDomain",
    "TimerService",
    "WindowFunction",
    "WindowedStream",
    "async_retry_predicates",
    "async_retry_strategies",
]


def __getattr__(name: str) -> object:
    """PyFlink names Cairn does not have yet fail at import, naming what is missing."""
    from cairn.datastream.unsupported import refuse

    refuse(__name__, name)
