"""End-to-end exactly-once into Kafka on real Spark: a bounded sequence source -> key_by ->
keyed running sum -> KafkaSink EXACTLY_ONCE, aligned and unaligned, with workers SIGKILLed
between pre-commit and commit (the checkpoint completed, its transactions flushed and not
committed) and at a barrier; a read_committed consumer must see the failure-free output:
every record once, each key's records in order, nothing left open."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.jdbc_jobs import out_of_order_keys
from tests.integration.jobs import exactly_once_problems, expected_lines
from tests.integration.kafka_sink_jobs import kafka_sequence_job, topic_lines

pytestmark = pytest.mark.timeout(400)

RECORDS, KEYS = 40_000, 20

KILLS = (
    # checkpoint completed on every task, the sink's transactions flushed, before the commit
    "point=before-commit,attempt=0,subtask=1;"
    # barrier forwarded and the sink pre-committed, before the acknowledgement
    "point=after-barrier,attempt=1,subtask=0"
)


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


@pytest.mark.spark
@pytest.mark.parametrize("checkpoints", ["aligned", "unaligned"])
def test_sigkill_between_pre_commit_and_commit_keeps_the_topic_exactly_once(
    spark: Any, kafka_broker: Any, checkpoints: str
) -> None:
    topic = _topic(kafka_broker, f"eo-kills-{checkpoints}")
    conf = {"cairn.executor": "spark", "cairn.testing.faults": KILLS}
    env = kafka_sequence_job(
        conf,
        kafka_broker,
        topic,
        records=RECORDS,
        keys=KEYS,
        prefix=topic,
        unaligned=checkpoints == "unaligned",
    )
    client = env.execute_async("kafka-exactly-once")
    client.get_job_execution_result(timeout=300)
    assert client.job_master.restarts == 2, "every scheduled kill must have happened"
    lines = topic_lines(kafka_broker, topic, expect=RECORDS)
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)  # the failure-free output
    assert out_of_order_keys(lines) == []
    # The kills left transactions that were aborted: their records are in the log, unread.
    assert len(topic_lines(kafka_broker, topic, read_committed=False)) > len(lines)
