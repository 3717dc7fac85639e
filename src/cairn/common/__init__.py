"""Classes shared by Cairn's APIs, at PyFlink's import paths (``pyflink.common``).

Layers: ``configuration`` / ``config_options`` / ``config_values`` hold the validated
configuration keys; ``restart_strategy``, ``checkpointing_mode`` and
``externalized_checkpoint_retention`` are spellings of those keys; ``typeinfo``, ``types``,
``time``, ``serialization`` and ``watermark_strategy`` describe records; ``job_*`` is what a
submitted job hands back. ``JobClient`` (a protocol, ``job_client``) is imported on first
attribute access (it is left out of ``__all__``, as it always was);
the row formats PyFlink also exports here (``JsonRowSerializationSchema``,
``CsvRow...``, ``AvroRow...``) are imported from ``formats`` on first access too.
"""

from __future__ import annotations

from typing import Any

from cairn.common.checkpointing_mode import CheckpointingMode
from cairn.common.configuration import Configuration
from cairn.common.exceptions import ConfigurationError, JobExecutionException, JobSubmissionError
from cairn.common.execution_config import ExecutionConfig
from cairn.common.externalized_checkpoint_retention import (
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
)
from cairn.common.job_execution_result import JobExecutionResult
from cairn.common.job_status import JobStatus
from cairn.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from cairn.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    RowFieldExtractorSchema,
    SerializationSchema,
    SimpleStringSchema,
)
from cairn.common.time import Duration, Instant, Time
from cairn.common.typeinfo import TypeInformation, Types
from cairn.common.types import Row, RowKind
from cairn.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
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
]


_FORMATS = {
    "JsonRowDeserializationSchema": "json",
    "JsonRowSerializationSchema": "json",
    "CsvRowDeserializationSchema": "csv",
    "CsvRowSerializationSchema": "csv",
    "AvroRowDeserializationSchema": "avro",
    "AvroRowSerializationSchema": "avro",
}


def __getattr__(name: str) -> Any:
    # JobClient: the protocol of job_client, loaded on use as ever.
    if name == "JobClient":
        from cairn.common.job_client import JobClient

        return JobClient
    module = _FORMATS.get(name)
    if module is not None:  # fastavro and csv load only for a job that uses them
        import importlib

        return getattr(importlib.import_module(f"cairn.common.formats.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
