"""``CREATE TABLE t WITH (...) AS SELECT ...`` (CTAS): the table takes the query's columns
(time attributes materialized), is created, and a job inserts the query's rows into it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.sql.errors import SqlValidationError
from cairn.testing.sequence_jobs import read_visible_lines


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def test_the_table_gets_the_querys_columns_and_rows(tmp_path: Path) -> None:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT, pt AS PROCTIME()) WITH ('connector' = 'datagen',"
        " 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '40')"
    )
    result = t_env.execute_sql(
        f"CREATE TABLE evens WITH ('connector' = 'filesystem', 'path' = '{tmp_path}',"
        " 'format' = 'csv') AS SELECT id, id * 10 AS tens, pt FROM src WHERE MOD(id, 2) = 0"
    )
    result.wait()
    described = [tuple(r)[:3] for r in t_env.execute_sql("DESCRIBE evens").collect()]
    assert described == [
        ("id", "BIGINT", "TRUE"),
        ("tens", "BIGINT", "TRUE"),
        ("pt", "TIMESTAMP_LTZ(3)", "FALSE"),
    ]
    rows = sorted(
        tuple(int(v) for v in line.split(",")[:2]) for line in read_visible_lines(str(tmp_path))
    )
    assert rows == [(i, i * 10) for i in range(2, 41, 2)]
    with pytest.raises(SqlValidationError, match="Table already exists") as again:
        t_env.execute_sql(
            "CREATE TABLE evens WITH ('connector' = 'blackhole') AS SELECT id FROM src"
        )
    assert "line 1, column" in str(again.value)
    assert (
        t_env.execute_sql(
            "CREATE TABLE IF NOT EXISTS evens WITH ('connector' = 'blackhole')"
            " AS SELECT id FROM src"
        ).get_job_client()
        is None
    )
