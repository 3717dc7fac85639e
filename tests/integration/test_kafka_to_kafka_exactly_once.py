"""Kafka topic -> keyed state -> Kafka topic, exactly-once, on real Spark with worker
processes SIGKILLed at chosen moments: while processing, at a barrier, between pre-commit and
commit (the checkpoint completed, its transactions flushed and not yet committed) and right
after a restore. Aligned checkpoints on the heap backend, unaligned on
RocksDB. A ``read_committed`` consumer must see the failure-free output: every record once,
each key's records in order, nothing left open; the records of the aborted transactions are in
the log but never read."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.common import WatermarkStrategy
from cairn.datastream.connectors.base import DeliveryGuarantee
from cairn.testing.sequence_jobs import SequenceCheck, check_sequence_lines
from tests.integration.jdbc_jobs import out_of_order_keys
from tests.integration.jobs import checkpointed_env, exactly_once_problems, expected_lines
from tests.integration.kafka_jobs import kafka_source, new_topic, parse_sequence, produce_sequences
from tests.integration.kafka_sink_jobs import kafka_sink, topic_lines

pytestmark = pytest.mark.timeout(400)

RECORDS, KEYS, PARTITIONS = 40_000, 20, 6

# (unaligned, state backend, kills): four restarts per run, each at another phase.
RUNS = {
    "aligned-heap": (
        False,
        "hashmap",
        "point=processing,attempt=0,records=8000,subtask=1,vertex=check;"
        "point=after-barrier,attempt=1,subtask=0;"
        "point=before-commit,attempt=2,subtask=1;"
        "point=processing,attempt=3,records=500,subtask=0,vertex=check",
    ),
    "unaligned-rocksdb": (
        True,
        "rocksdb",
        "point=processing,attempt=0,records=8000,subtask=0,vertex=check;"
        "point=before-commit,attempt=1,subtask=0;"
        "point=after-barrier,attempt=2,subtask=1;"
        "point=processing,attempt=3,records=500,subtask=1,vertex=check",
    ),
}


@pytest.fixture(scope="module")
def sequences(kafka_broker: Any) -> str:
    """One input topic of per-key sequences, each key in one partition (read from the start
    by every test)."""
    topic = new_topic(kafka_broker, "k2k-in", PARTITIONS)
    produce_sequences(kafka_broker, topic, RECORDS, KEYS, PARTITIONS)
    return topic


@pytest.mark.spark
@pytest.mark.parametrize("run", sorted(RUNS))
def test_sigkilled_workers_keep_kafka_to_kafka_exactly_once(
    spark: Any, kafka_broker: Any, sequences: str, run: str
) -> None:
    unaligned, backend, kills = RUNS[run]
    out = new_topic(kafka_broker, f"k2k-out-{run}", 3)
    conf = {
        "cairn.executor": "spark",
        "cairn.testing.faults": kills,
        "state.backend.type": backend,
    }
    env = checkpointed_env(conf, unaligned=unaligned)
    (
        env.from_source(
            kafka_source(kafka_broker, sequences), WatermarkStrategy.no_watermarks(), "kafka"
        )
        .uid("kafka-source")
        .map(parse_sequence)
        .uid("parse")
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .name("check")
        .uid("sequence-check")
        .sink_to(kafka_sink(kafka_broker, out, out, DeliveryGuarantee.EXACTLY_ONCE))
        .uid("kafka-sink")
    )
    client = env.execute_async("kafka-to-kafka")
    client.get_job_execution_result(timeout=300)
    assert client.job_master.restarts == 4, "every scheduled kill must have happened"
    lines = topic_lines(kafka_broker, out, expect=RECORDS)
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)  # the failure-free output
    assert out_of_order_keys(lines) == []
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    # The kills left transactions that were aborted: their records are in the log, unread.
    assert len(topic_lines(kafka_broker, out, read_committed=False)) > len(lines)
