"""Kafka connectors with PyFlink's names (``pyflink.datastream.connectors.kafka``).

Invariant: importing this package needs no Kafka client; ``confluent-kafka`` (librdkafka,
``pip install 'cairn[kafka]'``) is imported where records are read or written, on the
workers. The source: ``source`` (description and builder), ``offsets`` (initializers),
``splits`` (partition assignment and split state), ``source_reader`` (the reader). The sink:
``sink`` (description and builder), ``sink_serialization`` (records to messages),
``sink_transactions`` (the exactly-once protocol, without I/O), ``sink_output`` (sending;
the NONE and AT_LEAST_ONCE writer), ``sink_writer`` (the EXACTLY_ONCE writer, committer).
``legacy``: PyFlink's ``FlinkKafkaConsumer`` / ``FlinkKafkaProducer`` on top of both.
``captured`` (raw records in a file per partition) and ``replay`` (a bounded source over
them with the source's splits): what ``cairn chaos`` runs instead of a live topic.
"""

from __future__ import annotations

from cairn.api.connectors import DeliveryGuarantee
from cairn.datastream.connectors.kafka.legacy import (
    FlinkKafkaConsumer,
    FlinkKafkaProducer,
    Semantic,
)
from cairn.datastream.connectors.kafka.offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
    OffsetResetStrategy,
)
from cairn.datastream.connectors.kafka.sink import KafkaSink, KafkaSinkBuilder
from cairn.datastream.connectors.kafka.sink_serialization import (
    FixedPartitioner,
    KafkaPartitioner,
    KafkaRecordSerializationSchema,
    KafkaRecordSerializationSchemaBuilder,
    KafkaTopicSelector,
)
from cairn.datastream.connectors.kafka.source import (
    KafkaSource,
    KafkaSourceBuilder,
    KafkaSourceOptions,
)

__all__ = [
    "DeliveryGuarantee",
    "FixedPartitioner",
    "FlinkKafkaConsumer",
    "FlinkKafkaProducer",
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaPartitioner",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaSourceOptions",
    "KafkaTopicPartition",
    "KafkaTopicSelector",
    "OffsetResetStrategy",
    "Semantic",
]
