"""Table connectors by name: ``filesystem``, ``kafka``, ``upsert-kafka``, with Flink's keys.

No servers: the option checks and their Flink messages (unknown key, missing required key,
bad value, an updating query into an append-only sink) fail at planning, so they are tested
on the DDL alone; the filesystem connector runs end to end on the in-process executor; the
Kafka message layout (key, value, tombstone) is tested on its functions. The Kafka and
exactly-once runs are in ``tests/integration/test_table_connectors_exactly_once.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn.table import EnvironmentSettings, TableEnvironment, ValidationError
from cairn.table.analysis import Columns
from cairn.table.formats import row_deserializer, row_serializer
from cairn.table.kafka import (
    DropUpdateBefore,
    ToKafkaRecord,
    UpsertMessage,
)
from cairn.table.kafka_offsets import parse_specific_offsets
from cairn.table.types import DataTypes

KAFKA = "'connector' = 'kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'h:9092'"
UPSERT = (
    "'connector' = 'upsert-kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'h:9092',"
    " 'key.format' = 'json', 'value.format' = 'json'"
)


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    return t_env


def _message(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


# -- options and their errors ----------------------------------------------------------------


def test_an_unknown_kafka_option_is_named_with_the_supported_ones() -> None:
    t_env = _t_env()
    with pytest.raises(ValidationError) as e:
        t_env.execute_sql(
            f"CREATE TABLE k (a STRING) WITH ({KAFKA}, 'format' = 'json', 'scan.startup.mod' = 'x')"
        )
    message = _message(e)
    assert "Unsupported options found for 'kafka'." in message
    assert "Unsupported options:\n\nscan.startup.mod\n" in message
    supported = message.split("Supported options:\n\n")[1].splitlines()
    assert {"connector", "topic", "scan.startup.mode", "json.ignore-parse-errors"} <= set(supported)


def test_a_missing_topic_is_flinks_missing_required_options() -> None:
    with pytest.raises(ValidationError) as e:
        _t_env().execute_sql(
            "CREATE TABLE k (a STRING) WITH ('connector' = 'kafka',"
            " 'properties.bootstrap.servers' = 'h:9092', 'format' = 'json')"
        )
    assert _message(e).endswith(
        "One or more required options are missing.\n\nMissing required options are:\n\ntopic"
    )


def test_kafka_properties_pass_through_and_format_options_follow_the_format() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        f"CREATE TABLE k (a STRING) WITH ({KAFKA}, 'properties.linger.ms' = '5',"
        " 'format' = 'csv', 'csv.field-delimiter' = ';')"
    )
    with pytest.raises(
        ValidationError, match=re.escape("Unsupported options:\n\njson.ignore-parse-errors")
    ):
        t_env.execute_sql(
            f"CREATE TABLE k2 (a STRING) WITH ({KAFKA}, 'format' = 'csv',"
            " 'json.ignore-parse-errors' = 'true')"
        )


def test_exactly_once_needs_a_transactional_id_prefix() -> None:
    with pytest.raises(
        ValidationError, match=re.escape("sink.transactional-id-prefix must be specified")
    ):
        _t_env().execute_sql(
            f"CREATE TABLE k (a STRING) WITH ({KAFKA}, 'format' = 'json',"
            " 'sink.delivery-guarantee' = 'exactly-once')"
        )
    with pytest.raises(ValidationError, match=re.escape("'sink.delivery-guarantee'")):
        _t_env().execute_sql(
            f"CREATE TABLE k (a STRING) WITH ({KAFKA}, 'format' = 'json',"
            " 'sink.delivery-guarantee' = 'twice')"
        )


def test_a_bad_startup_mode_fails_when_the_table_is_read() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        f"CREATE TABLE k (a STRING) WITH ({KAFKA}, 'format' = 'json',"
        " 'scan.startup.mode' = 'first-offset')"
    )
    with pytest.raises(
        ValidationError, match=re.escape("Invalid value for option 'scan.startup.mode'")
    ):
        t_env.from_path("k")
    t_env.execute_sql(
        f"CREATE TABLE k2 (a STRING) WITH ({KAFKA}, 'format' = 'json',"
        " 'properties.group.id' = 'g', 'scan.topic-partition-discovery.interval' = 'soon')"
    )
    with pytest.raises(
        ValidationError, match=re.escape("'scan.topic-partition-discovery.interval'")
    ):
        t_env.from_path("k2")


@pytest.mark.parametrize("mode", ["startup", "bounded"])
def test_specific_offsets_are_flinks_partition_offset_pairs(mode: str) -> None:
    assert parse_specific_offsets("partition:0,offset:42;partition:1,offset:300", "k") == {
        0: 42,
        1: 300,
    }
    t_env = _t_env()
    given = f"'scan.{mode}.mode' = 'specific-offsets', 'scan.startup.mode' = 'earliest-offset'"
    if mode == "startup":
        given = "'scan.startup.mode' = 'specific-offsets'"
    offsets = f"'scan.{mode}.specific-offsets'"
    t_env.execute_sql(
        f"CREATE TABLE ok (a STRING) WITH ({KAFKA}, 'format' = 'json', {given},"
        f" {offsets} = 'partition:0,offset:3;partition:2,offset:0')"
    )
    t_env.from_path("ok")
    t_env.execute_sql(f"CREATE TABLE missing (a STRING) WITH ({KAFKA}, 'format' = 'json', {given})")
    with pytest.raises(
        ValidationError,
        match=re.escape(f"{offsets} is required in 'specific-offsets' {mode} mode but missing."),
    ):
        t_env.from_path("missing")
    for bad in ("partition:0;offset:1", "partition:0,offset:x", "p:0,offset:1", ""):
        t_env.execute_sql(
            f"CREATE TABLE bad (a STRING) WITH ({KAFKA}, 'format' = 'json', {given},"
            f" {offsets} = '{bad}')"
        )
        with pytest.raises(ValidationError) as e:
            t_env.from_path("bad")
        assert _message(e) == (
            f"Invalid properties {offsets} should follow the format"
            f" 'partition:0,offset:42;partition:1,offset:300', but is '{bad}'."
        )
        t_env.execute_sql("DROP TABLE bad")
    two_topics = KAFKA.replace("'topic' = 't'", "'topic' = 't;u'")
    t_env.execute_sql(
        f"CREATE TABLE two (a STRING) WITH ({two_topics}, 'format' = 'json', {given},"
        f" {offsets} = 'partition:0,offset:1')"
    )
    with pytest.raises(ValidationError, match="only supports specific offset for single topic"):
        t_env.from_path("two")


def test_upsert_kafka_needs_a_primary_key_and_both_formats() -> None:
    with pytest.raises(ValidationError, match="'upsert-kafka' tables require to define a PRIMARY"):
        _t_env().execute_sql(f"CREATE TABLE u (k STRING, n BIGINT) WITH ({UPSERT})")
    with pytest.raises(ValidationError) as e:
        _t_env().execute_sql(
            "CREATE TABLE u (k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH"
            " ('connector' = 'upsert-kafka', 'topic' = 't',"
            " 'properties.bootstrap.servers' = 'h:9092', 'value.format' = 'json')"
        )
    assert _message(e).endswith("Missing required options are:\n\nkey.format")


def test_an_unknown_format_is_flinks_missing_factory() -> None:
    with pytest.raises(ValidationError, match="identifier 'avro-confluent'"):
        _t_env().execute_sql(
            "CREATE TABLE f (a STRING) WITH ('connector' = 'filesystem', 'path' = '/x',"
            " 'format' = 'avro-confluent')"
        )


def test_filesystem_needs_path_and_format() -> None:
    with pytest.raises(ValidationError) as e:
        _t_env().execute_sql("CREATE TABLE f (a STRING) WITH ('connector' = 'filesystem')")
    assert _message(e).endswith("Missing required options are:\n\npath\nformat")


def test_jdbc_needs_url_and_table_name_and_writes_postgresql() -> None:
    with pytest.raises(ValidationError) as e:
        _t_env().execute_sql("CREATE TABLE j (a STRING) WITH ('connector' = 'jdbc')")
    assert _message(e).endswith("Missing required options are:\n\nurl\ntable-name")
    with pytest.raises(ValidationError, match="writes to PostgreSQL"):
        _t_env().execute_sql(
            "CREATE TABLE j (a STRING) WITH ('connector' = 'jdbc',"
            " 'url' = 'jdbc:mysql://h/db', 'table-name' = 't')"
        )
    with pytest.raises(ValidationError, match=re.escape("Unsupported options:\n\nscan.fetch-size")):
        _t_env().execute_sql(
            "CREATE TABLE j (a STRING) WITH ('connector' = 'jdbc',"
            " 'url' = 'jdbc:postgresql://h/db', 'table-name' = 't', 'scan.fetch-size' = '9')"
        )


# -- which sinks take updates ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("ddl", "takes_updates"),
    [
        ("'connector' = 'filesystem', 'path' = '{path}', 'format' = 'json'", False),
        (KAFKA + ", 'format' = 'json'", False),
        ("'connector' = 'blackhole'", True),
        (UPSERT, True),
        ("'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db', 'table-name' = 'o'", True),
    ],
)
def test_updating_queries_go_only_into_sinks_that_take_updates(
    tmp_path: Path, ddl: str, takes_updates: bool
) -> None:
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE TABLE src (k STRING, v BIGINT) WITH ('connector' = 'datagen',"
        " 'number-of-rows' = '10', 'fields.k.length' = '1')"
    )
    key = ", PRIMARY KEY (k) NOT ENFORCED" if "upsert" in ddl or "jdbc" in ddl else ""
    t_env.execute_sql(
        f"CREATE TABLE out (k STRING, n BIGINT{key}) WITH ({ddl.format(path=tmp_path)})"
    )
    query = t_env.sql_query("SELECT k, COUNT(*) AS n FROM src GROUP BY k")
    if takes_updates:
        query.explain()  # planning alone; nothing runs against a broker
        return
    with pytest.raises(ValidationError) as e:
        t_env.execute_sql("INSERT INTO out SELECT k, COUNT(*) AS n FROM src GROUP BY k")
    assert _message(e) == (
        "Table sink 'default_catalog.default_database.out' doesn't support consuming update"
        " changes which is produced by node"
        " GroupAggregate(groupBy=[k], select=[k, COUNT(*) AS n])"
    )


# -- the Kafka message layout ----------------------------------------------------------------


def test_upsert_layout_keys_values_and_tombstones() -> None:
    changes = [(0, ("a", 1)), (1, ("a", 1)), (2, ("a", 2)), (3, ("a", 2))]
    kept = [c for change in changes for c in DropUpdateBefore().flat_map(change)]
    records = [ToKafkaRecord([0], [0, 1], True).map(c) for c in kept]
    assert records == [(("a",), ("a", 1)), (("a",), ("a", 2)), (("a",), None)]


def test_upsert_messages_put_the_key_back_and_read_tombstones() -> None:
    keys = Columns.of([("k", DataTypes.STRING())])
    values = Columns.of([("n", DataTypes.BIGINT())])
    message = UpsertMessage(
        row_deserializer("json", keys, {}), row_deserializer("json", values, {}), [0], [1], 2
    )
    assert message.reads_message_key
    assert message.deserialize((b'{"k":"a"}', b'{"n":3}')) == (("a",), ("a", 3))
    assert message.deserialize((b'{"k":"a"}', None)) == (("a",), None)


def test_an_upsert_kafka_table_reads_as_an_updating_table() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        f"CREATE TABLE u (k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({UPSERT})"
    )
    t_env.execute_sql("CREATE TABLE p (k STRING, n BIGINT) WITH ('connector' = 'print')")
    plan = t_env.sql_query("SELECT k, n FROM u").explain()
    assert "changelogMode=[I,UB,UA,D]" in plan
    t_env.execute_sql(f"CREATE TABLE k2 (k STRING, n BIGINT) WITH ({KAFKA}, 'format' = 'json')")
    with pytest.raises(ValidationError, match="doesn't support consuming update changes"):
        t_env.execute_sql("INSERT INTO k2 SELECT k, n FROM u")


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_formats_round_trip_a_row(fmt: str) -> None:
    cols = Columns.of([("k", DataTypes.STRING()), ("n", DataTypes.BIGINT())])
    data = row_serializer(fmt, cols, {}).serialize(("a;b", 7))
    assert tuple(row_deserializer(fmt, cols, {}).deserialize(data)) == ("a;b", 7)


def test_json_ignore_parse_errors_skips_a_bad_message() -> None:
    cols = Columns.of([("n", DataTypes.BIGINT())])
    strict = row_deserializer("json", cols, {})
    lenient = row_deserializer("json", cols, {"json.ignore-parse-errors": "true"})
    with pytest.raises(ValueError):
        strict.deserialize(b"{not json")
    assert lenient.deserialize(b"{not json") is None


def test_raw_is_one_column() -> None:
    cols = Columns.of([("line", DataTypes.STRING())])
    assert row_serializer("raw", cols, {}).serialize(("héllo",)) == "héllo".encode()
    two = Columns.of([("a", DataTypes.STRING()), ("b", DataTypes.STRING())])
    with pytest.raises(ValidationError, match="single physical column"):
        row_serializer("raw", two, {})


# -- filesystem end to end -------------------------------------------------------------------


def test_filesystem_sink_then_source_round_trips_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen',"
        " 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '4000')"
    )
    t_env.execute_sql(
        f"CREATE TABLE fs (id BIGINT, sq BIGINT) WITH ('connector' = 'filesystem',"
        f" 'path' = '{out}', 'format' = 'json', 'sink.rolling-policy.file-size' = '64b')"
    )
    t_env.execute_sql("INSERT INTO fs SELECT id, id * id FROM src WHERE MOD(id, 2) = 0").wait()
    files = [p for p in out.rglob("*") if p.is_file()]
    # rolled at 64 bytes (checked once per batch of rows: 2 000 rows are several batches)
    assert len(files) > 1
    assert not [p for p in files if p.name.startswith(".")]  # all committed
    rows = sorted(json.loads(line)["id"] for p in files for line in p.read_text().splitlines())
    assert rows == list(range(2, 4001, 2))

    read = t_env.sql_query("SELECT id, sq FROM fs WHERE id > 3990")
    got = sorted((r[0], r[1]) for r in read.execute().collect())
    assert got == [(i, i * i) for i in range(3992, 4001, 2)]


def test_a_table_descriptor_declares_a_filesystem_sink_with_a_format_descriptor(
    tmp_path: Path,
) -> None:
    from cairn.table import FormatDescriptor, Schema, TableDescriptor

    out = tmp_path / "csv"
    t_env = _t_env()
    schema = Schema.new_builder().column("k", DataTypes.STRING()).column("v", DataTypes.BIGINT())
    t_env.create_temporary_table(
        "sink",
        TableDescriptor.for_connector("filesystem")
        .schema(schema.build())
        .option("path", str(out))
        .format(FormatDescriptor.for_format("csv").option("field-delimiter", "|").build())
        .build(),
    )
    rows = t_env.from_elements([("a", 1), ("b", 2)], ["k", "v"])
    rows.execute_insert("sink").wait()
    lines = sorted(line for p in out.rglob("*") if p.is_file() for line in p.read_text().split())
    assert lines == ["a|1", "b|2"]
