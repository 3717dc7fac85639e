"""Kafka topics and jobs shared by the Kafka source's integration tests."""

from __future__ import annotations

import uuid
from typing import Any

from cairn.common import WatermarkStrategy
from cairn.common.serialization import SimpleStringSchema
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from cairn.testing.sequence_jobs import SequenceCheck, SlowSequenceCheck
from tests.integration.jobs import check_to_files, checkpointed_env


def new_topic(broker: Any, prefix: str, partitions: int) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions)
    return topic


def produce_sequences(broker: Any, topic: str, records: int, keys: int, partitions: int) -> None:
    """``SequenceGenerator``'s records as ``"key,seq"`` strings, each key in one partition
    (its index mod ``partitions``), so per-key order is Kafka's order."""
    from confluent_kafka import Producer

    producer = Producer(broker.client_config(**{"linger.ms": 20, "enable.idempotence": True}))
    for i in range(records):
        k = i % keys
        while True:
            try:
                producer.produce(topic, f"k{k:05d},{i // keys + 1}", partition=k % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def parse_sequence(line: str) -> tuple[str, int]:
    key, seq = line.split(",")
    return key, int(seq)


def kafka_source(broker: Any, topic: str, *, bounded: bool = True, **props: str) -> KafkaSource:
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_topics(topic)
        .set_group_id(f"g-{topic}")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )
    if bounded:
        builder.set_bounded(KafkaOffsetsInitializer.latest())
    for key, value in props.items():
        builder.set_property(key.replace("_", "."), value)
    return builder.build()


def kafka_sequence_job(
    conf: dict[str, str],
    broker: Any,
    topic: str,
    out_dir: str,
    *,
    parallelism: int = 2,
    interval_ms: int = 300,
    unaligned: bool = False,
    source: KafkaSource | None = None,
    cost_us: int = 0,
) -> StreamExecutionEnvironment:
    """Kafka topic of ``"key,seq"`` -> key_by -> SequenceCheck (spending ``cost_us`` per
    record) -> exactly-once file sink."""
    env = checkpointed_env(
        conf, parallelism=parallelism, interval_ms=interval_ms, unaligned=unaligned
    )
    stream = env.from_source(
        source or kafka_source(broker, topic), WatermarkStrategy.no_watermarks(), "kafka"
    ).uid("kafka-source")
    check_to_files(
        stream.map(parse_sequence).uid("parse"),
        SlowSequenceCheck(cost_us) if cost_us else SequenceCheck(),
        "sequence-check",
        out_dir,
    )
    return env
