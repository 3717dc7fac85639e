"""Metadata columns (``METADATA [FROM 'key'] [VIRTUAL]``, ``column_by_metadata``): parsed,
printed, read through the filesystem source on the in-process executor, and refused where
Flink refuses them (an unknown key, a virtual column written)."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from cairn.table import DataTypes, EnvironmentSettings, TableEnvironment, ValidationError
from cairn.table.schema import Schema


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    return t_env


def _files(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "one.csv").write_text("a,1\nb,2\n")
    (d / "two.csv").write_text("c,3\n")
    return d


def test_ddl_metadata_columns_are_declared_with_their_keys() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE TABLE k (v STRING, `offset` BIGINT METADATA VIRTUAL,"
        " ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', part INT METADATA FROM 'partition'"
        " VIRTUAL) WITH ('connector' = 'kafka', 'topic' = 't', 'scan.startup.mode' ="
        " 'earliest-offset', 'properties.bootstrap.servers' = 'localhost:1', 'format' = 'csv')"
    )
    schema = t_env.declared_schema("k")
    assert schema is not None
    assert [(c.name, c.key, c.is_virtual) for c in schema.metadata_columns()] == [
        ("offset", "offset", True),
        ("ts", "timestamp", False),
        ("part", "partition", True),
    ]
    assert schema.physical_columns().names == ["v"]
    assert schema.persisted_columns().names == ["v", "ts"]  # what an INSERT writes
    extras = {r[0]: r[4] for r in t_env.execute_sql("DESCRIBE k").collect()}
    assert extras == {
        "v": "",
        "offset": "METADATA VIRTUAL",
        "ts": "METADATA FROM 'timestamp'",
        "part": "METADATA FROM 'partition' VIRTUAL",
    }
    # reading: the Kafka source appends them after the value's columns, in declared order
    assert t_env.from_path("k").get_schema().names == ["v", "offset", "ts", "part"]


def test_the_builder_prints_metadata_columns_as_flink() -> None:
    schema = (
        Schema.new_builder()
        .column("v", DataTypes.STRING())
        .column_by_metadata("size", DataTypes.BIGINT(), "file.size", is_virtual=True)
        .column_by_metadata("file.name", DataTypes.STRING())
        .build()
    )
    assert str(schema) == (
        "(\n  `v` STRING,\n  `size` BIGINT METADATA FROM 'file.size' VIRTUAL,\n"
        "  `file.name` STRING METADATA\n)"
    )


def test_filesystem_source_reads_each_files_metadata(tmp_path: Path) -> None:
    d = _files(tmp_path)
    t_env = _t_env()
    t_env.execute_sql(
        f"CREATE TABLE f (name STRING, v INT, path STRING METADATA FROM 'file.path' VIRTUAL,"
        f" `file.name` STRING METADATA VIRTUAL, size INT METADATA FROM 'file.size' VIRTUAL,"
        f" mtime TIMESTAMP_LTZ(3) METADATA FROM 'file.modification-time' VIRTUAL)"
        f" WITH ('connector' = 'filesystem', 'path' = '{d}', 'format' = 'csv')"
    )
    table = t_env.from_path("f")
    types = {c.name: str(c.data_type) for c in table.plan.columns.columns}
    assert types["size"] == "INT NOT NULL"  # declared INT: cast from BIGINT NOT NULL
    rows = sorted(tuple(r) for r in table.execute().collect())
    expected = []
    for name, v, file in [("a", 1, "one.csv"), ("b", 2, "one.csv"), ("c", 3, "two.csv")]:
        path = d / file
        mtime = datetime.datetime(1970, 1, 1) + datetime.timedelta(
            milliseconds=os.stat(path).st_mtime_ns // 1_000_000
        )
        expected.append((name, v, str(path), file, path.stat().st_size, mtime))
    assert rows == expected


def test_an_unknown_metadata_key_fails_with_the_keys_offered(tmp_path: Path) -> None:
    t_env = _t_env()
    with pytest.raises(ValidationError) as caught:
        t_env.execute_sql(
            f"CREATE TABLE f (v STRING, o BIGINT METADATA FROM 'offset')"
            f" WITH ('connector' = 'filesystem', 'path' = '{tmp_path}', 'format' = 'csv')"
        ).collect()
        t_env.from_path("f")
    assert str(caught.value).endswith(
        "Invalid metadata key 'offset' in column 'o' of table"
        " 'default_catalog.default_database.f'. The table source of connector 'filesystem'"
        " supports the following metadata keys for reading:\n"
        "file.modification-time\nfile.name\nfile.path\nfile.size"
    )
    with pytest.raises(ValidationError, match="Invalid metadata key 'x' in column 'x'"):
        t_env.execute_sql("CREATE TABLE g (v INT, x INT METADATA) WITH ('connector' = 'datagen')")


def test_a_virtual_column_is_not_written_and_a_read_only_key_not_writable(
    tmp_path: Path,
) -> None:
    t_env = _t_env()
    kafka = "'connector' = 'kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'h:1'"
    t_env.execute_sql(
        f"CREATE TABLE k (v STRING, o BIGINT METADATA FROM 'offset' VIRTUAL,"
        f" ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp') WITH ({kafka}, 'format' = 'csv')"
    )
    t_env.execute_sql("CREATE TABLE s (v STRING, n BIGINT) WITH ('connector' = 'datagen')")
    with pytest.raises(ValidationError) as caught:  # a value for the virtual `o`: one too many
        t_env.execute_sql("INSERT INTO k SELECT v, n, CAST(NULL AS TIMESTAMP_LTZ(3)) FROM s")
    message = str(caught.value)
    assert "Sink schema:  [v: STRING, ts: TIMESTAMP_LTZ(3)]" in message
    assert "virtual metadata columns are not written: o" in message
    t_env.execute_sql(
        f"CREATE TABLE w (v STRING, o BIGINT METADATA FROM 'offset') WITH ({kafka},"
        " 'format' = 'csv')"
    )
    with pytest.raises(ValidationError) as caught:  # `offset` is read-only: declare it VIRTUAL
        t_env.execute_sql("INSERT INTO w SELECT v, n FROM s")
    assert "The table sink of connector 'kafka' supports the following metadata keys for" in str(
        caught.value
    )
    assert str(caught.value).endswith("writing:\ntimestamp")
