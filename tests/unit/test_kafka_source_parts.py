"""The Kafka source's pure parts: Flink's partition assignment (checked against Java's own
String.hashCode), offsets initializers, split states, the builder and per-split watermarks."""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import pytest

from cairn.common import Duration, WatermarkStrategy
from cairn.common.serialization import SimpleStringSchema
from cairn.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaTopicPartition,
    OffsetResetStrategy,
)
from cairn.datastream.connectors.kafka.offsets import NoOffsetError
from cairn.datastream.connectors.kafka.splits import (
    EARLIEST,
    NO_STOPPING_OFFSET,
    KafkaPartitionSplit,
    java_string_hash,
    split_owner,
)
from cairn.events import ACTIVE, IDLE, MAX_WATERMARK, Watermark
from cairn.runtime.eventtime.split_watermarks import SplitWatermarks

# Printed by Java 17 (String.hashCode and KafkaSourceEnumerator.getSplitOwner's formula) for
# partitions 0..4 at parallelism 1, 2, 3, 4 and 7.
JAVA = {
    "hello": (99162322, "00000 01010 20120 23012 56012"),
    "polygenelubricants": (-2147483648, "00000 01010 01201 01230 01234"),
    "😀": (1772899, "00000 10101 12012 12301 60123"),
    "orders": (-1008770331, "00000 10101 01201 30123 34560"),
    "events-ü": (278136136, "00000 01010 20120 01230 01234"),
    "kafka-source-topic": (-1199078332, "00000 01010 20120 01230 34560"),
    "t": (116, "00000 01010 20120 01230 56012"),
}


@pytest.mark.parametrize("topic", sorted(JAVA))
def test_assignment_is_flinks_with_javas_string_hash(topic: str) -> None:
    java_hash, owners = JAVA[topic]
    assert java_string_hash(topic) == java_hash
    ours = " ".join(
        "".join(str(split_owner(topic, p, n)) for p in range(5)) for n in (1, 2, 3, 4, 7)
    )
    assert ours == owners


def test_a_topics_partitions_spread_over_all_subtasks_round_robin() -> None:
    for n in (2, 3, 5):
        owners = [split_owner("orders", p, n) for p in range(4 * n)]
        assert sorted(set(owners)) == list(range(n))
        assert all(owners.count(s) == 4 for s in range(n))


class Offsets:
    """A cluster's offsets as the initializers see them through ``OffsetLookup``."""

    def __init__(self) -> None:
        self.low = {KafkaTopicPartition("t", p): 10 * p for p in range(3)}
        self.high = {KafkaTopicPartition("t", p): 100 + p for p in range(3)}
        self.group = {KafkaTopicPartition("t", 0): 50}
        self.times = {KafkaTopicPartition("t", 1): 77}
        self.calls: list[str] = []

    def earliest(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]:
        self.calls.append("earliest")
        return {tp: self.low[tp] for tp in tps}

    def latest(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]:
        self.calls.append("latest")
        return {tp: self.high[tp] for tp in tps}

    def committed(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]:
        self.calls.append("committed")
        return {tp: self.group.get(tp, -1) for tp in tps}

    def for_timestamp(
        self, tps: Sequence[KafkaTopicPartition], timestamp_ms: int
    ) -> dict[KafkaTopicPartition, int]:
        self.calls.append(f"timestamp {timestamp_ms}")
        return {tp: self.times.get(tp, -1) for tp in tps}


TPS = [KafkaTopicPartition("t", p) for p in range(3)]


def at(*offsets: int) -> dict[KafkaTopicPartition, int]:
    return dict(zip(TPS, offsets, strict=True))


