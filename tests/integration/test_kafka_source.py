"""KafkaSource against a real broker (in-process executor): reading a topic exactly once,
the offsets initializers, committed offsets, bad input (unreachable cluster, missing topic,
unreadable records), partition discovery while running, and per-partition watermarks."""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from cairn.common import (
    Duration,
    JobExecutionException,
    TimestampAssigner,
    WatermarkStrategy,
)
from cairn.common.job_status import JobStatus
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import DeserializationSchema, SimpleStringSchema
from cairn.datastream import ProcessWindowFunction
from cairn.datastream.connectors.base import SourceReaderContext
from cairn.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaTopicPartition,
)
from cairn.datastream.window import TumblingEventTimeWindows
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import read_visible_lines
from cairn.testing.spark_cluster import free_port
from tests.integration.jobs import environment, exactly_once_problems
from tests.integration.kafka_jobs import (
    kafka_sequence_job,
    kafka_source,
    new_topic,
    produce_sequences,
)
from tests.integration.waits import completed_checkpoints

pytestmark = pytest.mark.timeout(240)

INPROCESS = {"cairn.executor": "inprocess"}
_LIBRDKAFKA_LOG = "cairn.kafka.librdkafka"  # the source readers' consumers log here


def _read_all(reader: Any, limit: int = 100_000) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        batch = reader.poll_batch(500)
        if batch is None:
            return out
        out.extend(batch)
        if not batch:
            time.sleep(0.01)
    raise AssertionError(f"the bounded reader did not end ({len(out)} records)")


def _reader(source: KafkaSource, splits: list[Any] | None = None, p: int = 1, i: int = 0) -> Any:
    return source.create_reader(splits or [], SourceReaderContext(i, p, 0, "job"))


def test_a_topic_is_read_exactly_once_into_the_sink_and_offsets_committed(
    kafka_broker: Any,
) -> None:
    records, keys = 6_000, 12
    topic = new_topic(kafka_broker, "eo", 5)  # more partitions than subtasks
    produce_sequences(kafka_broker, topic, records, keys, 5)
    out = tempfile.mkdtemp(prefix="cairn-kafka-out-")
    kafka_sequence_job(INPROCESS, kafka_broker, topic, out).execute("kafka-read")
    lines = read_visible_lines(out)
    assert exactly_once_problems(lines, records, keys) == []
    # commit.offsets.on.checkpoint: the group's offsets are the ends of the partitions
    consumer = Consumer(kafka_broker.client_config(**{"group.id": f"g-{topic}"}))
    committed = consumer.committed([TopicPartition(topic, p) for p in range(5)], timeout=10)
    ends = [consumer.get_watermark_offsets(TopicPartition(topic, p))[1] for p in range(5)]
    consumer.close()
    assert [tp.offset for tp in committed] == ends and sum(ends) == records


def test_offsets_initializers_start_and_stop_where_flinks_do(kafka_broker: Any) -> None:
    topic = new_topic(kafka_broker, "init", 2)
    for p in range(2):
        kafka_broker.produce(
            topic,
            [f"p{p}-{i}" for i in range(10)],
            partition=p,
            timestamps=list(range(1000, 1100, 10)),
        )

    def read(start: KafkaOffsetsInitializer, stop: KafkaOffsetsInitializer, **kw: str) -> Any:
        builder = (
            KafkaSource.builder()
            .set_bootstrap_servers(kafka_broker.bootstrap_servers)
            .set_topics(topic)
            .set_starting_offsets(start)
            .set_bounded(stop)
            .set_value_only_deserializer(SimpleStringSchema())
        )
        for key, value in kw.items():
            builder.set_property(key, value)
        if start.kind == "committed":
            builder.set_group_id(f"g-{topic}")
        reader = _reader(builder.build())
        try:
            return sorted(_read_all(reader))
        finally:
            reader.close()

    latest = KafkaOffsetsInitializer.latest()
    assert len(read(KafkaOffsetsInitializer.earliest(), latest)) == 20
    assert read(KafkaOffsetsInitializer.latest(), latest) == []
    assert read(KafkaOffsetsInitializer.timestamp(1075), latest) == [
        "p0-8",
        "p0-9",
        "p1-8",
        "p1-9",
    ]
    tp0, tp1 = KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 1)
    assert read(
        KafkaOffsetsInitializer.offsets({tp0: 7}),
        KafkaOffsetsInitializer.offsets({tp0: 9, tp1: 1}),
    ) == ["p0-7", "p0-8", "p1-0"]
    # no committed offsets yet: NONE fails clearly, EARLIEST starts at the beginning
    with pytest.raises(Exception, match="no committed offset"):
        read(KafkaOffsetsInitializer.committed_offsets(), latest)
    consumer = Consumer(kafka_broker.client_config(**{"group.id": f"g-{topic}"}))
    consumer.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    consumer.close()
    assert read(
        KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST), latest
    ) == ["p0-6", "p0-7", "p0-8", "p0-9"]


