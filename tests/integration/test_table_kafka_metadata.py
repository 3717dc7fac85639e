"""Kafka metadata columns on a real broker (in process): a source reads each message's
``topic``, ``partition``, ``offset``, ``timestamp``, ``timestamp-type`` and ``headers`` as
the producer wrote them; a sink's ``timestamp`` column becomes its messages' timestamps."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import pytest

from cairn.table import StreamTableEnvironment
from tests.integration.jobs import environment
from tests.integration.kafka_jobs import new_topic

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

MESSAGES, PARTITIONS = 40, 2
BASE_MS = 1_700_000_000_000


def _kafka(broker: Any, topic: str) -> str:
    return (
        f"'connector' = 'kafka', 'topic' = '{topic}',"
        f" 'properties.bootstrap.servers' = '{broker.bootstrap_servers}',"
        " 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',"
        " 'format' = 'json'"
    )


def _read_all(broker: Any, topic: str, count: int) -> list[Any]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        broker.client_config(**{"group.id": f"check-{topic}", "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([topic])
    found: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(found) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                found.append(msg)
    finally:
        consumer.close()
    return found


def test_kafka_metadata_is_read_from_each_message_and_the_timestamp_written(
    kafka_broker: Any,
) -> None:
    from confluent_kafka import Producer

    source = new_topic(kafka_broker, "tmeta-in", PARTITIONS)
    sink = new_topic(kafka_broker, "tmeta-out", 1)
    producer = Producer(kafka_broker.client_config())
    for i in range(MESSAGES):
        producer.produce(
            source,
            json.dumps({"k": i}),
            partition=i % PARTITIONS,
            timestamp=BASE_MS + i * 1000,
            headers=[("n", str(i).encode())],
        )
    assert producer.flush(30) == 0
    t_env = StreamTableEnvironment.create(environment({"cairn.executor": "inprocess"}, 2))
    t_env.execute_sql(
        "CREATE TABLE src (k INT, `offset` BIGINT METADATA VIRTUAL,"
        " part INT METADATA FROM 'partition' VIRTUAL, ts TIMESTAMP_LTZ(3) METADATA FROM"
        " 'timestamp', kind STRING METADATA FROM 'timestamp-type' VIRTUAL,"
        " hs MAP<STRING, BYTES> METADATA FROM 'headers' VIRTUAL,"
        f" t STRING METADATA FROM 'topic' VIRTUAL) WITH ({_kafka(kafka_broker, source)})"
    )
    rows = sorted(tuple(r) for r in t_env.sql_query("SELECT * FROM src").execute().collect())
    epoch = datetime.datetime(1970, 1, 1)
    # per partition, the messages in the order produced: offsets 0, 1, 2, ...
    assert rows == [
        (
            i,
            i // PARTITIONS,
            i % PARTITIONS,
            epoch + datetime.timedelta(milliseconds=BASE_MS + i * 1000),
            "CreateTime",
            {"n": str(i).encode()},
            source,
        )
        for i in range(MESSAGES)
    ]

    t_env.execute_sql(
        f"CREATE TABLE out (k INT, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp')"
        f" WITH ({_kafka(kafka_broker, sink)})"
    )
    t_env.execute_sql("INSERT INTO out SELECT k, ts + INTERVAL '1' HOUR FROM src").wait()
    written = _read_all(kafka_broker, sink, MESSAGES)
    stamps = sorted((json.loads(m.value())["k"], m.timestamp()) for m in written)
    assert stamps == [(i, (1, BASE_MS + i * 1000 + 3_600_000)) for i in range(MESSAGES)]
