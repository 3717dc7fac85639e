"""Sources and sinks (``pyflink.datastream.connectors``).

Contracts are in ``connectors.base``; implementations in ``number_seq``, ``file_system``,
``datagen``, ``jdbc`` and ``kafka``; ``missing`` refuses PyFlink's connectors Cairn does
not have (Pulsar, Elasticsearch, Kinesis, Cassandra, RabbitMQ, HybridSource) at import,
naming them. The implementations are re-exported here lazily, so importing the
package does not import every connector. As in PyFlink (whose package re-exports them for backward
compatibility), the file connector's builder parts import from here too
(``from pyflink.datastream.connectors import FileSink, OutputFileConfig, RollingPolicy``).
"""

from __future__ import annotations

import importlib
from typing import Any

_LOCATIONS = {
    "NumberSequenceSource": "number_seq",
    "DataGeneratorSource": "datagen",
    "DeliveryGuarantee": "base",
    "Sink": "base",
    "Source": "base",
    "BucketAssigner": "file_system",
    "FileSink": "file_system",
    "FileSource": "file_system",
    "FileSourceBuilder": "file_system",
    "OutputFileConfig": "file_system",
    "RollingPolicy": "file_system",
    "StreamFormat": "file_system",
    "JdbcConnectionOptions": "jdbc",
    "JdbcExecutionOptions": "jdbc",
    "JdbcSink": "jdbc",
    "FlinkKafkaConsumer": "kafka",
    "FlinkKafkaProducer": "kafka",
    "Semantic": "kafka",
}

__all__ = sorted(_LOCATIONS)


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        from cairn.datastream.connectors.missing import module_for, refuse

        missing = module_for(name)
        if missing is not None:  # PyFlink re-exports these here: say what is missing
            refuse(f"{__name__}.{missing}", name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LOCATIONS])
