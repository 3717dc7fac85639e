"""End-to-end exactly-once into a Delta table: workers SIGKILLed between the barrier and
the acknowledgement, between the checkpoint's completion and the Delta commit, and right
after it; the table must hold the failure-free output, each checkpoint at most one version
(the ``txn`` action makes the replayed commit a no-op), and Spark reads it back."""

from __future__ import annotations

import tempfile
from collections import Counter
from typing import Any

import pytest

from tests.integration._delta_jobs import (
    checkpoint_versions,
    delta_sequence_job,
    staged_leftovers,
    table_lines,
    unreferenced_data_files,
)
from tests.integration.jobs import GLOBAL_COMMIT_KILLS, exactly_once_problems

pytest.importorskip("deltalake")

RECORDS, KEYS = 120_000, 20  # as test_exactly_once: the kill schedules count records


def _run(conf: dict[str, str], path: str, **kwargs: Any) -> Any:
    env = delta_sequence_job(conf, path, records=RECORDS, keys=KEYS, **kwargs)
    client = env.execute_async("delta-exactly-once")
    client.get_job_execution_result(timeout=240)
    return client


def _fault_marks(marker: str) -> list[str]:
    with open(marker) as f:
        return [line.split()[0] for line in f if line.strip()]


@pytest.mark.spark
def test_sigkill_at_the_commit_phases_keeps_the_delta_table_exactly_once(spark: Any) -> None:
    path = tempfile.mkdtemp(prefix="cairn-delta-") + "/sequence"
    marker = tempfile.mktemp(prefix="cairn-delta-faults-")
    faults = ";".join(f"{spec},marker={marker}" for spec in GLOBAL_COMMIT_KILLS.split(";"))
    client = _run({"cairn.executor": "spark", "cairn.testing.faults": faults}, path)
    # Every scheduled kill landed where it aimed (and nothing else restarted the job).
    assert client.job_master.restarts == 3
    assert _fault_marks(marker) == ["after-barrier", "before-commit", "after-commit"]
    lines = table_lines(path)
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    versions = checkpoint_versions(path)
    assert versions and len(versions) == len(set(versions)), f"a checkpoint twice: {versions}"
    from deltalake import DeltaTable

    txn = DeltaTable(path).transaction_version(f"cairn-{client.get_job_id()}")
    assert txn == max(int(v) for v in versions), "the txn action records the last checkpoint"
    assert staged_leftovers(path) == []
    assert unreferenced_data_files(path) == [], "files of aborted attempts were left"

    # Spark reads the same table in the job's own session (delta-spark has no build for
    # Spark 4.3: its current files through Spark's Parquet reader).
    spark.read.parquet(*DeltaTable(path).file_uris()).createOrReplaceTempView("sequence")
    count, seqs = spark.sql("SELECT count(*), sum(seq) FROM sequence").collect()[0]
    assert count == RECORDS
    assert seqs == sum(int(line.split(",")[1]) for line in lines)


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
def test_inprocess_crashes_and_a_replayed_commit_write_each_checkpoint_once() -> None:
    path = tempfile.mkdtemp(prefix="cairn-delta-") + "/sequence"
    conf = {
        "cairn.executor": "inprocess",
        "cairn.testing.faults": GLOBAL_COMMIT_KILLS,
    }
    client = _run(conf, path)
    assert client.job_master.restarts == 3
    assert exactly_once_problems(table_lines(path), RECORDS, KEYS) == []
    versions = checkpoint_versions(path)
    assert Counter(versions).most_common(1)[0][1] == 1
    assert staged_leftovers(path) == []
