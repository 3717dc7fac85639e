"""Kafka topic -> keyed state -> exactly-once file sink, stopped with a savepoint then
restored at another parallelism over more partitions than subtasks: every record once, each
key's records in order (the Kafka offsets are the checkpointed split state). The SIGKILL
schedules of a Kafka-to-Kafka job are in test_kafka_to_kafka_exactly_once.py."""

from __future__ import annotations

import tempfile
import time
from typing import Any

import pytest

from cairn.common.job_status import JobStatus
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration.jobs import exactly_once_problems
from tests.integration.kafka_jobs import kafka_sequence_job, new_topic, produce_sequences

pytestmark = pytest.mark.timeout(300)

RECORDS, KEYS, PARTITIONS = 40_000, 20, 6


@pytest.fixture(scope="module")
def sequences(kafka_broker: Any) -> str:
    """One topic of per-key sequences shared by the tests (each reads it from the start)."""
    topic = new_topic(kafka_broker, "eo-seq", PARTITIONS)
    produce_sequences(kafka_broker, topic, RECORDS, KEYS, PARTITIONS)
    return topic


@pytest.mark.timeout(240)
def test_stop_with_savepoint_then_restore_at_another_parallelism(
    kafka_broker: Any, sequences: str
) -> None:
    """6 partitions read by 2 subtasks, stopped with a savepoint midway, restored at 3: the
    restored readers take over the checkpointed offsets of the partitions they now own."""
    out = tempfile.mkdtemp(prefix="cairn-kafka-rescale-")
    conf = {"cairn.executor": "inprocess"}
    client = kafka_sequence_job(conf, kafka_broker, sequences, out, cost_us=150).execute_async(
        "kafka-before-rescale"
    )
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not read_visible_lines(out):
        time.sleep(0.05)
    target = tempfile.mkdtemp(prefix="cairn-kafka-savepoint-")
    stopped = client.stop_with_savepoint(False, target).result(timeout=120)
    assert client.get_job_status() is JobStatus.FINISHED
    first = read_visible_lines(out)
    assert 0 < len(first) < RECORDS, "stop earlier: the restore must have work left"

    restored = {**conf, "execution.savepoint.path": stopped}
    kafka_sequence_job(restored, kafka_broker, sequences, out, parallelism=3).execute(
        "kafka-after-rescale"
    )
    lines = read_visible_lines(out)
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
