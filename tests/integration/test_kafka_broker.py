"""The test broker itself (cairn.testing.kafka): a real Kafka that serves, keeps committed
data across a crash, and hides aborted and open transactions from read_committed readers."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.timeout(180)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_topic_round_trip_and_transactions(kafka_broker):
    topic = _topic("broker")
    kafka_broker.create_topic(topic, partitions=3)
    kafka_broker.produce(topic, [b"a", b"b"], partition=1, timestamps=[1000, 2000])
    producer = Producer(kafka_broker.client_config(**{"transactional.id": _topic("tx")}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.flush(30)  # on the broker, not purged from the client's queue by the abort
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=2)
    producer.flush(30)

    committed = kafka_broker.read_topic(topic)
    assert [(r.partition, r.value) for r in committed] == [
        (0, b"committed"),
        (1, b"a"),
        (1, b"b"),
    ]
    assert [r.timestamp for r in committed if r.partition == 1] == [1000, 2000]
    everything = kafka_broker.read_topic(topic, read_committed=False)
    assert {r.value for r in everything} == {b"committed", b"aborted", b"a", b"b", b"open"}
    producer.abort_transaction(30)


def test_killed_broker_restarts_with_its_data(kafka_broker):
    topic = _topic("restart")
    kafka_broker.create_topic(topic, partitions=2)
    kafka_broker.produce(topic, [str(i) for i in range(100)])
    port = kafka_broker.port
    kafka_broker.kill()
    assert not kafka_broker.running
    kafka_broker.restart()
    assert kafka_broker.port == port and kafka_broker.running
    assert sorted(int(r.value) for r in kafka_broker.read_topic(topic)) == list(range(100))
    kafka_broker.produce(topic, [b"after"])
    assert len(kafka_broker.read_topic(topic)) == 101
