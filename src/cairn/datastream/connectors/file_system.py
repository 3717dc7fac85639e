"""File connectors under PyFlink's module name (``pyflink.datastream.connectors.file_system``).

Invariant: this module only re-exports; the source lives in ``file_source``, the sink in
``file_sink`` (+ ``file_sink_config``), and the formats in ``formats``.
"""

from __future__ import annotations

from cairn.common.serialization import BulkWriterFactory, Encoder
from cairn.datastream.connectors.file_sink import (
    BulkFormatBuilder,
    FileCommitter,
    FileSink,
    FileSinkCommittable,
    RowFormatBuilder,
)
from cairn.datastream.connectors.file_sink_config import (
    BasePathBucketAssigner,
    BucketAssigner,
    DateTimeBucketAssigner,
    DefaultRollingPolicy,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    RollingPolicy,
)
from cairn.datastream.connectors.file_source import FileSource, FileSourceBuilder, FileSplitState
from cairn.datastream.connectors.formats import ParquetBulkWriters, StreamFormat

__all__ = [
    "BasePathBucketAssigner",
    "BucketAssigner",
    "BulkFormatBuilder",
    "BulkWriterFactory",
    "DateTimeBucketAssigner",
    "DefaultRollingPolicy",
    "Encoder",
    "FileCommitter",
    "FileSink",
    "FileSinkCommittable",
    "FileSource",
    "FileSourceBuilder",
    "FileSplitState",
    "OnCheckpointRollingPolicy",
    "OutputFileConfig",
    "ParquetBulkWriters",
    "RollingPolicy",
    "RowFormatBuilder",
    "StreamFormat",
]
