"""What a Kafka sink's writers and committer need: the sink's options, checked, as one frozen
value.

Invariant: a ``KafkaSinkConfig`` is built only through :meth:`KafkaSinkConfig.of`, which
checks the options (pool size, EXACTLY_ONCE's prefix and marker topic); the writers
(``sink_output``, ``sink_writer``) receive it, never the ``KafkaSink``, so they do not import
the sink that creates them.

>>> from cairn.common.serialization import SimpleStringSchema
>>> from cairn.datastream.connectors.kafka.sink_serialization import (
...     KafkaRecordSerializationSchema)
>>> serializer = (KafkaRecordSerializationSchema.builder().set_topic("totals")
...     .set_value_serialization_schema(SimpleStringSchema()).build())
>>> c = KafkaSinkConfig.of("h:9092", serializer, DeliveryGuarantee.NONE, None, {"linger.ms": "5"})
>>> c.marker_topic, c.pool_size, c.transaction_timeout_ms, dict(c.producer_properties)
('totals', 4, 3600000, {'linger.ms': '5', 'transaction.timeout.ms': '3600000'})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cairn.api.connectors import DeliveryGuarantee
from cairn.datastream.connectors.kafka.sink_serialization import KafkaRecordSerializationSchema
from cairn.datastream.connectors.kafka.sink_transactions import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
)

__all__ = ["MARKER_TOPIC_KEY", "POOL_SIZE_KEY", "KafkaSinkConfig"]

# Cairn's own options, given with set_property like producer properties but not passed to
# librdkafka.
POOL_SIZE_KEY = "cairn.transactional-id.pool-size"
MARKER_TOPIC_KEY = "cairn.transaction.marker-topic"


@dataclass(frozen=True)
class KafkaSinkConfig:
    """A Kafka sink's checked options; ``producer_properties`` are librdkafka's only (with
    ``transaction.timeout.ms``), Cairn's own options taken out."""

    bootstrap_servers: str
    serializer: KafkaRecordSerializationSchema
    guarantee: DeliveryGuarantee
    transactional_id_prefix: str | None
    pool_size: int
    marker_topic: str | None
    transaction_timeout_ms: int
    producer_properties: Mapping[str, str]

    @staticmethod
    def of(
        bootstrap_servers: str,
        serializer: KafkaRecordSerializationSchema,
        guarantee: DeliveryGuarantee,
        prefix: str | None,
        properties: Mapping[str, str],
    ) -> KafkaSinkConfig:
        """The options given to the builder, checked; raises ``ValueError`` naming the one
        to fix."""
        props = dict(properties)
        pool_size = _int_option(props.pop(POOL_SIZE_KEY, DEFAULT_POOL_SIZE), POOL_SIZE_KEY)
        if pool_size < 2:
            raise ValueError(f"{POOL_SIZE_KEY} must be at least 2, got {pool_size}")
        marker_topic: str | None = props.pop(MARKER_TOPIC_KEY, None) or serializer.topic
        props.setdefault("transaction.timeout.ms", str(DEFAULT_TRANSACTION_TIMEOUT_MS))
        timeout_ms = _int_option(props["transaction.timeout.ms"], "transaction.timeout.ms")
        if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            if not prefix:
                raise ValueError(
                    "KafkaSink: EXACTLY_ONCE needs a transactional id prefix "
                    "(set_transactional_id_prefix), unique among the jobs writing to the "
                    "cluster and stable across restarts of this one"
                )
            if marker_topic is None:
                raise ValueError(
                    "KafkaSink: EXACTLY_ONCE with a topic selector needs the topic whose "
                    f"partition 0 carries the transaction markers: set_property("
                    f"{MARKER_TOPIC_KEY!r}, <an existing topic>)"
                )
        return KafkaSinkConfig(
            bootstrap_servers,
            serializer,
            guarantee,
            prefix,
            pool_size,
            marker_topic,
            timeout_ms,
            props,
        )


def _int_option(value: Any, key: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"KafkaSink: {key} must be an integer, got {value!r}") from None
