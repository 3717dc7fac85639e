"""``cairn chaos`` on a job reading an unbounded ``KafkaSource``: the input is captured once
(the first records of each partition) and both runs replay it, so the correct job passes
under worker kills and a planted ``random()`` key is caught on the same records.

Each partition holds more records than are captured: a run that read the live topic would
count them (and never end), so ``EQUAL`` with the captured count shows what the runs read.
The capture alone: it starts at the source's own starting offsets and ends by count or time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests._cli import cli_in_process
from tests.integration.kafka_jobs import new_topic

pytestmark = pytest.mark.timeout(240)

JOB = Path(__file__).with_name("_chaos_kafka_job.py")
PER_PARTITION, CAPTURED = 2_000, 1_500


def _chaos(broker: Any, topic: str, tmp: Path, capsys: Any, *job_args: str) -> tuple[int, str]:
    argv = ["chaos", str(JOB), "--faults", "2", "--seed", "7", "--work-dir", str(tmp)]
    argv += ["--capture-records", str(CAPTURED), "--replay-rate", "3000", "--"]
    argv += ["--servers", broker.bootstrap_servers, "--topic", topic, "--out", str(tmp / "out")]
    status = cli_in_process([*argv, *job_args])
    return status, capsys.readouterr().out


@pytest.mark.spark
def test_chaos_replays_a_captured_kafka_topic_and_finds_a_random_key(
    spark: Any, kafka_broker: Any, tmp_path: Path, capsys: Any
) -> None:
    topic = new_topic(kafka_broker, "chaos", 2)
    now = int(time.time() * 1000)  # recent: older records are the broker's to delete
    for p in (0, 1):
        values = [f"k{i % 7},{i}" for i in range(PER_PARTITION)]
        stamps = [now + i for i in range(PER_PARTITION)]
        kafka_broker.produce(topic, values, partition=p, timestamps=stamps)

    status, out = _chaos(kafka_broker, topic, tmp_path / "correct", capsys)
    assert status == 0, out
    assert out.startswith(f"EQUAL: 1 outputs ({2 * CAPTURED} records)"), out
    assert "fired #" in out, out  # a kill landed
    assert "input captured and replayed by every run (3000 records/s):" in out, out
    last = CAPTURED - 1
    where = f"{topic}-0 {CAPTURED} (offsets 0-{last}), {topic}-1 {CAPTURED} (offsets 0-{last})"
    assert f"source 'records': {2 * CAPTURED} records of topic {topic}: {where}" in out, out
    assert f"--capture-records={CAPTURED}" in out, out  # the replay command captures alike
    assert not (tmp_path / "correct" / "out").exists(), "the user's path was written"

    status, out = _chaos(kafka_broker, topic, tmp_path / "bug", capsys, "--bug", "random-key")
    assert status == 1, out
    assert "first difference, in Sink 'counts-file'" in out, out
    assert "likely cause: non-deterministic function or key" in out, out


def test_the_capture_starts_where_the_source_would_and_ends_by_count_or_time(
    kafka_broker: Any, tmp_path: Path
) -> None:
    from cairn.cli.chaos_capture import capture_kafka
    from cairn.common.serialization import SimpleStringSchema
    from cairn.datastream.connectors.kafka import (
        KafkaOffsetsInitializer,
        KafkaSource,
        KafkaTopicPartition,
    )
    from cairn.datastream.connectors.kafka.captured import read_partition

    topic = new_topic(kafka_broker, "capture", 2)
    for p in (0, 1):
        kafka_broker.produce(topic, [f"{p}:{i}" for i in range(300)], partition=p, key=b"k")

    def source(starting: KafkaOffsetsInitializer) -> Any:
        builder = KafkaSource.builder().set_bootstrap_servers(kafka_broker.bootstrap_servers)
        builder.set_topics(topic).set_value_only_deserializer(SimpleStringSchema())
        return builder.set_starting_offsets(starting).build().config()

    given = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 250})
    started = time.monotonic()
    parts = capture_kafka(source(given), str(tmp_path / "a"), 100, 2.0)
    assert 2.0 <= time.monotonic() - started < 15  # partition 0 is waited on for 2 s
    # partition 0 from the given offset (50 left: fewer than 100), 1 from its fallback
    assert [(p.partition, p.start_offset, p.stop_offset, p.records) for p in parts] == [
        (0, 250, 300, 50),
        (1, 0, 100, 100),
    ]
    first = read_partition(parts[0].path)[0]
    assert (first.value(), first.key(), first.offset(), first.partition()) == (
        b"0:250",
        b"k",
        250,
        0,
    )
    assert first.timestamp()[0] == 1  # create time, as produced

    latest = capture_kafka(source(KafkaOffsetsInitializer.latest()), str(tmp_path / "b"), 10, 0.5)
    assert [(p.start_offset, p.records) for p in latest] == [(300, 0), (300, 0)]
