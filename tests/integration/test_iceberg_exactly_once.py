"""End-to-end exactly-once into Apache Iceberg tables: workers SIGKILLed at the commit
phases (between barrier and acknowledgement, after the checkpoint completed and before the
committer's catalog commit, right after it), and the table must hold the failure-free
output, with no checkpoint committed as two snapshots. Catalogs: pyiceberg's SQL catalog on
SQLite (warehouse on local files) and on PostgreSQL (warehouse on S3, SeaweedFS), and a REST
catalog (Apache Iceberg's own REST fixture server, warehouse on local files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration._iceberg_jobs import (
    committed_checkpoints,
    iceberg_sequence_job,
    load,
    new_table,
    sqlite_catalog,
    table_lines,
)
from tests.integration.jobs import exactly_once_problems

RECORDS, KEYS = 120_000, 20
REST_RECORDS = 40_000

# The committer is one subtask of its own vertex ("...: Committer"): kill it just before
# and just after its catalog commit, and a writer between its barrier and acknowledgement.
COMMIT_PHASES = (
    "point=after-barrier,attempt=0,subtask=1;"
    "point=before-commit,attempt=1,vertex=Committer;"
    "point=after-commit,attempt=2,vertex=Committer"
)


def _check(catalog: dict[str, str], table: str) -> None:
    assert exactly_once_problems(table_lines(catalog, table), RECORDS, KEYS) == []
    checkpoints = committed_checkpoints(catalog, table)
    assert checkpoints and all(job and cid for job, cid in checkpoints)
    assert len(set(checkpoints)) == len(checkpoints), "a checkpoint committed twice"


@pytest.mark.spark
def test_sigkill_at_the_commit_phases_keeps_the_table_exactly_once(
    spark: Any, tmp_path: Path
) -> None:
    catalog, table = sqlite_catalog(str(tmp_path)), new_table()
    conf = {"cairn.executor": "spark", "cairn.testing.faults": COMMIT_PHASES}
    client = iceberg_sequence_job(conf, catalog, table, records=RECORDS, keys=KEYS).execute_async(
        "iceberg-exactly-once"
    )
    client.get_job_execution_result(timeout=240)
    assert client.job_master.restarts == 3, "every scheduled kill must have happened"
    _check(catalog, table)
    # Read back in the job's Spark session: Iceberg's Spark runtimes (4.0, 4.1) do not load on
    # Spark 4.3, so Spark's Parquet reader reads the current snapshot's files (append only).
    files = [t.file.file_path for t in load(catalog, table).scan().plan_files()]
    spark.read.parquet(*files).createOrReplaceTempView("iceberg_out")
    got = spark.sql("SELECT count(*), count(DISTINCT k, seq), max(total) FROM iceberg_out")
    per_key = RECORDS // KEYS
    assert tuple(got.collect()[0]) == (RECORDS, RECORDS, per_key * (per_key + 1) // 2)


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_postgres_catalog_and_s3_warehouse_with_crashes(postgres: Any, seaweed: Any) -> None:
    """The same schedule on the in-process executor (crash = abrupt thread death), with the
    catalog in PostgreSQL and the data and metadata files on S3."""
    s3 = seaweed.flink_config()
    catalog = {
        "type": "sql",
        "uri": postgres.conninfo().replace("postgresql://", "postgresql+psycopg://", 1),
        "warehouse": seaweed.url("iceberg"),
        "s3.endpoint": s3["s3.endpoint"],
        "s3.access-key-id": s3["s3.access-key"],
        "s3.secret-access-key": s3["s3.secret-key"],
        "s3.region": "us-east-1",
    }
    table = new_table()
    conf = {"cairn.executor": "inprocess", "cairn.testing.faults": COMMIT_PHASES}
    client = iceberg_sequence_job(conf, catalog, table, records=RECORDS, keys=KEYS).execute_async(
        "iceberg-pg-s3"
    )
    client.get_job_execution_result(timeout=240)
    assert client.job_master.restarts == 3
    _check(catalog, table)


@pytest.mark.slow
@pytest.mark.iceberg_rest
@pytest.mark.timeout(120)
def test_rest_catalog_with_crashes(iceberg_rest: Any) -> None:
    """The same schedule on the in-process executor against Iceberg's REST catalog server:
    every commit goes through the REST protocol, the files' locations are the Java catalog's
    (``file:/...``), and the leftovers of the crashed attempts are cleaned, not the table."""
    catalog, table = iceberg_rest.catalog_properties(), new_table()
    conf = {"cairn.executor": "inprocess", "cairn.testing.faults": COMMIT_PHASES}
    client = iceberg_sequence_job(
        conf, catalog, table, records=REST_RECORDS, keys=KEYS
    ).execute_async("iceberg-rest")
    client.get_job_execution_result(timeout=100)
    assert client.job_master.restarts == 3
    assert exactly_once_problems(table_lines(catalog, table), REST_RECORDS, KEYS) == []
    checkpoints = committed_checkpoints(catalog, table)
    assert checkpoints and all(job and cid for job, cid in checkpoints)
    assert len(set(checkpoints)) == len(checkpoints), "a checkpoint committed twice"
    # Every committed file is still there (a cleanup that misread ``file:/`` would delete them).
    referenced = [t.file.file_path for t in load(catalog, table).scan().plan_files()]
    assert referenced and all(Path(p.removeprefix("file:")).exists() for p in referenced)