def test_restored_splits_resume_at_their_offsets_under_their_new_owners(
    kafka_broker: Any,
) -> None:
    topic = new_topic(kafka_broker, "rescale", 5)
    for p in range(5):
        kafka_broker.produce(topic, [f"{p}:{i}" for i in range(20)], partition=p)
    source = kafka_source(kafka_broker, topic)
    old = [_reader(source, None, 2, i) for i in range(2)]
    seen: list[str] = []
    for reader in old:  # a little from each partition, then a snapshot of each subtask
        for _ in range(50):
            seen.extend(reader.poll_batch(3) or [])
            if len(seen) >= 15 * (old.index(reader) + 1):
                break
    union = [s for reader in old for s in reader.snapshot_state(1)]
    for reader in old:
        reader.close()
    new = [_reader(source, union, 3, i) for i in range(3)]
    rest = [r for reader in new for r in _read_all(reader)]
    for reader in new:
        reader.close()
    assert sorted(seen + rest) == sorted(f"{p}:{i}" for p in range(5) for i in range(20))


def _failure(env: Any) -> str:
    env.set_restart_strategy(RestartStrategies.no_restart())
    client = env.execute_async("kafka-bad-input")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout=120)
    assert client.get_job_status() is JobStatus.FAILED
    return str(info.value)


def test_an_unreachable_cluster_fails_the_job_within_the_api_timeout() -> None:
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(f"127.0.0.1:{free_port()}")  # nothing listens there
        .set_topics("anything")
        .set_value_only_deserializer(SimpleStringSchema())
        .set_property("default.api.timeout.ms", "2000")
        .build()
    )
    env = environment(INPROCESS, 1)
    env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka").print()
    started = time.monotonic()
    message = _failure(env)
    assert time.monotonic() - started < 30
    assert "could not reach the Kafka cluster at 127.0.0.1:" in message
    assert "within 2 s" in message


def test_a_missing_topic_fails_the_job_naming_it(kafka_broker: Any) -> None:
    env = environment(INPROCESS, 1)
    source = kafka_source(kafka_broker, "no-such-topic")
    env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka").print()
    message = _failure(env)
    assert "topic(s) ['no-such-topic'] do not exist" in message


class Digits(DeserializationSchema):
    def deserialize(self, message: bytes) -> int:
        return int(message.decode())


def test_an_unreadable_record_fails_naming_where_it_is_or_is_skipped_and_counted(
    kafka_broker: Any,
) -> None:
    topic = new_topic(kafka_broker, "bad", 1)
    kafka_broker.produce(topic, [b"1", b"2", b"oops", b"4", b"\xff", b"6"])

    def source(**props: str) -> KafkaSource:
        builder = (
            KafkaSource.builder()
            .set_bootstrap_servers(kafka_broker.bootstrap_servers)
            .set_topics(topic)
            .set_bounded(KafkaOffsetsInitializer.latest())
            .set_value_only_deserializer(Digits())
        )
        for key, value in props.items():
            builder.set_property(key, value)
        return builder.build()

    env = environment(INPROCESS, 1)
    env.from_source(source(), WatermarkStrategy.no_watermarks(), "kafka").print()
    message = _failure(env)
    assert f"could not deserialize the record at topic '{topic}' partition 0 offset 2" in message
    assert "ValueError" in message and "ignore-parse-errors" in message

    reader = _reader(source(**{"ignore-parse-errors": "true"}))
    assert _read_all(reader) == [1, 2, 4, 6]
    assert reader.skipped_records == 2
    reader.close()


