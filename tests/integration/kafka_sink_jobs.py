"""The sequence job of the exactly-once tests with a Kafka sink, and what a run left in its
topic as a ``read_committed`` consumer sees it."""

from __future__ import annotations

import time
from typing import Any

from cairn.common.serialization import SimpleStringSchema
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.base import DeliveryGuarantee
from cairn.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from cairn.testing.sequence_jobs import SequenceCheck
from tests.integration.jobs import checkpointed_env, sequence_source


class KeyOfLine:
    """The message key of a ``key,seq,sum`` line: its key, so a key's lines share a
    partition and a reader sees them in the order they were written."""

    def serialize(self, element: Any) -> bytes:
        return str(element).split(",", 1)[0].encode()


def kafka_sink(broker: Any, topic: str, prefix: str, guarantee: DeliveryGuarantee) -> KafkaSink:
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_key_serialization_schema(KeyOfLine())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_property("transaction.timeout.ms", "60000")  # within the broker's 15 min
        .set_property("log_level", "0")
    )
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        builder.set_transactional_id_prefix(prefix)
    return builder.build()


def kafka_sequence_job(
    conf: dict[str, str],
    broker: Any,
    topic: str,
    *,
    records: int,
    keys: int,
    prefix: str = "sequence",
    guarantee: DeliveryGuarantee = DeliveryGuarantee.EXACTLY_ONCE,
    rate: int | None = 30_000,
    parallelism: int = 2,
    unaligned: bool = False,
) -> StreamExecutionEnvironment:
    """Generator of per-key sequences -> key_by -> keyed running sum and order check ->
    KafkaSink into ``topic`` (aligned checkpoints every 300 ms, or ``unaligned``)."""
    env = checkpointed_env(conf, parallelism=parallelism, unaligned=unaligned)
    (
        sequence_source(env, keys, records, rate)
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid("sequence-check")
        .sink_to(kafka_sink(broker, topic, prefix, guarantee))
        .uid("kafka-sink")
    )
    return env


def topic_lines(broker: Any, topic: str, read_committed: bool = True, expect: int = 0) -> list[str]:
    """The topic's values, partition by partition in offset order; reading to the end also
    shows that no transaction is left open (it would hold back the Last Stable Offset).
    Read again (up to 30 s) while fewer than ``expect``: a commit returns before the broker
    wrote its markers into the partitions."""
    deadline = time.monotonic() + 30
    while True:
        records = broker.read_topic(topic, read_committed=read_committed, timeout_s=60)
        if len(records) >= expect or time.monotonic() > deadline:
            return [r.value.decode() for r in records]
        time.sleep(0.2)
