"""``'connector' = 'delta'``: an insert-only query appended, an updating one merged by the
primary key, required options and the changelog check at planning."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.errors import ValidationError

deltalake = pytest.importorskip("deltalake")


def _t_env(checkpoint_ms: int | None = None) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    if checkpoint_ms is not None:
        t_env.get_config().set("execution.checkpointing.interval", f"{checkpoint_ms} ms")
    return t_env


def _source(t_env: TableEnvironment, end: int) -> None:
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen',"
        f" 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{end}')"
    )


def _rows(path: Path) -> list[tuple[object, ...]]:
    t = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(*(t.column(n).to_pylist() for n in t.column_names), strict=True))


def test_an_insert_only_query_is_appended(tmp_path: Path) -> None:
    t_env = _t_env()
    _source(t_env, 3000)
    t_env.execute_sql(
        f"CREATE TABLE d (id BIGINT, sq BIGINT) WITH ('connector' = 'delta',"
        f" 'table-path' = '{tmp_path / 't'}', 'delta.targetFileSize' = '4000')"
    )
    t_env.execute_sql("INSERT INTO d SELECT id, id * id FROM src WHERE MOD(id, 3) = 0").wait()
    assert _rows(tmp_path / "t") == [(i, i * i) for i in range(3, 3001, 3)]
    table = deltalake.DeltaTable(str(tmp_path / "t"))  # the table property, honoured
    assert table.metadata().configuration == {"delta.targetFileSize": "4000"}
    assert max(table.get_add_actions(flatten=True).column("size_bytes").to_pylist()) <= 4000


def test_an_aggregate_is_merged_by_the_primary_key(tmp_path: Path) -> None:
    t_env = _t_env(checkpoint_ms=50)
    _source(t_env, 5000)
    t_env.execute_sql(
        f"CREATE TABLE d (k BIGINT, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED)"
        f" WITH ('connector' = 'delta', 'table-path' = '{tmp_path / 't'}')"
    )
    t_env.execute_sql(
        "INSERT INTO d SELECT MOD(id, 7) AS k, COUNT(*) AS n, SUM(id) AS s FROM src"
        " GROUP BY MOD(id, 7)"
    ).wait()
    want = sorted(
        (k, len(ids), sum(ids))
        for k in range(7)
        for ids in [[i for i in range(1, 5001) if i % 7 == k]]
    )
    assert _rows(tmp_path / "t") == want


def test_options_and_changelog_are_checked_at_planning(tmp_path: Path) -> None:
    t_env = _t_env()
    _source(t_env, 10)
    with pytest.raises(ValidationError, match="table-path"):
        t_env.execute_sql("CREATE TABLE d (id BIGINT) WITH ('connector' = 'delta')")
    t_env.execute_sql(
        f"CREATE TABLE a (k BIGINT, n BIGINT) WITH ('connector' = 'delta',"
        f" 'table-path' = '{tmp_path / 'a'}')"
    )
    with pytest.raises(ValidationError, match="doesn't support consuming update changes"):
        t_env.execute_sql("INSERT INTO a SELECT id, COUNT(*) FROM src GROUP BY id")
