"""Kafka connectors with PyFlink's names (``pyflink.datastream.connectors.kafka``).

Invariant: importing this package needs no Kafka client; ``confluent-kafka`` (librdkafka,
``pip install 'cairn[kafka]'``) is imported where records are read or written, on the
workers. The source: ``source`` (description and builder), ``offsets`` (initializers),
``splits`` (partition assignment and split state), ``source_reader`` (the reader).
"""

from __future__ import annotations

from cairn.datastream.connectors.kafka.offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
    OffsetResetStrategy,
)
from cairn.datastream.connectors.kafka.source import (
    KafkaSource,
    KafkaSourceBuilder,
    KafkaSourceOptions,
)

__all__ = [
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaSourceOptions",
    "KafkaTopicPartition",
    "OffsetResetStrategy",
]