def test_partitions_added_while_running_are_read_from_their_beginning(
    kafka_broker: Any,
) -> None:
    records, keys = 2_000, 8
    topic = new_topic(kafka_broker, "grow", 2)
    produce_sequences(kafka_broker, topic, records // 2, keys // 2, 2)
    source = kafka_source(
        kafka_broker, topic, bounded=False, **{"partition_discovery_interval_ms": "300"}
    )
    out = tempfile.mkdtemp(prefix="cairn-kafka-grow-")
    env = kafka_sequence_job(INPROCESS, kafka_broker, topic, out, source=source)
    client = env.execute_async("kafka-discovery")
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 60)
        _wait_for_lines(out, records // 2)
        kafka_broker.add_partitions(topic, 4)
        # keys 4..7 only in the new partitions 2 and 3
        from confluent_kafka import Producer

        producer = Producer(kafka_broker.client_config())
        for i in range(records // 2):
            k = keys // 2 + i % (keys // 2)
            producer.produce(topic, f"k{k:05d},{i // (keys // 2) + 1}", partition=2 + k % 2)
        assert producer.flush(30) == 0
        lines = _wait_for_lines(out, records)
    finally:
        _cancel(client)
    assert exactly_once_problems(lines, records, keys) == []


def _wait_for_lines(out: str, n: int, timeout_s: float = 90) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = read_visible_lines(out)
        if len(lines) >= n:
            return lines
        time.sleep(0.2)
    raise AssertionError(f"{len(read_visible_lines(out))} lines, expected {n}")


class KafkaTime(TimestampAssigner):
    """Keeps the Kafka timestamp, checking that it arrived."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        assert record_timestamp >= 0, "the Kafka record's timestamp did not reach the assigner"
        return record_timestamp


class CountWindow(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Iterator[str]:
        yield f"{key}@{context.window().start}:{len(list(elements))}"


def test_per_partition_watermarks_keep_a_lagging_partition_on_time(kafka_broker: Any) -> None:
    """Partition 0 runs an hour ahead of partition 1 on the one subtask and is read first:
    one watermark per subtask would then make all of partition 1's records late (dropped);
    per partition, none is. The empty third partition goes idle (with_idleness) instead of
    holding every window back."""
    topic = new_topic(kafka_broker, "wm", 3)
    hour = 3_600_000

    def produce(p: int, base: int) -> None:  # (librdkafka takes timestamp 0 as "now")
        stamps = [base + 10 * i for i in range(300)]
        kafka_broker.produce(topic, [f"p{p}"] * 300, partition=p, timestamps=stamps)

    produce(0, hour + 1000)
    source = kafka_source(
        kafka_broker, topic, bounded=False, **{"partition_discovery_interval_ms": "-1"}
    )
    strategy = (
        WatermarkStrategy.for_monotonous_timestamps()
        .with_timestamp_assigner(KafkaTime())
        .with_idleness(Duration.of_seconds(5))
    )
    env = environment(INPROCESS, 1)
    env.get_config().set_auto_watermark_interval(50)
    out = tempfile.mkdtemp(prefix="cairn-kafka-wm-")
    from tests.integration.jobs import file_sink

    (
        env.from_source(source, strategy, "kafka")
        .key_by(lambda v: v)
        .window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
        .process(CountWindow())
        .sink_to(file_sink(out))
    )
    env.enable_checkpointing(200)
    client = env.execute_async("kafka-watermarks")
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 60)
        running = time.monotonic()
        # p0 read: a checkpoint after its 300 records completed (and committed their offsets);
        # then one more (its barrier 200 ms later, four watermark intervals): a watermark of
        # p0's time alone would be on its way ahead of every record of p1 produced now.
        wait_for(
            lambda: _committed_offsets(kafka_broker, topic, 1) == [300] or None,
            30,
            0.05,
            "p0's offsets committed by a checkpoint",
        )
        completed = client.get_checkpoint_statistics().counts.completed
        completed_checkpoints(client, completed + 1)
        assert time.monotonic() - running < 5, "p1 may have gone idle (5 s) before its records"
        produce(1, 1000)
        for p in (0, 1):  # then both far ahead: once the empty p2 is idle, all windows fire
            kafka_broker.produce(topic, [f"p{p}"], partition=p, timestamps=[2 * hour])
        lines = _wait_for_lines(out, 6, timeout_s=30)
    finally:
        _cancel(client)
    assert sorted(lines) == [
        "p0@3601000:100",
        "p0@3602000:100",
        "p0@3603000:100",
        "p1@1000:100",
        "p1@2000:100",
        "p1@3000:100",
    ]  # every record of the lagging partition on time, none twice


def _committed_offsets(broker: Any, topic: str, partitions: int) -> list[int]:
    """The offsets the job's group (``kafka_source``'s) committed for the first partitions."""
    consumer = Consumer(broker.client_config(**{"group.id": f"g-{topic}"}))
    try:
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
    finally:
        consumer.close()
    return [tp.offset for tp in committed]


def _cancel(client: Any) -> None:
    client.cancel()
    client.get_job_execution_result(timeout=60)
    assert client.get_job_status() is JobStatus.CANCELED


def test_a_topic_deleted_under_the_job_fails_it_naming_the_partitions(kafka_broker: Any) -> None:
    topic = new_topic(kafka_broker, "deleted", 2)
    kafka_broker.produce(topic, [b"a", b"b"])
    env = environment(INPROCESS, 1)
    source = kafka_source(
        kafka_broker, topic, bounded=False, **{"partition_discovery_interval_ms": "200"}
    )
    env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka").print()
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.enable_checkpointing(100)
    client = env.execute_async("kafka-topic-deleted")
    # The reader has both partitions: a checkpoint after both records committed their offsets.
    wait_for(
        lambda: sum(max(o, 0) for o in _committed_offsets(kafka_broker, topic, 2)) == 2 or None,
        60,
        0.05,
        "the two records read and their offsets committed",
    )
    kafka_broker.delete_topic(topic)
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout=60)
    message = str(info.value)
    assert f"partition(s) {topic}-0, {topic}-1 no longer exist" in message
    assert "topic deleted while the job ran?" in message


def test_the_job_rides_out_a_broker_restart(
    kafka_broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker is SIGKILLed and restarted under a running job: the readers reconnect and
    go on from where they were; nothing lost, nothing twice."""
    records, keys = 4_000, 8
    topic = new_topic(kafka_broker, "restart", 4)
    produce_sequences(kafka_broker, topic, records, keys, 4)
    source = kafka_source(
        kafka_broker, topic, bounded=False, **{"partition_discovery_interval_ms": "1000"}
    )
    out = tempfile.mkdtemp(prefix="cairn-kafka-restart-")
    client = kafka_sequence_job(INPROCESS, kafka_broker, topic, out, source=source).execute_async(
        "kafka-broker-restart"
    )
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 60)
        _wait_for_lines(out, records)
        caplog.set_level(logging.WARNING, logger=_LIBRDKAFKA_LOG)
        seen = len(caplog.records)
        kafka_broker.kill()
        wait_for(  # librdkafka's FAIL line: a consumer of the job lost its broker connection
            lambda: any(f"FAIL [g-{topic}" in r.getMessage() for r in caplog.records[seen:]),
            30,
            0.05,
            "a consumer of the job logs the broker gone",
        )
        kafka_broker.restart()
        from confluent_kafka import Producer

        # Idempotent: a plain producer's retries while the broker comes back may land a
        # batch after later ones, and the job rightly reports those sequences out of order
        # (seen once in CI: "!k00000,947,501", key 0's seq 947 read right after 500).
        producer = Producer({**kafka_broker.client_config(), "enable.idempotence": True})
        for i in range(records, 2 * records):  # the sequences go on
            k = i % keys
            producer.produce(topic, f"k{k:05d},{i // keys + 1}", partition=k % 4)
        assert producer.flush(60) == 0
        lines = _wait_for_lines(out, 2 * records, timeout_s=120)
        assert client.get_job_status() is JobStatus.RUNNING
    finally:
        _cancel(client)
    assert exactly_once_problems(lines, 2 * records, keys) == []


def test_json_rows_as_pyflinks_kafka_example_reads_them(kafka_broker: Any) -> None:
    """The read side of PyFlink's kafka_json_format example, with the import changed: keys as
    properties, ``JsonRowDeserializationSchema.Builder()``, unnamed ROW fields f0, f1."""
    from cairn.common import Types
    from cairn.datastream.formats.json import JsonRowDeserializationSchema

    topic = new_topic(kafka_broker, "json", 1)
    kafka_broker.produce(topic, [b'{"f0": 1, "f1": "hi"}', b"{broken", b'{"f0": 2, "f1": "yo"}'])
    deserialization_schema = (
        JsonRowDeserializationSchema.Builder()
        .type_info(Types.ROW([Types.INT(), Types.STRING()]))
        .ignore_parse_errors()
        .build()
    )
    source = (
        KafkaSource.builder()
        .set_topics(topic)
        .set_value_only_deserializer(deserialization_schema)
        .set_properties({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "j"})
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    reader = _reader(source)
    rows = _read_all(reader)
    reader.close()
    assert [(r.f0, r.f1) for r in rows] == [(1, "hi"), (2, "yo")]  # the broken one dropped
