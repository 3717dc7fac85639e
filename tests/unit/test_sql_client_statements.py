"""The SQL client's statements and ``WITH``, on the in-process executor: each gives Flink's
rows (``SHOW``, ``EXPLAIN``, ``SET``/``RESET``), changes what Flink changes (``USE``,
``RESET``, ``CREATE TABLE ... LIKE``/``AS SELECT``), and refuses what Cairn lacks naming the
place in the statement."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.sql.errors import SqlValidationError

SRC = (
    "CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3),"
    " WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
    " WITH ('connector' = 'datagen', 'number-of-rows' = '5', 'fields.v.kind' = 'sequence',"
    " 'fields.v.start' = '1', 'fields.v.end' = '5', 'fields.k.length' = '1')"
)


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    t_env.execute_sql(SRC)
    return t_env


def _rows(t_env: TableEnvironment, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in t_env.execute_sql(sql).collect()]


# -- WITH -------------------------------------------------------------------------------------


def test_ctes_see_the_ones_before_them_and_rename_their_columns() -> None:
    t_env = _t_env()
    rows = _rows(
        t_env,
        "WITH a (n) AS (SELECT v FROM src WHERE v > 2),"
        " b AS (SELECT n * 10 AS m FROM a)"
        " SELECT m FROM b UNION ALL SELECT n FROM a",
    )
    assert sorted(rows) == [(3,), (4,), (5,), (30,), (40,), (50,)]


def test_a_cte_hides_a_table_of_its_name_and_is_gone_after_the_query() -> None:
    t_env = _t_env()
    assert _rows(t_env, "WITH src AS (SELECT 7 AS x) SELECT * FROM src") == [(7,)]
    assert t_env.list_tables() == ["src"]
    assert len(_rows(t_env, "SELECT * FROM src")) == 5


def test_with_in_a_view_a_subquery_and_an_insert() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE VIEW big AS WITH b AS (SELECT k, v FROM src WHERE v >= 4) SELECT v FROM b"
    )
    nested = "SELECT * FROM (WITH c AS (SELECT v FROM big) SELECT v FROM c)"
    assert sorted(_rows(t_env, nested)) == [(4,), (5,)]
    t_env.execute_sql("CREATE TABLE out1 (v BIGINT) WITH ('connector' = 'blackhole')")
    t_env.execute_sql("INSERT INTO out1 WITH d AS (SELECT v FROM src) SELECT v FROM d").wait()


@pytest.mark.parametrize(
    ("sql", "message", "column"),
    [
        ("WITH a AS (SELECT 1 AS x) SELECT * FROM b", "Object 'b' not found", 41),
        ("WITH a AS (SELECT 1 AS x), a AS (SELECT 2 AS y) SELECT * FROM a", "Duplicate name", 28),
        ("WITH a (p, q) AS (SELECT 1 AS x) SELECT * FROM a", "same degree as table", 6),
        ("WITH a AS (SELECT * FROM b) SELECT 1", "Object 'b' not found", 26),
    ],
)
def test_with_errors_name_their_place(sql: str, message: str, column: int) -> None:
    with pytest.raises(SqlValidationError, match=message) as caught:
        _t_env().sql_query(sql)
    assert (caught.value.line, caught.value.column) == (1, column)


def test_with_before_insert_is_refused_at_with() -> None:
    t_env = _t_env()
    t_env.execute_sql("CREATE TABLE out1 (v BIGINT) WITH ('connector' = 'blackhole')")
    with pytest.raises(SqlValidationError, match="WITH comes after INSERT INTO t") as caught:
        t_env.execute_sql("WITH d AS (SELECT v FROM src) INSERT INTO out1 SELECT v FROM d")
    assert (caught.value.line, caught.value.column) == (1, 1)
