"""PyFlink's legacy Kafka connector names (``FlinkKafkaConsumer``, ``FlinkKafkaProducer``,
``Semantic``), mapped onto ``KafkaSource`` and ``KafkaSink``.

Invariant: a ``FlinkKafkaConsumer`` is only a description; ``env.add_source(consumer)``
builds the equivalent unbounded ``KafkaSource`` (partitions are splits, offsets checkpointed;
the group id names where offsets are committed, never where reading starts unless
``set_start_from_group_offsets``, the default as in Flink). A ``FlinkKafkaProducer`` *is* a
``KafkaSink`` (``add_sink`` accepts it), its ``Semantic`` the delivery guarantee.

>>> from cairn.common.serialization import SimpleStringSchema
>>> consumer = FlinkKafkaConsumer("words", SimpleStringSchema(),
...     {"bootstrap.servers": "localhost:9092", "group.id": "g"})
>>> consumer.set_start_from_earliest().to_source().starting_offsets
KafkaOffsetsInitializer.earliest()
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from cairn.api.connectors import DeliveryGuarantee
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream.connectors.kafka.offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)
from cairn.datastream.connectors.kafka.sink import KafkaSink
from cairn.datastream.connectors.kafka.sink_serialization import KafkaRecordSerializationSchema
from cairn.datastream.connectors.kafka.source import KafkaSource

__all__ = ["FlinkKafkaConsumer", "FlinkKafkaProducer", "Semantic"]


class Semantic(enum.Enum):
    """The legacy producer's guarantee (PyFlink's ``Semantic``)."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


class FlinkKafkaConsumer:
    """PyFlink's legacy consumer: ``FlinkKafkaConsumer(topics, deserialization_schema,
    properties)``, added with ``env.add_source(...)``; runs as a ``KafkaSource``."""

    def __init__(
        self,
        topics: str | Sequence[str],
        deserialization_schema: DeserializationSchema,
        properties: Mapping[str, Any],
    ) -> None:
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        if not self.topics:
            raise ValueError("FlinkKafkaConsumer needs at least one topic")
        self.deserialization_schema = deserialization_schema
        self.properties = {str(k): str(v) for k, v in properties.items()}
        if "bootstrap.servers" not in self.properties:
            raise ValueError("FlinkKafkaConsumer needs 'bootstrap.servers' in its properties")
        self._starting = (
            KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST)
            if "group.id" in self.properties
            else KafkaOffsetsInitializer.latest()
        )
        self._commit = True
        self.watermark_strategy: WatermarkStrategy | None = None

    def set_commit_offsets_on_checkpoints(self, commit: bool) -> FlinkKafkaConsumer:
        self._commit = bool(commit)
        return self

    def set_start_from_earliest(self) -> FlinkKafkaConsumer:
        self._starting = KafkaOffsetsInitializer.earliest()
        return self

    def set_start_from_latest(self) -> FlinkKafkaConsumer:
        self._starting = KafkaOffsetsInitializer.latest()
        return self

    def set_start_from_timestamp(self, startup_offsets_timestamp: int) -> FlinkKafkaConsumer:
        self._starting = KafkaOffsetsInitializer.timestamp(startup_offsets_timestamp)
        return self

    def set_start_from_group_offsets(self) -> FlinkKafkaConsumer:
        self._starting = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST)
        return self

    def set_start_from_specific_offsets(
        self, specific_startup_offsets: Mapping[KafkaTopicPartition, int]
    ) -> FlinkKafkaConsumer:
        self._starting = KafkaOffsetsInitializer.offsets(specific_startup_offsets)
        return self

    def assign_timestamps_and_watermarks(
        self, watermark_strategy: WatermarkStrategy
    ) -> FlinkKafkaConsumer:
        """Timestamps and watermarks per partition, as the ``KafkaSource`` generates them."""
        self.watermark_strategy = watermark_strategy
        return self

    def disable_filter_restored_partitions_with_subscribed_topics(self) -> FlinkKafkaConsumer:
        return self  # restored partitions are those of the subscribed topics anyway

    def to_source(self) -> KafkaSource:
        """The equivalent ``KafkaSource`` (unbounded)."""
        builder = (
            KafkaSource.builder()
            .set_topics(*self.topics)
            .set_value_only_deserializer(self.deserialization_schema)
            .set_properties(self.properties)
            .set_starting_offsets(self._starting)
        )
        builder.set_property("commit.offsets.on.checkpoint", str(self._commit).lower())
        return builder.build()


class FlinkKafkaProducer(KafkaSink):
    """PyFlink's legacy producer: ``FlinkKafkaProducer(topic, serialization_schema,
    producer_config, kafka_producer_pool_size=5, semantic=Semantic.AT_LEAST_ONCE)``, added with
    ``ds.add_sink(...)``; a ``KafkaSink`` writing every record's value to ``topic``.
    ``Semantic.EXACTLY_ONCE`` uses the transactional id prefix
    ``producer_config['transactional.id']`` (default ``cairn-<topic>``)."""

    def __init__(
        self,
        topic: str,
        serialization_schema: SerializationSchema,
        producer_config: Mapping[str, Any],
        kafka_producer_pool_size: int = 5,
        semantic: Semantic = Semantic.AT_LEAST_ONCE,
    ) -> None:
        props = {str(k): str(v) for k, v in producer_config.items()}
        servers = props.pop("bootstrap.servers", None)
        if servers is None:
            raise ValueError("FlinkKafkaProducer needs 'bootstrap.servers' in producer_config")
        props.pop("group.id", None)  # a consumer key the legacy examples pass along
        prefix = props.pop("transactional.id", None) or f"cairn-{topic}"
        serializer = (
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_value_serialization_schema(serialization_schema)
            .build()
        )
        guarantee = DeliveryGuarantee[Semantic(semantic).name]
        super().__init__(servers, serializer, guarantee, prefix, props)

    def set_write_timestamp_to_kafka(self, write_timestamp: bool) -> FlinkKafkaProducer:
        return self  # records carry their timestamps when they have one

    def ignore_failures_after_transaction_timeout(self) -> FlinkKafkaProducer:
        return self
