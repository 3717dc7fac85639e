"""The Kafka sink's pure parts: PyFlink's builder names and checks, message serialization
and partitioners, transactional id naming, the commit decision given a marker, the pool,
and the job-submission check of transaction.timeout.ms against the checkpoint interval."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from cairn.common.exceptions import ConfigurationError
from cairn.common.serialization import SimpleStringSchema
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors import DeliveryGuarantee as FromConnectors
from cairn.datastream.connectors.base import DeliveryGuarantee, commits_on_checkpoints
from cairn.datastream.connectors.kafka import DeliveryGuarantee as FromKafka
from cairn.datastream.connectors.kafka import (
    FixedPartitioner,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaTopicSelector,
)
from cairn.datastream.connectors.kafka.sink_transactions import (
    PendingTransaction,
    TransactionIds,
    free_slot,
    to_redo,
)


def _serializer(**kw: Any) -> KafkaRecordSerializationSchema:
    b = KafkaRecordSerializationSchema.builder().set_topic("out")
    b.set_value_serialization_schema(SimpleStringSchema())
    for name, value in kw.items():
        getattr(b, name)(value)
    return b.build()


def _sink(guarantee: DeliveryGuarantee = DeliveryGuarantee.EXACTLY_ONCE, **props: str) -> Any:
    b = (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:9")
        .set_record_serializer(_serializer())
        .set_delivery_guarantee(guarantee)
    )
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        b.set_transactional_id_prefix("unit")
    for k, v in props.items():
        b.set_property(k, v)
    return b.build()


def test_delivery_guarantee_has_pyflinks_names_everywhere() -> None:
    assert FromConnectors is DeliveryGuarantee is FromKafka
    assert [g.name for g in DeliveryGuarantee] == ["EXACTLY_ONCE", "AT_LEAST_ONCE", "NONE"]


def test_builder_defaults_and_checks() -> None:
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers("h:9092")
        .set_record_serializer(_serializer())
        .build()
    )
    assert sink.config.guarantee is DeliveryGuarantee.NONE
    assert not commits_on_checkpoints(sink) or sink.create_committer() is None
    assert _sink().create_committer() is not None
    with pytest.raises(ValueError, match="transactional id prefix"):
        (
            KafkaSink.builder()
            .set_bootstrap_servers("h:9092")
            .set_record_serializer(_serializer())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .build()
        )
    with pytest.raises(ValueError, match="bootstrap servers"):
        KafkaSink.builder().set_record_serializer(_serializer()).build()
    with pytest.raises(ValueError, match="set by the KafkaSink itself"):
        KafkaSink.builder().set_property("transactional.id", "x")
    with pytest.raises(TypeError, match="DeliveryGuarantee"):
        KafkaSink.builder().set_delivery_guarantee("EXACTLY_ONCE")  # type: ignore[arg-type]
    assert _sink(**{"cairn.transactional-id.pool-size": "6"}).config.pool_size == 6
    with pytest.raises(ValueError, match="at least 2"):
        _sink(**{"cairn.transactional-id.pool-size": "1"})
    # Cairn's own options are not handed to librdkafka.
    assert "cairn.transactional-id.pool-size" not in _sink().config.producer_properties
    assert pickle.loads(pickle.dumps(_sink())).config.transactional_id_prefix == "unit"


def test_topic_selector_needs_a_marker_topic_for_exactly_once() -> None:
    selected = (
        KafkaRecordSerializationSchema.builder()
        .set_topic_selector(lambda r: f"t-{r % 2}")
        .set_value_serialization_schema(SimpleStringSchema())
        .build()
    )
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers("h:9092")
        .set_record_serializer(selected)
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("p")
    )
    with pytest.raises(ValueError, match=r"cairn\.transaction\.marker-topic"):
        builder.build()
    sink = builder.set_property("cairn.transaction.marker-topic", "t-0").build()
    assert sink.config.marker_topic == "t-0"


def test_serializer_topic_key_value_and_partitioners() -> None:
    class KeyOf:
        def serialize(self, element: Any) -> bytes:
            return element.split(",")[0].encode()

    s = _serializer(set_key_serialization_schema=KeyOf())
    assert s.serialize("a,1", lambda t: [0]) == ("out", b"a", b"a,1", None)

    class Odd(KafkaTopicSelector):
        def apply(self, data: Any) -> str:
            return "odd" if data % 2 else "even"

    selected = (
        KafkaRecordSerializationSchema.builder()
        .set_topic_selector(Odd())
        .set_value_serialization_schema(SimpleStringSchema())
        .set_partitioner(lambda record, key, value, topic, partitions: partitions[-1])
        .build()
    )
    assert selected.serialize(3, lambda t: [0, 1, 2]) == ("odd", None, b"3", 2)

    fixed = _serializer(set_partitioner=FixedPartitioner())
    fixed.open(5, 6)
    assert fixed.serialize("x", lambda t: [0, 1, 2, 3])[3] == 1  # 5 mod 4

    bad = _serializer(set_partitioner=lambda *args: 7)
    with pytest.raises(ValueError, match="partition 7 of topic 'out'"):
        bad.serialize("x", lambda t: [0, 1])
    with pytest.raises(TypeError, match="serialize"):
        KafkaRecordSerializationSchema.builder().set_value_serialization_schema(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a topic"):
        (
            KafkaRecordSerializationSchema.builder()
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )


def test_transactional_ids_are_distinct_per_parallelism_subtask_and_slot() -> None:
    names = {
        TransactionIds("job", p, i).transactional_id(s)
        for p in (1, 2, 3)
        for i in range(p)
        for s in range(4)
    }
    assert len(names) == 4 * (1 + 2 + 3)
    # A rescale never reuses an id of the old parallelism (no two owners of one id).
    assert TransactionIds("job", 2, 1).transactional_id(0) == "job-2-1-0"
    assert TransactionIds("job", 2, 1).marker_group == "job-2-1"


def test_commit_decision_given_the_marker() -> None:
    pending = [PendingTransaction(s % 2, s, 10 + s, ()) for s in (5, 3, 4)]
    assert to_redo(pending, marker=-1) == sorted(pending, key=lambda p: p.seq)
    assert [p.seq for p in to_redo(pending, marker=3)] == [4, 5]
    assert to_redo(pending, marker=5) == []
    assert to_redo(pending, marker=99) == []  # later transactions committed: all done


def test_pool_slots() -> None:
    assert free_slot(4, []) == 0
    assert free_slot(4, [0, 1]) == 2
    assert free_slot(2, [0, 1]) is None


def _job(sink: KafkaSink, interval_ms: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    if interval_ms > 0:
        env.enable_checkpointing(interval_ms)
    env.from_collection(["a", "b"]).uid("words").sink_to(sink).uid("kafka")
    return env


def test_submission_refuses_a_transaction_timeout_not_longer_than_the_interval() -> None:
    short = _sink(**{"transaction.timeout.ms": "60000"})
    with pytest.raises(ConfigurationError, match=r"timeout.ms = 60000 ms .*interval \(60000 ms\)"):
        _job(short, 60_000).prepare_job()
    _job(short, 59_000).prepare_job()  # shorter interval: fine
    _job(short, 0).prepare_job()  # no checkpoints: committed at the end of input
    # The other guarantees open no transaction.
    _job(_sink(DeliveryGuarantee.AT_LEAST_ONCE, **{"transaction.timeout.ms": "1"}), 60_000)
    assert _sink().config.transaction_timeout_ms == 3_600_000  # Flink's default


def test_a_committable_read_back_from_a_checkpoint_is_never_committed_live() -> None:
    import pickle

    from cairn.datastream.connectors.kafka.sink_transactions import KafkaCommittable
    from cairn.datastream.connectors.kafka.sink_writer import _LIVE, KafkaCommitter

    ids = TransactionIds("unit-live", 1, 0)
    committed: list[int] = []

    class Writer:  # stands in for the live writer of the attempt that wrote the committable
        def commit_async(self, c: KafkaCommittable) -> None:
            committed.append(c.seq)

    _LIVE[("job", 0, ids.marker_group)] = Writer()  # type: ignore[assignment]
    try:
        live = KafkaCommittable("job", 0, ids, 0, 7, 3)
        KafkaCommitter().commit([pickle.loads(pickle.dumps(live))])  # restored: a zombie's
        assert committed == []
        KafkaCommitter().commit([live])
        assert committed == [7]
    finally:
        del _LIVE[("job", 0, ids.marker_group)]


def test_a_call_that_hangs_is_abandoned_with_a_clear_error() -> None:
    import threading
    import time

    from cairn.datastream.connectors.kafka.sink_output import KafkaSinkError, watched

    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(KafkaSinkError, match=r"the marker did not return within 0 s"):
        watched(release.wait, 0.2, "the marker")
    assert time.monotonic() - started < 2
    release.set()
    assert watched(lambda: 5, 1.0, "x") == 5
    with pytest.raises(ZeroDivisionError):
        watched(lambda: 1 / 0, 1.0, "x")
