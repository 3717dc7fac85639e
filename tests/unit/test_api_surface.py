"""Pins the public names of ``cairn.datastream`` and ``cairn.common`` (PyFlink's paths)."""

from __future__ import annotations

import importlib

import pytest

import cairn.common
import cairn.datastream

DATASTREAM = {
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
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "CheckpointConfig",
    "CheckpointListener",
    "CheckpointStorage",
    "CheckpointedFunction",
    "CheckpointingMode",
    "CloseableIterator",
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
}

COMMON = {
    "ByteArraySchema",
    "CheckpointingMode",
    "Configuration",
    "ConfigurationError",
    "DeserializationSchema",
    "Duration",
    "Encoder",
    "ExecutionConfig",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "Instant",
    "JobExecutionException",
    "JobExecutionResult",
    "JobStatus",
    "JobSubmissionError",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowFieldExtractorSchema",
    "RowKind",
    "SerializationSchema",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
}


@pytest.mark.parametrize(
    ("module", "names"), [(cairn.datastream, DATASTREAM), (cairn.common, COMMON)]
)
def test_exported_names_are_pinned_and_resolve(module: object, names: set[str]) -> None:
    assert set(module.__all__) == names  # type: ignore[attr-defined]
    for name in names:
        assert getattr(module, name) is not None, name


def test_pyflink_module_paths() -> None:
    paths = {
        "cairn.datastream.stream_execution_environment": "StreamExecutionEnvironment",
        "cairn.datastream.data_stream": "KeyedStream",
        "cairn.datastream.functions": "KeyedProcessFunction",
        "cairn.datastream.checkpoint_config": "CheckpointConfig",
        "cairn.datastream.checkpoint_storage": "FileSystemCheckpointStorage",
        "cairn.datastream.state_backend": "HashMapStateBackend",
        "cairn.datastream.output_tag": "OutputTag",
        "cairn.datastream.async_data_stream": "AsyncDataStream",
        "cairn.datastream.async_functions": "ResultFuture",
        "cairn.datastream.async_retry_strategies": "FixedDelayRetryStrategy",
        "cairn.datastream.async_retry_predicates": "exception_type_predicate",
        "cairn.common.typeinfo": "Types",
        "cairn.common.restart_strategy": "RestartStrategies",
        "cairn.common.watermark_strategy": "WatermarkStrategy",
        "cairn.common.job_status": "JobStatus",
        "cairn.common.types": "Row",
    }
    for module, name in paths.items():
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


def test_checkpointing_names_are_shared_between_packages() -> None:
    assert cairn.common.CheckpointingMode is cairn.datastream.CheckpointingMode
    assert (
        cairn.datastream.ExternalizedCheckpointCleanup
        is cairn.common.ExternalizedCheckpointRetention
    )


def test_job_client_is_lazy_and_not_star_exported() -> None:
    assert "JobClient" not in cairn.common.__all__
    assert "AvroRowSerializationSchema" not in cairn.common.__all__  # lazy: loads fastavro
    assert cairn.common.AvroRowSerializationSchema is not None
    with pytest.raises(AttributeError):
        cairn.common.NoSuchName  # noqa: B018


def test_connectors_package_reexports_lazily() -> None:
    import cairn.datastream.connectors as connectors

    assert set(connectors.__all__) == {
        "DataGeneratorSource",
        "FileSink",
        "FileSource",
        "NumberSequenceSource",
        # as PyFlink's package, for backward compatibility:
        "BucketAssigner",
        "FileSourceBuilder",
        "OutputFileConfig",
        "RollingPolicy",
        "DeliveryGuarantee",  # PyFlink's connectors.base, re-exported as PyFlink does
        "Sink",
        "Source",
        "StreamFormat",
        "JdbcConnectionOptions",
        "JdbcExecutionOptions",
        "JdbcSink",
        "FlinkKafkaConsumer",  # PyFlink's legacy Kafka names, on KafkaSource / KafkaSink
        "FlinkKafkaProducer",
        "Semantic",
    }
    with pytest.raises(AttributeError):
        connectors.NoSuchConnector  # noqa: B018
    with pytest.raises(ImportError, match="Pulsar connector is not supported"):
        connectors.PulsarSource  # noqa: B018
