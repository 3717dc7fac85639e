"""SQL into Delta Lake on real Spark: a retracting ``GROUP BY`` into a ``delta`` table with a
primary key (merged per checkpoint), a worker SIGKILLed after a checkpoint completed and
before its Delta commit, then right after a commit (the marker file proves both fired); the
table equals the aggregate of the input, each checkpoint one version, and Spark SQL reads
it in the job's own session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.table import StreamTableEnvironment
from tests.integration.jobs import checkpointed_env

pytest.importorskip("deltalake")
pytestmark = pytest.mark.timeout(240)

ROWS, KEYS = 20_000, 11


@pytest.mark.spark
def test_group_by_into_a_delta_table_survives_kills_around_the_commit(
    spark: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "fault-marker"
    conf = {
        "cairn.executor": "spark",
        "cairn.testing.faults": (
            f"point=before-commit,attempt=0,vertex=Committer,marker={marker};"
            f"point=after-commit,attempt=1,vertex=Committer,marker={marker}"
        ),
    }
    t_env = StreamTableEnvironment.create(
        checkpointed_env(conf, interval_ms=200, checkpoint_dir=str(tmp_path / "chk"))
    )
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '4000',"
        f" 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{ROWS}')"
    )
    path = tmp_path / "totals"
    t_env.execute_sql(
        "CREATE TABLE totals (k BIGINT, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED)"
        f" WITH ('connector' = 'delta', 'table-path' = '{path}')"
    )
    t_env.execute_sql(
        f"INSERT INTO totals SELECT MOD(id, {KEYS}) AS k, COUNT(*) AS n, SUM(id) AS s"
        f" FROM src GROUP BY MOD(id, {KEYS})"
    ).wait()
    fired = [line.split()[0] for line in marker.read_text().splitlines()]
    assert fired == ["before-commit", "after-commit"]

    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    checkpoints = [h["cairn.checkpoint"] for h in table.history() if "cairn.checkpoint" in h]
    assert len(checkpoints) == len(set(checkpoints)) and len(checkpoints) > 2
    spark.read.parquet(*table.file_uris()).createOrReplaceTempView("totals")
    got = sorted(tuple(r) for r in spark.sql("SELECT k, n, s FROM totals").collect())
    want = sorted(
        (k, len(ids), sum(ids))
        for k in range(KEYS)
        for ids in [[i for i in range(1, ROWS + 1) if i % KEYS == k]]
    )
    assert got == want
