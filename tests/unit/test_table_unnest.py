"""``CROSS JOIN UNNEST``: arrays, maps, rows of an array, ``WITH ORDINALITY``, ``LEFT JOIN
... ON TRUE`` keeping a row without elements, and the refusals at their positions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.sql.errors import SqlValidationError

ROWS = [("a", 2), ("b", 0), ("c", 3)]


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    values = ", ".join(f"('{k}', {n})" for k, n in ROWS)
    t_env.execute_sql(f"CREATE VIEW v AS SELECT * FROM (VALUES {values}) AS x(k, n)")
    return t_env


def _rows(t_env: TableEnvironment, sql: str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in t_env.execute_sql(sql).collect())


def test_arrays_maps_and_positions() -> None:
    t_env = _t_env()
    arrays = "(SELECT k, ARRAY[n, n * 10] AS arr FROM v)"
    got = _rows(t_env, f"SELECT k, x FROM {arrays} CROSS JOIN UNNEST(arr) AS t(x)")
    assert got == Counter((k, x) for k, n in ROWS for x in (n, n * 10))
    numbered = _rows(
        t_env, f"SELECT k, x, o FROM {arrays} CROSS JOIN UNNEST(arr) WITH ORDINALITY AS t(x, o)"
    )
    assert numbered == Counter((k, x, i) for k, n in ROWS for i, x in ((1, n), (2, n * 10)))
    maps = _rows(
        t_env,
        "SELECT k, mk, mv FROM (SELECT k, MAP['x', n, 'y', n + 1] AS m FROM v)"
        " CROSS JOIN UNNEST(m) AS t(mk, mv)",
    )
    assert maps == Counter(
        (k, key, value) for k, n in ROWS for key, value in (("x", n), ("y", n + 1))
    )


def test_left_join_keeps_a_row_without_elements_and_cross_join_drops_it() -> None:
    t_env = _t_env()
    arrays = (
        "(SELECT k, CASE WHEN n = 0 THEN CAST(NULL AS ARRAY<INT>) ELSE ARRAY[n] END AS arr"
        " FROM v) s"
    )
    kept = _rows(t_env, f"SELECT k, x FROM {arrays} LEFT JOIN UNNEST(s.arr) AS t(x) ON TRUE")
    assert kept == Counter([("a", 2), ("b", None), ("c", 3)])
    dropped = _rows(t_env, f"SELECT k, x FROM {arrays} CROSS JOIN UNNEST(s.arr) AS t(x)")
    assert dropped == Counter([("a", 2), ("c", 3)])


def test_what_unnest_refuses_names_its_place() -> None:
    t_env = _t_env()
    with pytest.raises(SqlValidationError, match="UNNEST takes an ARRAY, a MAP or a MULTISET"):
        t_env.sql_query("SELECT k, x FROM v CROSS JOIN UNNEST(n) AS t(x)")
    with pytest.raises(SqlValidationError, match="the alias names 2") as wrong:
        t_env.sql_query(
            "SELECT * FROM (SELECT k, ARRAY[n] AS arr FROM v) CROSS JOIN UNNEST(arr) AS t(x, y)"
        )
    assert "line 1, column" in str(wrong.value)