def test_initializers_resolve_to_concrete_offsets() -> None:
    o = Offsets()
    assert KafkaOffsetsInitializer.earliest().resolve(TPS, o) == dict(
        zip(TPS, [0, 10, 20], strict=True)
    )
    assert KafkaOffsetsInitializer.latest().resolve(TPS, o) == dict(
        zip(TPS, [100, 101, 102], strict=True)
    )
    # no record at or after the timestamp: the end of the partition (Flink)
    assert KafkaOffsetsInitializer.timestamp(5).resolve(TPS, o) == dict(
        zip(TPS, [100, 77, 102], strict=True)
    )
    committed = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST)
    assert committed.resolve(TPS, o) == at(50, 101, 102)
    given = KafkaOffsetsInitializer.offsets({TPS[2]: 7}, OffsetResetStrategy.EARLIEST)
    assert given.resolve(TPS, o) == {TPS[0]: 50, TPS[1]: 10, TPS[2]: 7}
    assert KafkaOffsetsInitializer.latest().resolve([], o) == {}


def test_committed_offsets_without_reset_strategy_fail_for_partitions_without_one() -> None:
    with pytest.raises(NoOffsetError, match="NONE"):
        KafkaOffsetsInitializer.committed_offsets().resolve(TPS, Offsets())


def test_initializers_are_values_with_pyflinks_reprs_and_reset_policies() -> None:
    init = KafkaOffsetsInitializer.offsets({KafkaTopicPartition("a", 1): 5})
    assert pickle.loads(pickle.dumps(init)) == init
    assert repr(init) == (
        "KafkaOffsetsInitializer.offsets({KafkaTopicPartition('a', 1): 5}, "
        "KafkaOffsetResetStrategy.EARLIEST)"
    )
    assert KafkaOffsetsInitializer.latest().auto_offset_reset() == "latest"
    assert KafkaOffsetsInitializer.committed_offsets().auto_offset_reset() == "error"
    with pytest.raises(ValueError):
        KafkaOffsetsInitializer.offsets({KafkaTopicPartition("a", 1): -1})
    with pytest.raises(ValueError):
        KafkaTopicPartition("a", -1)
    assert {KafkaTopicPartition("a", 1), KafkaTopicPartition("a", 1)} == {
        KafkaTopicPartition("a", 1)
    }


def test_split_states_know_when_they_are_finished() -> None:
    assert not KafkaPartitionSplit("t", 0, 5).finished  # no stopping offset
    assert not KafkaPartitionSplit("t", 0, 5, 6).finished
    assert KafkaPartitionSplit("t", 0, 6, 6).finished
    assert KafkaPartitionSplit("t", 0, EARLIEST, 0).finished  # an empty partition
    assert not KafkaPartitionSplit("t", 0, EARLIEST, 3).finished
    assert KafkaPartitionSplit("t", 3, 0).split_id == "t-3"
    assert KafkaPartitionSplit("t", 0, 0).stopping_offset == NO_STOPPING_OFFSET


def _builder() -> object:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_value_only_deserializer(SimpleStringSchema())
    )


def test_builder_requires_pyflinks_fields_and_parses_options_on_the_driver() -> None:
    with pytest.raises(ValueError, match="set_topics"):
        _builder().build()  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="set_group_id"):
        _builder().set_topics("t").set_starting_offsets(  # type: ignore[attr-defined]
            KafkaOffsetsInitializer.committed_offsets()
        ).build()
    with pytest.raises(ValueError, match=r"commit\.offsets\.on\.checkpoint"):
        _builder().set_topics("t").set_property(  # type: ignore[attr-defined]
            "commit.offsets.on.checkpoint", "maybe"
        ).build()
    with pytest.raises(ValueError):
        _builder().set_topics("t").set_property(  # type: ignore[attr-defined]
            "partition.discovery.interval.ms", "soon"
        ).build()


