"""Kafka with PyFlink's formats against a real broker (in-process executor): CSV and Avro
rows, raw bytes and a Row's byte fields as key and value, and the legacy
FlinkKafkaProducer / FlinkKafkaConsumer names, each written by a job and read by another."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cairn.common import Row, Types, WatermarkStrategy
from cairn.common.serialization import ByteArraySchema, RowFieldExtractorSchema
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.kafka import (
    DeliveryGuarantee,
    FlinkKafkaConsumer,
    FlinkKafkaProducer,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from cairn.datastream.formats.avro import AvroRowDeserializationSchema, AvroRowSerializationSchema
from cairn.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from tests.integration.kafka_jobs import new_topic

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

ROW = Types.ROW([Types.INT(), Types.STRING()])
DATA = [(1, "hi"), (2, "hello"), (3, "hi")]
AVRO = """{"type": "record", "name": "TestRecord", "fields": [
    {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}"""


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(1)
    return env


def _write(broker: Any, topic: str, records: list[Any], value: Any, **key: Any) -> None:
    serializer = KafkaRecordSerializationSchema.builder().set_topic(topic)
    if key:
        serializer = serializer.set_key_serialization_schema(key["key"])
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_record_serializer(serializer.set_value_serialization_schema(value).build())
        .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
        .build()
    )
    env = _env()
    env.from_collection(records, type_info=key.get("type_info", ROW)).sink_to(sink)
    env.execute("write")


def _read(broker: Any, topic: str, schema: Any) -> list[Any]:
    source = (
        KafkaSource.builder()
        .set_topics(topic)
        .set_value_only_deserializer(schema)
        .set_properties({"bootstrap.servers": broker.bootstrap_servers, "group.id": "r"})
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    env = _env()
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
    with ds.execute_and_collect() as results:
        return list(results)


def test_csv_and_avro_rows_go_through_a_topic_and_bad_messages_are_skipped(
    kafka_broker: Any,
) -> None:
    topic = new_topic(kafka_broker, "csv", 1)
    _write(kafka_broker, topic, DATA, CsvRowSerializationSchema.Builder(ROW).build())
    assert [r.value for r in kafka_broker.read_topic(topic)] == [b"1,hi\n", b"2,hello\n", b"3,hi\n"]
    kafka_broker.produce(topic, [b"four,oops\n", b"5,bye\n"])
    lenient = CsvRowDeserializationSchema.Builder(ROW).set_ignore_parse_errors(True).build()
    rows = _read(kafka_broker, topic, lenient)
    assert [tuple(r) for r in rows] == [*DATA, (5, "bye")]  # "four" skipped
    assert rows[0].get_field_names() == ["f0", "f1"]

    topic = new_topic(kafka_broker, "avro", 1)
    _write(kafka_broker, topic, DATA, AvroRowSerializationSchema(avro_schema_string=AVRO))
    rows = _read(kafka_broker, topic, AvroRowDeserializationSchema(avro_schema_string=AVRO))
    assert [(r.id, r.name) for r in rows] == DATA


def test_bytes_and_row_fields_as_key_and_value(kafka_broker: Any) -> None:
    topic = new_topic(kafka_broker, "bytes", 1)
    events = [(f"user-{i}".encode(), json.dumps({"n": i}).encode()) for i in range(3)]
    row_type = Types.ROW([Types.PRIMITIVE_ARRAY(Types.BYTE())] * 2)
    _write(
        kafka_broker,
        topic,
        [Row(*e) for e in events],
        RowFieldExtractorSchema(1),
        key=RowFieldExtractorSchema(0),
        type_info=row_type,
    )
    assert [(r.key, r.value) for r in kafka_broker.read_topic(topic)] == events
    assert _read(kafka_broker, topic, ByteArraySchema()) == [v for _, v in events]


def test_legacy_flink_kafka_producer_and_consumer(kafka_broker: Any) -> None:
    topic = new_topic(kafka_broker, "legacy", 2)
    env = _env()
    producer = FlinkKafkaProducer(
        topic=topic,
        serialization_schema=CsvRowSerializationSchema.Builder(ROW).build(),
        producer_config={"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g"},
    )
    env.from_collection(DATA, type_info=ROW).add_sink(producer)
    env.execute("legacy-write")
    consumer = FlinkKafkaConsumer(
        topics=topic,
        deserialization_schema=CsvRowDeserializationSchema.Builder(ROW).build(),
        properties={"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g1"},
    )
    consumer.set_start_from_earliest()
    env = _env()
    env.enable_checkpointing(300)  # an unbounded job's collected records come at checkpoints
    with env.add_source(consumer).execute_and_collect() as results:  # unbounded: take 3
        rows = [next(results) for _ in DATA]
    assert sorted(tuple(r) for r in rows) == DATA
