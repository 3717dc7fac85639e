"""Small gaps Flink's PyFlink examples hit: add_jars/add_classpaths accepted (logged once),
bytes for Types.PRIMITIVE_ARRAY(Types.BYTE()), missing connectors refused at import naming
them, DeliveryGuarantee where PyFlink has it, and the legacy FlinkKafkaConsumer /
FlinkKafkaProducer as a KafkaSource / KafkaSink."""

from __future__ import annotations

import importlib
import logging

import pytest

from cairn.common import Row, Types
from cairn.common.serialization import SimpleStringSchema
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors import DeliveryGuarantee
from cairn.datastream.connectors.kafka import (
    FlinkKafkaConsumer,
    FlinkKafkaProducer,
    KafkaOffsetsInitializer,
    KafkaSink,
    KafkaSource,
    Semantic,
)


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(1)
    return env


def test_add_jars_and_classpaths_are_accepted_and_logged_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cairn.datastream.stream_execution_environment as see

    monkeypatch.setattr(see, "_jars_noted", False)
    env = _env()
    with caplog.at_level(logging.INFO, logger=see.__name__):
        env.add_jars("file:///path/to/flink-sql-connector-kafka.jar", "file:///x.jar")
        env.add_classpaths("file:///y.jar")
        env.add_jars("file:///z.jar")
    notes = [r.getMessage() for r in caplog.records if "needs no jars" in r.getMessage()]
    assert len(notes) == 1 and "flink-sql-connector-kafka.jar" in notes[0]


def test_bytes_fit_a_primitive_byte_array_as_in_pyflink() -> None:
    env = _env()
    data = [(b'{"id": 1}',), (bytearray(b"\x00\xff"),)]
    ds = env.from_collection(data, type_info=Types.ROW([Types.PRIMITIVE_ARRAY(Types.BYTE())]))
    out = ds.map(lambda r: r[0], output_type=Types.PRIMITIVE_ARRAY(Types.BYTE()))
    with out.execute_and_collect() as results:
        assert list(results) == [b'{"id": 1}', b"\x00\xff"]
    with pytest.raises(TypeError, match="element 0"):
        env.from_collection(["text"], type_info=Types.PRIMITIVE_ARRAY(Types.BYTE()))
    ints = env.from_collection([[1, 2]], type_info=Types.PRIMITIVE_ARRAY(Types.INT()))
    with ints.execute_and_collect() as results:
        assert list(results) == [[1, 2]]


@pytest.mark.parametrize(
    ("module", "name", "what"),
    [
        ("pulsar", "PulsarSource", "Apache Pulsar"),
        ("elasticsearch", "Elasticsearch7SinkBuilder", "Elasticsearch"),
        ("kinesis", "FlinkKinesisConsumer", "Amazon Kinesis"),
        ("cassandra", "CassandraSink", "Apache Cassandra"),
        ("rabbitmq", "RMQSource", "RabbitMQ"),
        ("hybrid_source", "HybridSource", "HybridSource"),
    ],
)
def test_missing_connectors_fail_at_import_naming_themselves(
    module: str, name: str, what: str
) -> None:
    mod = importlib.import_module(f"cairn.datastream.connectors.{module}")
    with pytest.raises(ImportError, match=f"{name}: the {what}.* connector is not supported"):
        exec(f"from cairn.datastream.connectors.{module} import {name}")
    with pytest.raises(ImportError, match="not supported by Cairn"):
        exec(f"from cairn.datastream.connectors import {name}")
    with pytest.raises(AttributeError):
        mod.lowercase_probe  # noqa: B018 - tools probing modules see no ImportError


def test_delivery_guarantee_imports_where_pyflink_has_it() -> None:
    from cairn.datastream.connectors.base import DeliveryGuarantee as base
    from cairn.datastream.connectors.kafka import DeliveryGuarantee as kafka

    assert DeliveryGuarantee is base is kafka
    assert DeliveryGuarantee.AT_LEAST_ONCE.name == "AT_LEAST_ONCE"


def test_legacy_kafka_consumer_runs_as_the_kafka_source_it_describes() -> None:
    props = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g"}
    consumer = FlinkKafkaConsumer(["a", "b"], SimpleStringSchema(), props)
    default = consumer.to_source()
    assert default.starting_offsets.kind == "committed"  # Flink's default: group offsets
    source = consumer.set_start_from_earliest().set_commit_offsets_on_checkpoints(False)
    built = source.to_source()
    assert isinstance(built, KafkaSource) and built.topics == ("a", "b")
    assert built.starting_offsets == KafkaOffsetsInitializer.earliest()
    assert built.group_id == "g" and not built.commit_offsets_on_checkpoint
    env = _env()
    ds = env.add_source(consumer, "legacy")
    assert not ds._non_parallel  # parallel, as a KafkaSource
    with pytest.raises(ValueError, match=r"bootstrap\.servers"):
        FlinkKafkaConsumer("a", SimpleStringSchema(), {})


def test_legacy_kafka_producer_is_a_kafka_sink_with_its_semantic() -> None:
    producer = FlinkKafkaProducer(
        "out",
        SimpleStringSchema(),
        {"bootstrap.servers": "127.0.0.1:9", "group.id": "ignored"},
    )
    assert isinstance(producer, KafkaSink)
    assert producer.config.guarantee is DeliveryGuarantee.AT_LEAST_ONCE
    assert producer.config.serializer.serialize(Row("x"), lambda t: [0])[0] == "out"
    assert "group.id" not in producer.config.producer_properties
    exactly = FlinkKafkaProducer(
        "out", SimpleStringSchema(), {"bootstrap.servers": "h:1"}, semantic=Semantic.EXACTLY_ONCE
    )
    assert exactly.config.guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert exactly.config.transactional_id_prefix == "cairn-out"
    env = _env()
    env.from_collection(["a"]).add_sink(producer)  # add_sink takes it as PyFlink's does


def test_collect_shows_a_slow_unbounded_stream_without_checkpointing() -> None:
    """Without checkpointing the collect sink sends what arrived within ~100 ms: a stream of
    20 records/s gives its first records long before 4096 of them could pile up."""
    import time

    from cairn.common import WatermarkStrategy
    from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy

    env = _env()
    source = DataGeneratorSource(
        lambda i: i, None, RateLimiterStrategy.per_second(20), type_info=Types.LONG()
    )
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "slow")
    started = time.monotonic()
    assert ds.execute_and_collect(limit=3) == [0, 1, 2]
    assert time.monotonic() - started < 30


def test_from_collection_takes_pyflinks_instant_for_an_instant_field() -> None:
    """PyFlink's windowing examples build ``Types.INSTANT()`` fields from
    ``Instant.of_epoch_milli``; a datetime is taken too, anything else is refused."""
    from cairn.common.time import Instant
    from cairn.common.type_conversion import convert_elements

    row = Types.ROW([Types.INSTANT(), Types.STRING()])
    (converted,) = convert_elements([(Instant.of_epoch_milli(1000), "a")], row)
    assert converted[0] == Instant.of_epoch_milli(1000)
    with pytest.raises(TypeError, match=r"element 0\.f0: 1000 \(int\) is not of type Instant"):
        convert_elements([(1000, "a")], row)
