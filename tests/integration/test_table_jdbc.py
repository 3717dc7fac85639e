"""The ``jdbc`` table sink into a real PostgreSQL, on Spark with a worker SIGKILLed mid-run.

A retracting ``GROUP BY`` (and a second level that retracts groups to zero, so the sink
deletes rows) is written with a primary key: upserts ``INSERT ... ON CONFLICT DO UPDATE`` and
deletes, at least once as Flink's JDBC sink, idempotent per key. After the kill (its marker
file proves it fired) and the restore, the tables hold exactly the batch aggregation.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairn.table import StreamTableEnvironment
from tests.integration.jobs import checkpointed_env

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.timeout(240)]

RECORDS, KEYS = 6_000, 7
_names = itertools.count()


@pytest.mark.spark
def test_a_group_by_upserted_into_postgresql_survives_a_killed_worker(
    spark: Any, postgres: Any, tmp_path: Path
) -> None:
    n = next(_names)
    totals, counts = f"table_totals_{n}", f"table_counts_{n}"
    with postgres.connect() as conn:
        conn.execute(f"CREATE TABLE {totals} (k text PRIMARY KEY, total bigint, n bigint)")
        conn.execute(f"CREATE TABLE {counts} (n bigint PRIMARY KEY, keys bigint)")
    marker = tmp_path / "fault-marker"
    conf = {
        "cairn.executor": "spark",
        "cairn.testing.faults": (
            f"point=processing,attempt=0,records={RECORDS // 3},subtask=1,marker={marker}"
        ),
    }
    env = checkpointed_env(conf, interval_ms=200, checkpoint_dir=str(tmp_path / "chk"))
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '4000',"
        f" 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{RECORDS}')"
    )
    jdbc = (
        f"'connector' = 'jdbc', 'url' = '{postgres.jdbc_url()}', 'username' = '{postgres.user}',"
        f" 'password' = '{postgres.password}', 'sink.buffer-flush.max-rows' = '200',"
        " 'sink.buffer-flush.interval' = '100 ms'"
    )
    t_env.execute_sql(
        "CREATE TABLE totals (k STRING, total BIGINT, n BIGINT, PRIMARY KEY (k) NOT ENFORCED)"
        f" WITH ({jdbc}, 'table-name' = '{totals}')"
    )
    t_env.execute_sql(
        "CREATE TABLE counts (n BIGINT, keys BIGINT, PRIMARY KEY (n) NOT ENFORCED)"
        f" WITH ({jdbc}, 'table-name' = '{counts}')"
    )
    t_env.execute_sql(
        "CREATE TEMPORARY VIEW keyed AS SELECT CONCAT('k', CAST(MOD(id, 7) AS STRING)) AS k, id"
        " FROM src"
    )
    statements = t_env.create_statement_set()
    statements.add_insert_sql(
        "INSERT INTO totals SELECT k, SUM(id) AS total, COUNT(*) AS n FROM keyed GROUP BY k"
    )
    statements.add_insert_sql(
        "INSERT INTO counts SELECT n, COUNT(*) AS keys FROM"
        " (SELECT k, COUNT(*) AS n FROM keyed GROUP BY k) GROUP BY n"
    )
    statements.execute().wait(timeout_ms=200_000)
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"

    expected: dict[str, tuple[int, int]] = {}
    for i in range(1, RECORDS + 1):
        k = f"k{i % KEYS}"
        total, count = expected.get(k, (0, 0))
        expected[k] = (total + i, count + 1)
    with postgres.connect() as conn:
        got = {k: (t, c) for k, t, c in conn.execute(f"SELECT k, total, n FROM {totals}")}
        got_counts = dict(conn.execute(f"SELECT n, keys FROM {counts}").fetchall())
    assert got == expected
    assert got_counts == dict(Counter(c for _, c in expected.values()))
