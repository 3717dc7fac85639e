"""The source and sink contracts at PyFlink's path (``pyflink.datastream.connectors.base``).

Invariant: a re-export only; the definitions live in ``cairn.api.connectors``, below the
runtime and the state backends, which import them from there.
"""

from cairn.api.connectors import (
    Committer,
    DeliveryGuarantee,
    Sink,
    SinkWriter,
    SinkWriterContext,
    Source,
    SourceReader,
    SourceReaderContext,
    SplitBatch,
    commits_on_checkpoints,
)

__all__ = [
    "Committer",
    "DeliveryGuarantee",
    "Sink",
    "SinkWriter",
    "SinkWriterContext",
    "Source",
    "SourceReader",
    "SourceReaderContext",
    "SplitBatch",
    "commits_on_checkpoints",
]
