"""A SQL job on the session's Spark standalone cluster, with checkpoints: the Table API runs
wherever a DataStream job does. The driver runs in a child process (one SparkContext per
process); its results are released to the client only with completed checkpoints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cairn.testing.processes import run_in_subprocess
from cairn.testing.spark_cluster import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(300)]

ROWS, KEYS = 4_000, 5
REPO_ROOT = Path(__file__).resolve().parents[2]


def _sql_on_cluster(master_url: str, checkpoints: str) -> tuple[dict[int, tuple[int, int]], int]:
    from cairn.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for key, value in {
        "cairn.executor": "spark",
        "cairn.spark.master": master_url,
        "parallelism.default": "2",
        "execution.checkpointing.interval": "200 ms",
        "state.checkpoints.dir": checkpoints,
    }.items():
        t_env.get_config().set(key, value)
    t_env.execute_sql(
        f"CREATE TABLE numbers (id BIGINT) WITH ('connector' = 'datagen',"
        f" 'rows-per-second' = '2000', 'fields.id.kind' = 'sequence',"
        f" 'fields.id.start' = '1', 'fields.id.end' = '{ROWS}')"
    )
    result = t_env.execute_sql(
        f"SELECT k, SUM(id) AS total, COUNT(*) AS n"
        f" FROM (SELECT MOD(id, {KEYS}) AS k, id FROM numbers) GROUP BY k"
    )
    view: dict[int, tuple[int, int]] = {}
    for row in result.collect():
        if row.get_row_kind().short_string() in ("+I", "+U"):
            view[row.k] = (row.total, row.n)
        else:
            assert view.pop(row.k) == (row.total, row.n)
    stats = result.get_job_client().get_checkpoint_statistics()
    return view, stats.counts.completed


def test_a_sql_group_by_runs_on_a_standalone_cluster_with_checkpoints(
    standalone_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    env: dict[str, Any] = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    checkpoints = (tmp_path / "chk").as_uri()
    view, completed = run_in_subprocess(
        _sql_on_cluster, standalone_cluster.master_url, checkpoints, timeout=150.0, env=env
    )
    expected: dict[int, tuple[int, int]] = {}
    for i in range(1, ROWS + 1):
        total, n = expected.get(i % KEYS, (0, 0))
        expected[i % KEYS] = (total + i, n + 1)
    assert view == expected
    assert completed >= 1, "the job completed checkpoints on the cluster"
