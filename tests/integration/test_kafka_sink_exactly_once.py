"""The failure-free output of the exactly-once Kafka sink's sequence job: a bounded sequence
source -> key_by -> keyed running sum -> KafkaSink EXACTLY_ONCE, read by a read_committed
consumer (the SIGKILL schedules of a Kafka-to-Kafka job are in
test_kafka_to_kafka_exactly_once.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.jdbc_jobs import out_of_order_keys
from tests.integration.jobs import expected_lines
from tests.integration.kafka_sink_jobs import kafka_sequence_job, topic_lines

pytestmark = pytest.mark.timeout(400)

RECORDS, KEYS = 40_000, 20


def _topic(kafka_broker: Any, name: str) -> str:
    topic = f"{name}-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=3)
    return topic


@pytest.mark.slow
def test_failure_free_run_writes_the_golden_output(kafka_broker: Any) -> None:
    topic = _topic(kafka_broker, "eo-golden")
    env = kafka_sequence_job(
        {"cairn.executor": "inprocess"},
        kafka_broker,
        topic,
        records=RECORDS,
        keys=KEYS,
        prefix=topic,
        rate=None,
    )
    env.execute("kafka-golden")
    lines = topic_lines(kafka_broker, topic, expect=RECORDS)
    assert sorted(lines) == expected_lines(RECORDS, KEYS)
    assert out_of_order_keys(lines) == []