def test_bounded_sources_never_discover_and_options_stay_out_of_the_client_config() -> None:
    source = (
        _builder()
        .set_topic_pattern("orders-.*")  # type: ignore[attr-defined]
        .set_client_id_prefix("shop")
        .set_properties(
            {
                "partition.discovery.interval.ms": "1000",
                "ignore-parse-errors": "true",
                "key.deserializer": "org.apache.kafka...ByteArrayDeserializer",
                "fetch.min.bytes": "10",
            }
        )
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    assert source.is_bounded() and source.discovery_interval_ms == -1
    assert source.ignore_parse_errors and not source.commit_offsets_on_checkpoint  # no group
    conf = source.consumer_config(3, "job1")
    assert conf["client.id"] == "shop-3" and conf["fetch.min.bytes"] == "10"
    assert conf["group.id"] == "cairn-kafka-source-job1" and conf["enable.auto.commit"] is False
    assert conf["isolation.level"] == "read_uncommitted"  # Java's default
    assert not {"partition.discovery.interval.ms", "ignore-parse-errors", "key.deserializer"} & set(
        conf
    )
    assert source.matches("orders-eu") and not source.matches("xorders-eu")
    assert not source.matches("__consumer_offsets")
    again = pickle.loads(pickle.dumps(source))
    assert again.properties == source.properties and again.topic_pattern == source.topic_pattern


def test_split_watermarks_are_the_minimum_over_active_splits() -> None:
    w = SplitWatermarks(WatermarkStrategy.for_monotonous_timestamps(), ["a", "b"])
    w.assign([1, 2, 3], [100, 300, 200], [("a", 1), ("b", 2)])
    assert w.on_periodic_emit(0) == (Watermark(99),)
    w.assign([4], [250], [("a", 1)])
    assert w.on_periodic_emit(200) == (Watermark(249),)
    w.assign([5], [240], [("a", 1)])  # late within its split: no step back
    assert w.on_periodic_emit(400) == ()
    assert w.on_end_of_input() == (Watermark(MAX_WATERMARK),)
    assert w.on_periodic_emit(600) == ()


def test_an_idle_split_stops_holding_the_watermark_back_and_rejoins() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(100))
    w = SplitWatermarks(strategy, ["busy", "quiet"])
    w.assign(["x"], [50], [("quiet", 1)])
    w.assign(["y"], [1000], [("busy", 1)])
    assert w.on_periodic_emit(0) == (Watermark(49),)
    for now in (100, 200, 300):  # only "busy" gets records
        w.assign(["y"], [1000 + now], [("busy", 1)])
        out = w.on_periodic_emit(now)
    assert out == (Watermark(1299),)  # "quiet" went idle
    w.assign(["z"], [2000], [("quiet", 1)])
    w.assign(["y"], [1500], [("busy", 1)])
    assert w.on_periodic_emit(400) == (Watermark(1499),)


def test_a_subtask_without_splits_is_idle_until_one_arrives() -> None:
    w = SplitWatermarks(WatermarkStrategy.for_monotonous_timestamps(), [])
    assert w.on_periodic_emit(0) == (IDLE,)
    assert w.on_periodic_emit(200) == ()
    w.sync_splits(["p"])
    w.assign(["r"], [10], [("p", 1)])
    assert w.on_periodic_emit(400) == (ACTIVE, Watermark(9))


def test_the_assigner_receives_each_records_source_timestamp() -> None:
    from cairn.common import TimestampAssigner

    class Seen(TimestampAssigner):
        def extract_timestamp(self, value: object, record_timestamp: int) -> int:
            return record_timestamp + 1

    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Seen())
    w = SplitWatermarks(strategy, ["a"])
    batch = w.assign(["r", "s"], [10, None], [("a", 2)])
    assert batch.timestamps == [11, -(2**63) + 1]
    assert w.on_periodic_emit(0) == (Watermark(10),)


def test_client_keys_may_come_as_properties_as_in_pyflinks_examples() -> None:
    source = (
        KafkaSource.builder()
        .set_topics("test_json_topic")
        .set_value_only_deserializer(SimpleStringSchema())
        .set_properties({"bootstrap.servers": "localhost:9092", "group.id": "test_group_1"})
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .build()
    )
    assert source.bootstrap_servers == "localhost:9092" and source.group_id == "test_group_1"
    assert source.commit_offsets_on_checkpoint
    conf = source.consumer_config(0, "j")
    assert conf["group.id"] == "test_group_1" and conf["client.id"] == "test_group_1-0"
    with pytest.raises(ValueError, match="set_bootstrap_servers"):
        KafkaSource.builder().set_topics("t").set_value_only_deserializer(
            SimpleStringSchema()
        ).build()
