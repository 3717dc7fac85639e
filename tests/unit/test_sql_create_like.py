"""``CREATE TABLE ... LIKE base (...)``: Flink's merging of columns, computed and metadata
columns, watermarks, primary keys and options, with Flink's messages for conflicts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.sql.errors import SqlValidationError

BASE = (
    "CREATE TABLE base (k STRING, v BIGINT, ts TIMESTAMP(3), d AS v * 2,"
    " WATERMARK FOR ts AS ts - INTERVAL '1' SECOND, PRIMARY KEY (k) NOT ENFORCED)"
    " WITH ('connector' = 'datagen', 'number-of-rows' = '5', 'fields.k.length' = '3')"
)


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    t_env.execute_sql(BASE)
    return t_env


def _describe(t_env: TableEnvironment, name: str) -> list[tuple[str, ...]]:
    return [tuple(str(x) for x in r) for r in t_env.execute_sql(f"DESCRIBE {name}").collect()]


def test_the_default_includes_all_and_overwrites_options() -> None:
    t_env = _t_env()
    t_env.execute_sql("CREATE TABLE t2 (e AS v + 1) WITH ('number-of-rows' = '3') LIKE base")
    names = [r[0] for r in _describe(t_env, "t2")]
    assert names == ["k", "v", "ts", "d", "e"]
    described = {r[0]: r for r in _describe(t_env, "t2")}
    assert described["k"][3].startswith("PRI") and "SOURCE_WATERMARK" not in described["ts"][5]
    assert "ts - INTERVAL '1' SECOND" in described["ts"][5]
    rows = list(t_env.execute_sql("SELECT k, d, e FROM t2").collect())
    assert len(rows) == 3  # the overwritten option
    assert all(r[1] is None or r[2] == r[1] // 2 + 1 for r in rows)


def test_excluding_drops_the_bases_part_and_overwriting_lets_the_new_one_win() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE TABLE t3 WITH ('connector' = 'blackhole') LIKE base"
        " (EXCLUDING OPTIONS EXCLUDING GENERATED EXCLUDING WATERMARKS EXCLUDING CONSTRAINTS)"
    )
    described = _describe(t_env, "t3")
    assert [r[0] for r in described] == ["k", "v", "ts"]
    assert all(r[3] in ("", "None") and r[5] in ("", "None") for r in described)
    t_env.execute_sql(
        "CREATE TABLE t4 (WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) LIKE base"
        " (OVERWRITING WATERMARKS)"
    )
    assert "INTERVAL '5' SECOND" in {r[0]: r for r in _describe(t_env, "t4")}["ts"][5]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "CREATE TABLE x (WATERMARK FOR ts AS ts) LIKE base",
            "There already exists a watermark spec for column 'ts'",
        ),
        (
            "CREATE TABLE x WITH ('number-of-rows' = '3') LIKE base (INCLUDING OPTIONS)",
            "There already exists an option ['number-of-rows' -> '5']",
        ),
        ("CREATE TABLE x (v INT) LIKE base", "A column named 'v' already exists"),
        ("CREATE TABLE x LIKE nowhere", "Source table 'nowhere' of the LIKE clause not found"),
        ("CREATE TABLE x LIKE base (OVERWRITING ALL)", "OVERWRITING ALL is not allowed"),
    ],
)
def test_conflicts_are_refused_with_flinks_words_and_a_position(sql: str, message: str) -> None:
    t_env = _t_env()
    with pytest.raises(SqlValidationError) as refused:
        t_env.execute_sql(sql)
    assert message in str(refused.value) and "line 1, column" in str(refused.value)
