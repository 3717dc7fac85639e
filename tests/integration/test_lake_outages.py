"""A lakehouse table's catalog or store goes away mid-run and comes back: the job rides it out
and the table ends exactly as a fault-free run leaves it, each checkpoint one commit.

- The Iceberg SQL catalog's PostgreSQL SIGKILLed after the first snapshot and restarted on its
  data: the committer's catalog commit fails, which fails the attempt (Flink's Iceberg
  committer does the same); restores fail while the catalog is down and count against the
  restart strategy; once it is back, the restored checkpoint's files are committed once (the
  snapshot summaries say which checkpoint a table holds) and the job finishes.

The in-process executor: the faults are the servers', not the workers'.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cairn.common.restart_strategy import RestartStrategies
from cairn.testing.processes import wait_for
from tests.integration._iceberg_jobs import (
    committed_checkpoints,
    iceberg_sequence_job,
    new_table,
    table_lines,
)
from tests.integration.jobs import exactly_once_problems

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

RECORDS, KEYS = 20_000, 10


@pytest.mark.postgres
def test_the_iceberg_catalog_down_mid_run_is_ridden_out(tmp_path: Path) -> None:
    from cairn.testing.postgres import PostgresServer, postgres_bindir

    try:
        postgres_bindir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with PostgresServer() as pg:
        # The test server trades durability for speed (synchronous_commit=off: a SIGKILL
        # loses its last ~0.6 s of commits, and with them snapshots a job was told were
        # committed); the catalog's sessions ask for durable commits, as a real server gives.
        durable = "?options=-csynchronous_commit%3Don"
        catalog = {
            "type": "sql",
            "uri": pg.conninfo().replace("postgresql://", "postgresql+psycopg://", 1) + durable,
            "warehouse": str(tmp_path / "wh"),
        }
        table = new_table()
        env = iceberg_sequence_job(
            {"cairn.executor": "inprocess"}, catalog, table, records=RECORDS, keys=KEYS, rate=2_000
        )
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1_000, 200))
        client = env.execute_async("iceberg-catalog-outage")
        master = client.job_master
        wait_for(lambda: len(committed_checkpoints(catalog, table)) >= 1, 60, 0.1, "a snapshot")
        pg.kill()
        started = time.monotonic()
        wait_for(lambda: master.restarts >= 2, 60, 0.05, "restores failing on the catalog")
        pg.restart()
        lasted = time.monotonic() - started
        client.get_job_execution_result(timeout=120)
        lines = table_lines(catalog, table)
        checkpoints = committed_checkpoints(catalog, table)
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    assert len(set(checkpoints)) == len(checkpoints), "a checkpoint committed twice"
    print(f"[faults] catalog down {lasted:.1f} s: {master.restarts} restarts")
