"""``cairn chaos`` and unbounded Kafka sources, without a broker: the capture plan, the
replay's split assignment (the Kafka source's own), its checkpointed position across a
restore at another parallelism, the deserializer modes, and the job rewrite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.api.connectors import SourceReaderContext, SplitBatch
from cairn.cli.chaos_capture import plan_capture
from cairn.cli.chaos_inputs import CapturedSource, InputCapture
from cairn.common import WatermarkStrategy
from cairn.common.serialization import DeserializationSchema, Encoder, SimpleStringSchema
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.file_system import FileSink
from cairn.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from cairn.datastream.connectors.kafka.captured import CapturedMessage, write_partition
from cairn.datastream.connectors.kafka.replay import (
    CapturedPartition,
    KafkaReplaySource,
    owned_partitions,
)
from cairn.datastream.connectors.kafka.source_config import KafkaSourceConfig
from cairn.datastream.connectors.kafka.source_reader import KafkaSourceError
from cairn.datastream.connectors.kafka.splits import KafkaPartitionSplit, split_owner
from cairn.graph.transformations import SourceTransformation, reachable


def test_the_plan_starts_at_the_resolved_offsets_and_stops_at_count_or_stopping_offset() -> None:
    parts = [("b", 0), ("a", 1), ("a", 0)]
    starts = {("a", 0): 0, ("a", 1): 40, ("b", 0): 7}
    plans = plan_capture(parts, starts, {("a", 1): 42}, 3)
    assert [(p.topic, p.partition, p.start, p.stop) for p in plans] == [
        ("a", 0, 0, None),
        ("a", 1, 40, 42),
        ("b", 0, 7, None),
    ]
    a0, a1, _ = plans
    assert [a0.wants(n, n) for n in range(5)] == [True, True, True, False, False]
    # the stopping offset comes before the count: two records, with a gap (a marker) between
    assert a1.wants(0, 40) and a1.wants(1, 41) and not a1.wants(1, 42)
    assert not a0.wants(0, -1)  # before the start (never asked of the consumer)
    assert not plan_capture([("c", 0)], {("c", 0): 5}, {("c", 0): 5}, 3)[0].wants(0, 5)


@pytest.mark.parametrize("parallelism", [1, 2, 3, 5])
def test_the_replay_gives_each_partition_to_the_subtask_the_kafka_source_would(
    parallelism: int,
) -> None:
    parts = [CapturedPartition(t, p, "f", 0, 0, 0) for t in ("orders", "x") for p in range(4)]
    seen = []
    for subtask in range(parallelism):
        mine = owned_partitions(parts, subtask, parallelism)
        assert all(split_owner(p.topic, p.partition, parallelism) == subtask for p in mine)
        seen += mine
    assert sorted(seen, key=lambda p: (p.topic, p.partition)) == parts  # each exactly once


def _captured(tmp: Path, topic: str, counts: dict[int, int], gap: int = 1) -> list[Any]:
    """Partitions of ``topic`` with ``counts[p]`` records ``"p:i"``, offsets ``100 + gap*i``
    (``gap`` 2: a transaction marker after each record), timestamp ``1000 + i``."""
    out = []
    for p, n in counts.items():
        msgs = [
            CapturedMessage(topic, p, 100 + gap * i, (1, 1000 + i), b"k%d" % i, f"{p}:{i}".encode())
            for i in range(n)
        ]
        path = str(tmp / f"{topic}-{p}.parquet")
        write_partition(path, msgs)
        stop = msgs[-1].offset() + 1 if msgs else 100
        out.append(CapturedPartition(topic, p, path, 100, stop, n))
    return out


def _config(deserializer: Any, **props: str) -> KafkaSourceConfig:
    return KafkaSourceConfig(
        "127.0.0.1:1", topics=("t",), deserializer=deserializer, properties=tuple(props.items())
    )


def _drain(source: KafkaReplaySource, states: list[Any], p: int, limit: int | None = None) -> Any:
    """Run the readers of ``p`` subtasks from ``states`` (every reader gets all: ``union``),
    each for at most ``limit`` records; what they emitted and their snapshots."""
    records, batches, snapshots = [], [], []
    for i in range(p):
        reader = source.create_reader(states, SourceReaderContext(i, p, 0, "job"))
        emitted = 0
        while limit is None or emitted < limit:
            batch = reader.poll_batch(7)
            if batch is None:
                break
            assert isinstance(batch, SplitBatch)
            records += list(batch)
            batches.append(batch)
            emitted += len(batch)
        snapshots += reader.snapshot_state(1)
    return records, batches, snapshots


def test_a_replay_restored_at_another_parallelism_emits_each_record_once(tmp_path: Path) -> None:
    parts = _captured(tmp_path, "t", {0: 30, 1: 25, 2: 0}, gap=2)
    source = KafkaReplaySource(_config(SimpleStringSchema()), tuple(parts))
    first, batches, states = _drain(source, [], 2, limit=14)
    assert 0 < len(first) < 55
    for batch in batches:  # stamped with Kafka timestamps, in runs of one split
        assert sum(n for _, n in batch.split_runs) == len(batch)
        assert batch.timestamps == [1000 + int(r.split(":")[1]) for r in batch]
    splits = [s for s in states if isinstance(s, KafkaPartitionSplit)]
    assert {(s.topic, s.partition) for s in splits} == {("t", 0), ("t", 1), ("t", 2)}
    assert all(
        s.stopping_offset == p.stop_offset
        for s, p in zip(sorted(splits, key=lambda s: s.partition), parts, strict=True)
    )
    rest, _, done = _drain(source, states, 3)
    assert sorted(first + rest) == sorted(
        f"{p}:{i}" for p, n in ((0, 30), (1, 25)) for i in range(n)
    )
    assert all(s.finished for s in done if isinstance(s, KafkaPartitionSplit))
    for p in (0, 1):  # per partition, in offset order across the restore
        mine = [int(r.split(":")[1]) for r in first + rest if r.startswith(f"{p}:")]
        assert mine == sorted(mine)


class _KeyAndValue(DeserializationSchema):
    reads_message_key = True

    def deserialize(self, message: Any) -> Any:
        key, value = message
        return None if value.endswith(b"3") else (key.decode(), value.decode())


class _Message(DeserializationSchema):
    reads_kafka_message = True

    def deserialize(self, message: Any) -> Any:
        return (message.topic(), message.partition(), message.offset(), message.timestamp()[1])


class _Strict(DeserializationSchema):
    def deserialize(self, message: bytes) -> Any:
        if message.endswith(b"2"):
            raise ValueError("bad")
        return message.decode()


def test_the_replay_hands_the_deserializer_what_the_live_reader_does(tmp_path: Path) -> None:
    parts = tuple(_captured(tmp_path, "t", {0: 5}))
    keyed, _, _ = _drain(KafkaReplaySource(_config(_KeyAndValue()), parts), [], 1)
    assert keyed == [("k0", "0:0"), ("k1", "0:1"), ("k2", "0:2"), ("k4", "0:4")]  # None: dropped
    whole, _, _ = _drain(KafkaReplaySource(_config(_Message()), parts), [], 1)
    assert whole == [("t", 0, 100 + i, 1000 + i) for i in range(5)]
    with pytest.raises(KafkaSourceError, match="partition 0 offset 102"):
        _drain(KafkaReplaySource(_config(_Strict()), parts), [], 1)
    lenient = KafkaReplaySource(_config(_Strict(), **{"ignore-parse-errors": "true"}), parts)
    assert _drain(lenient, [], 1)[0] == ["0:0", "0:1", "0:3", "0:4"]


def test_a_paced_replay_holds_records_back(tmp_path: Path) -> None:
    parts = tuple(_captured(tmp_path, "t", {0: 50}))
    # 0.5 records/s: the first is due 2 s after the reader starts, however loaded the machine
    reader = KafkaReplaySource(_config(SimpleStringSchema()), parts, 0.5).create_reader(
        [], SourceReaderContext(0, 1, 0, "job")
    )
    assert reader.poll_batch(50) == []  # the bucket starts empty
    due = reader.records_due_in_s()
    assert due is not None and 0 < due <= 2.0


def test_the_job_reads_the_replay_in_place_of_its_kafka_source(tmp_path: Path) -> None:
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_topics("t")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    stream = env.from_source(source, WatermarkStrategy.for_monotonous_timestamps(), "in")
    sink = FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    stream.uid("in").key_by(lambda r: r).map(str).uid("m").sink_to(sink).uid("out")
    prepared = env.prepare_job("j")
    env.close()
    capture = InputCapture(str(tmp_path / "input"), 10, 1.0, None)
    parts = tuple(_captured(tmp_path, "t", {0: 2}))
    capture.sources[(1, 1)] = CapturedSource("source 'in'", ("t",), parts)  # captured already
    moved = capture.replay(prepared, 1)
    (before,) = [t for t in reachable(prepared.sinks) if isinstance(t, SourceTransformation)]
    (after,) = [t for t in reachable(moved.sinks) if isinstance(t, SourceTransformation)]
    assert before.source is source and not before.bounded  # the job's own: unchanged
    assert isinstance(after.source, KafkaReplaySource) and after.source.partitions == parts
    assert (after.id, after.uid, after.watermark_strategy) == (
        before.id,
        "in",
        before.watermark_strategy,
    )
    assert [t.uid for t in moved.transformations] == [t.uid for t in prepared.transformations]
    assert moved.settings == prepared.settings
    assert "source 'in': 2 records of topic t: t-0 2 (offsets 100-101)" in capture.report_lines()[1]


def test_a_capture_that_cannot_reach_the_cluster_says_so(tmp_path: Path) -> None:
    from cairn.cli.chaos_capture import CaptureError, capture_kafka
    from cairn.datastream.connectors.kafka.source import KafkaSourceOptions

    config = _config(SimpleStringSchema(), **{KafkaSourceOptions.DEFAULT_API_TIMEOUT_MS: "500"})
    with pytest.raises(CaptureError, match=r"could not reach the Kafka cluster at 127\.0\.0\.1:1"):
        capture_kafka(config, str(tmp_path / "input"), 10, 1.0)


def test_a_coordinator_not_ready_is_tried_again_a_missing_topic_is_not() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from cairn.cli.chaos_capture import is_passing

    def failed(code: int) -> KafkaSourceError:
        error = KafkaSourceError("reading the group's committed offsets failed")
        error.__cause__ = KafkaException(KafkaError(code))
        return error

    assert is_passing(failed(KafkaError.NOT_COORDINATOR))
    assert is_passing(failed(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
    assert not is_passing(failed(KafkaError.UNKNOWN_TOPIC_OR_PART))
    assert not is_passing(KafkaSourceError("no cause"))
