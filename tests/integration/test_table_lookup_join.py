"""Lookup joins against a real PostgreSQL (``'connector' = 'jdbc'``): a whole SQL job
enriching a stream, the cache's choice between fresh and cached rows as the table changes
under a running operator, and a lookup connection killed by the server taken up again."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from cairn.datastream import StreamExecutionEnvironment
from cairn.graph.transformations import OperatorKind
from cairn.table import StreamTableEnvironment
from cairn.table.analysis import Columns
from cairn.table.lookup_cache import cache_options
from cairn.table.lookup_join import LookupJoinFunction
from cairn.table.lookup_source import jdbc_lookup
from cairn.table.operators import INSERT, UPDATE_AFTER
from cairn.table.types import DataTypes
from tests.unit._operator_harness import OperatorHarness

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

_names = itertools.count()


def _customers(postgres: Any, rows: list[tuple[int, str]]) -> str:
    name = f"customers_{next(_names)}"
    with postgres.connect() as conn:
        conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, name text)")
        for row in rows:
            conn.execute(f"INSERT INTO {name} VALUES (%s, %s)", row)
    return name


def _jdbc(postgres: Any, table: str, extra: str = "") -> str:
    return (
        f"'connector' = 'jdbc', 'url' = '{postgres.jdbc_url()}', 'table-name' = '{table}',"
        f" 'username' = '{postgres.user}', 'password' = '{postgres.password}'{extra}"
    )


@pytest.mark.parametrize("join", ["JOIN", "LEFT JOIN"])
def test_a_stream_enriched_from_postgresql(postgres: Any, join: str) -> None:
    table = _customers(postgres, [(k, f"c{k}") for k in range(0, 7, 2)])
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    options = _jdbc(postgres, table, ", 'lookup.cache' = 'PARTIAL'")
    t_env.execute_sql(
        "CREATE TABLE customers (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)"
        f" WITH ({options})"
    )
    t_env.execute_sql(
        "CREATE TABLE orders (o BIGINT, pt AS PROCTIME()) WITH ('connector' = 'datagen',"
        " 'fields.o.kind' = 'sequence', 'fields.o.start' = '1', 'fields.o.end' = '40')"
    )
    result = t_env.sql_query(
        f"SELECT o, c.name FROM orders {join} customers FOR SYSTEM_TIME AS OF orders.pt AS c"
        " ON MOD(orders.o, 7) = c.id"
    )
    assert "LookupJoin(table=[default_catalog.default_database.customers]" in result.explain()
    got: Counter[tuple[Any, ...]] = Counter(tuple(r) for r in result.execute().collect())
    expected: Counter[tuple[Any, ...]] = Counter()
    for o in range(1, 41):
        if o % 7 in (0, 2, 4, 6):
            expected[(o, f"c{o % 7}")] += 1
        elif join == "LEFT JOIN":
            expected[(o, None)] += 1
    assert got == expected


def _operator(postgres: Any, table: str, options: dict[str, str]) -> OperatorHarness:
    columns = Columns.of([("id", DataTypes.BIGINT()), ("name", DataTypes.STRING())])
    lookup = jdbc_lookup(
        "customers",
        columns,
        {
            "url": postgres.jdbc_url(),
            "table-name": table,
            "username": postgres.user,
            "password": postgres.password,
            **options,
        },
    )
    function = LookupJoinFunction(
        lookup.function((0,)), (0,), 2, True, None, cache_options(options)
    )
    return OperatorHarness(function, kind=OperatorKind.FLAT_MAP, keyed=False)


def _joined(h: OperatorHarness, row: tuple[Any, ...]) -> list[Any]:
    h.batches.clear()
    h.op.process_batch([(INSERT, row)])
    return [r for r, _ in h.records()]


def test_without_a_cache_each_row_sees_the_table_as_it_is_then(postgres: Any) -> None:
    table = _customers(postgres, [(1, "before")])
    fresh = _operator(postgres, table, {})
    cached = _operator(postgres, table, {"lookup.cache": "PARTIAL"})
    assert _joined(fresh, (1,)) == [(INSERT, (1, 1, "before"))]
    assert _joined(cached, (1,)) == [(INSERT, (1, 1, "before"))]
    with postgres.connect() as conn:
        conn.execute(f"UPDATE {table} SET name = 'after' WHERE id = 1")
    assert _joined(fresh, (1,)) == [(INSERT, (1, 1, "after"))]
    assert _joined(cached, (1,)) == [(INSERT, (1, 1, "before"))]  # served from the cache
    # a missing key is cached too (cache-missing-key true): inserting it later is not seen
    assert _joined(cached, (2,)) == [(INSERT, (2, None, None))]
    with postgres.connect() as conn:
        conn.execute(f"INSERT INTO {table} VALUES (2, 'new')")
    assert _joined(cached, (2,)) == [(INSERT, (2, None, None))]
    assert _joined(fresh, (2,)) == [(INSERT, (2, 2, "new"))]
    # kinds pass through, NULL keys match nothing
    fresh.batches.clear()
    fresh.op.process_batch([(UPDATE_AFTER, (2,)), (INSERT, (None,))])
    assert [r for r, _ in fresh.records()] == [
        (UPDATE_AFTER, (2, 2, "new")),
        (INSERT, (None, None, None)),
    ]


def test_a_lookup_connection_the_server_killed_is_opened_again(postgres: Any) -> None:
    table = _customers(postgres, [(1, "one")])
    h = _operator(postgres, table, {"lookup.max-retries": "2"})
    assert _joined(h, (1,)) == [(INSERT, (1, 1, "one"))]
    with postgres.connect() as conn:
        killed = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'cairn-lookup-join'"
        ).fetchall()
    assert killed and all(ok for (ok,) in killed), "the fault landed: the lookup's session died"
    assert _joined(h, (1,)) == [(INSERT, (1, 1, "one"))]
