"""Exactly-once under SIGKILL: worker processes are killed at chosen moments, several times
per run, and the committed output must equal the failure-free output line for line."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration.jobs import KILL_SCHEDULES, expected_lines, sequence_job

RECORDS, KEYS = 120_000, 20


def _run(conf: dict[str, str], out: str, **kwargs: Any) -> Any:
    env = sequence_job(conf, out, records=RECORDS, keys=KEYS, **kwargs)
    client = env.execute_async("exactly-once")
    client.get_job_execution_result(timeout=240)
    return client


@pytest.mark.spark
@pytest.mark.parametrize("schedule", sorted(KILL_SCHEDULES))
def test_sigkill_at_chosen_moments_keeps_exactly_once(
    spark: Any, tmp_path: Any, schedule: str
) -> None:
    out = str(tmp_path / "out")
    conf = {"cairn.executor": "spark", "cairn.testing.faults": KILL_SCHEDULES[schedule]}
    client = _run(conf, out)
    # Exactly the scheduled kills (no other restart) and the golden output: this proves
    # what a failure-free run on Spark would, too.
    assert client.job_master.restarts == 3, "every scheduled kill must have happened"
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == []
    assert report.bad_sums == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)


@pytest.mark.spark
def test_external_sigkill_of_a_spark_python_worker(spark: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    env = sequence_job({"cairn.executor": "spark"}, out, records=RECORDS, keys=KEYS, rate=30_000)
    client = env.execute_async("killed-from-outside")
    master = client.job_master

    def second_checkpoint_on_two_workers() -> bool:
        latest = master.coordinator.latest_completed_id() if master.coordinator else None
        return latest is not None and latest >= 2 and len(master.worker_pids) == 2

    wait_for(second_checkpoint_on_two_workers, 60, 0.05, "the job's second checkpoint")
    os.kill(master.worker_pids[1], signal.SIGKILL)
    client.get_job_execution_result(timeout=240)
    assert master.restarts >= 1
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)


@pytest.mark.spark
def test_at_least_once_loses_nothing_after_kills(spark: Any, tmp_path: Any) -> None:
    from cairn.datastream import CheckpointingMode

    out = str(tmp_path / "out")
    conf = {
        "cairn.executor": "spark",
        "cairn.testing.faults": "point=processing,attempt=0,records=20000,subtask=1;"
        "point=after-barrier,attempt=1,subtask=0",
    }
    client = _run(conf, out, mode=CheckpointingMode.AT_LEAST_ONCE)
    assert client.job_master.restarts == 2
    seen: dict[str, set[int]] = {}
    for line in read_visible_lines(out):
        key, seq, _ = line.lstrip("!").split(",")
        seen.setdefault(key, set()).add(int(seq))
    for k in range(KEYS):
        expected = set(range(1, len(range(k, RECORDS, KEYS)) + 1))
        assert seen.get(f"k{k:05d}", set()) >= expected, f"key k{k:05d} lost records"


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
def test_inprocess_crashes_keep_exactly_once(tmp_path: Any) -> None:
    """The same schedule on the in-process executor (crash = abrupt thread death)."""
    out = str(tmp_path / "out")
    conf = {
        "cairn.executor": "inprocess",
        "cairn.testing.faults": KILL_SCHEDULES["barrier-to-ack-and-commit"],
    }
    client = _run(conf, out)
    assert client.job_master.restarts == 3
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)


def _rocksdb(tmp_path: Any, incremental: bool = False) -> dict[str, str]:
    return {
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": str(incremental).lower(),
        "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
    }


def _leftover_files(directory: Any) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(directory) for f in files]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("schedule", "incremental"),
    [
        ("processing-and-upload", False),
        ("barrier-to-ack-and-commit", False),
        ("processing-and-upload", True),
        ("barrier-to-ack-and-commit", True),
    ],
)
def test_sigkill_with_the_rocksdb_backend_keeps_exactly_once(
    spark: Any, tmp_path: Any, schedule: str, incremental: bool
) -> None:
    """The RocksDB backend under the same kills, full and incremental: a worker killed while
    uploading a RocksDB checkpoint, or between barrier and acknowledgement, or between
    completion and commit; restores open the uploaded (and shared) files."""
    out = str(tmp_path / "out")
    conf = {
        "cairn.executor": "spark",
        "cairn.testing.faults": KILL_SCHEDULES[schedule],
        **_rocksdb(tmp_path, incremental),
    }
    client = _run(conf, out)
    assert client.job_master.restarts == 3, "every scheduled kill must have happened"
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)
    assert _leftover_files(tmp_path / "rocksdb") == []  # killed workers' files are removed too


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
@pytest.mark.parametrize("incremental", [False, True])
def test_inprocess_crashes_with_the_rocksdb_backend_keep_exactly_once(
    tmp_path: Any, incremental: bool
) -> None:
    out = str(tmp_path / "out")
    conf = {
        "cairn.executor": "inprocess",
        "cairn.testing.faults": KILL_SCHEDULES["processing-and-upload"],
        **_rocksdb(tmp_path, incremental),
    }
    client = _run(conf, out)
    assert client.job_master.restarts == 3
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)
    assert _leftover_files(tmp_path / "rocksdb") == []
