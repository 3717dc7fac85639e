"""Savepoints of running jobs on real local Spark, controlled from another process.

The job runs in one process (``cairn run`` of ``savepoint_job.py``); the CLI in others:
``cairn list`` finds it, ``cairn savepoint`` takes one while records flow, ``cairn stop
--savepoint-path`` ends it; the savepoint is moved and restored at parallelism 3 (was 2) into
an upgraded job (an added stateless operator), which is stopped with a savepoint again and
restored at parallelism 1 (``--from-checkpoint``, the old spelling of ``-s``). Across the
three runs every key's sequence continues with no gap and no repeat, and the exactly-once
file sink holds the golden output. Bad input on the way (an existing target, an unknown or
finished job, a savepoint whose operator uid the new job lacks, a disposed savepoint) is one
line each, and the running job goes on. A savepoint under backpressure with unaligned
checkpoints on is aligned and has no in-flight data. ``cairn stop --drain`` of an event-time
window job fires every open window into the savepoint: each window's result exactly once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.storage import load_checkpoint
from cairn.common.job_status import JobStatus
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration._readme import (
    CANCEL,
    DISPOSE,
    LIST,
    RUN_SAVEPOINT,
    SAVEPOINT,
    STOP,
    STOP_DRAIN,
    cairn_argv,
    readme_line,
    subprocess_env,
)
from tests.integration.event_time_jobs import expected_windows, windows_of_prefixes
from tests.integration.jobs import backpressured_job, expected_lines, sequence_job
from tests.integration.waits import committed_lines

SCRIPT = str(Path(__file__).with_name("savepoint_job.py"))
DRAIN_SCRIPT = str(Path(__file__).with_name("drain_job.py"))
REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDS, KEYS = 300_000, 100
RATE = 15_000  # records/s: the first two runs stop long before the end


def cairn_cmd() -> list[str]:
    script = Path(sys.executable).with_name("cairn")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cairn.cli.main"]


def cairn(env: dict[str, str], *args: str | Path, timeout: float = 300) -> Any:
    return subprocess.run(
        [*cairn_cmd(), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def readme(env: dict[str, str], line: str, timeout: float = 300, **placeholders: str) -> Any:
    """README.md's ``line``, as written, with its placeholders substituted."""
    argv = cairn_argv(readme_line(line), **placeholders)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def start_job(env: dict[str, str], log: Path, *args: str | Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as f:
        return subprocess.Popen(
            [*cairn_cmd(), "run", *map(str, args)], env=env, stdout=f, stderr=subprocess.STDOUT
        )


def listed_job(
    env: dict[str, str],
    exclude: set[str],
    job: subprocess.Popen[bytes],
    log: Path,
    name: str = "savepoint-job",
) -> str:
    """The id of the RUNNING job ``name`` `cairn list` shows that is not in ``exclude``."""

    def listed() -> str | None:
        assert job.poll() is None, log.read_text()
        listing = readme(env, LIST, timeout=30)
        assert listing.returncode == 0, listing.stderr
        rows = re.findall(rf" : ([0-9a-f]{{32}}) : {name} \(RUNNING\) .*http", listing.stdout)
        return next((jid for jid in rows if jid not in exclude), None)

    return wait_for(
        listed, 180, 0.5, lambda: f"the job listed as RUNNING; its log:\n{log.read_text()}"
    )


def wait_for_lines(out: Path, more_than: int, job: subprocess.Popen[bytes], log: Path) -> int:
    """The number of committed lines under ``out`` once there are more than ``more_than``;
    fails at once if the job's process ends first."""

    def beyond() -> int:
        assert job.poll() is None, log.read_text()
        n = len(read_visible_lines(str(out))) if out.exists() else 0
        return n if n > more_than else 0

    return wait_for(
        beyond, 120, 0.3, lambda: f"output beyond {more_than} lines; log:\n{log.read_text()}"
    )


def one_line_error(result: Any, command: str, *fragments: str) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"cairn {command}: "), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in last, result.stderr
    return last


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_savepoint_stop_rescale_and_upgrade_from_another_process(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path)
    out, chk = tmp_path / "out", tmp_path / "checkpoints"
    job_args = [SCRIPT, out, chk, RECORDS, KEYS]
    savepoints = tmp_path / "savepoints"
    sp1, sp2 = savepoints / "before-upgrade", savepoints / "v1"

    # Run 1, parallelism 2: a savepoint while records flow, then stop with a savepoint.
    log1 = tmp_path / "run1.log"
    job = start_job(env, log1, "-p", "2", *job_args, RATE)
    try:
        jid = listed_job(env, set(), job, log1)
        seen = wait_for_lines(out, 0, job, log1)
        taken = readme(env, SAVEPOINT, **{"<job-id>": jid, "/tmp/savepoints": str(savepoints)})
        assert taken.returncode == 0, taken.stderr
        assert taken.stdout.strip() == f"Savepoint completed. Path: {sp1}"
        assert (sp1 / "_metadata").exists()
        wait_for_lines(out, seen, job, log1)  # records flow on

        one_line_error(
            cairn(env, "savepoint", jid, sp1),
            "savepoint",
            "savepoint failed",
            "already contains a savepoint",
        )
        one_line_error(
            cairn(env, "savepoint", "f" * 32, tmp_path / "sp-x"),
            "savepoint",
            f"no running job {'f' * 32}",
            jid,
        )
        one_line_error(cairn(env, "cancel", "f" * 32), "cancel", "no running job")
        assert job.poll() is None, "the job must not be affected by bad requests"

        stopped = readme(env, STOP, **{"<job-id>": jid, "/tmp/savepoints": str(savepoints)})
        assert stopped.returncode == 0, stopped.stderr
        assert f"Savepoint completed. Path: {sp2}" in stopped.stdout
        assert job.wait(timeout=120) == 0, log1.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    assert f"Job {jid} FINISHED." in stopped.stdout
    first_run = len(read_visible_lines(str(out)))
    assert 0 < first_run < RECORDS
    one_line_error(
        cairn(env, "savepoint", jid, tmp_path / "sp3"), "savepoint", f"no running job {jid}"
    )
    assert not (tmp_path / "sp3").exists()

    # The savepoint is self-contained: move it and restore from the new place.
    moved = tmp_path / "elsewhere" / "before-upgrade"
    moved.parent.mkdir()
    shutil.move(str(sp2), moved)

    # The operator that owns keyed state is gone (its uid changed): refused, naming it.
    refused = cairn(
        env,
        "run",
        "-p",
        "3",
        "-s",
        moved,
        *job_args,
        RATE,
        "--upgraded",
        "--check-uid",
        "renamed-check",
    )
    one_line_error(refused, "run", "'sequence-check'", "--allow-non-restored-state")
    assert len(read_visible_lines(str(out))) == first_run

    # Run 2: the upgraded job (an added stateless operator) at parallelism 3, then stopped.
    log2 = tmp_path / "run2.log"
    upgraded = " ".join(map(str, [*job_args, RATE, "--upgraded"]))
    argv = cairn_argv(
        readme_line(RUN_SAVEPOINT), **{"/tmp/savepoints/v1": str(moved), "job.py": upgraded}
    )
    assert argv[1:4] == ["run", "-p", "3"]
    job = start_job(env, log2, *argv[2:])
    try:
        # Same job name and storage: the same job id (the run before ended FINISHED, so the
        # RUNNING row is this run's).
        jid2 = listed_job(env, set(), job, log2)
        assert jid2 == jid
        wait_for_lines(out, first_run + 1000, job, log2)
        stopped = cairn(env, "stop", "--savepoint-path", tmp_path / "sp4", jid2)
        assert stopped.returncode == 0, stopped.stderr
        assert job.wait(timeout=120) == 0, log2.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    second_run = len(read_visible_lines(str(out)))
    assert first_run < second_run < RECORDS

    # Run 3 at parallelism 1, unthrottled, to the end (the old spelling of -s).
    done = cairn(
        env,
        "run",
        "-p",
        "1",
        "--from-checkpoint",
        tmp_path / "sp4",
        *job_args,
        0,
        "--upgraded",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    lines = read_visible_lines(str(out))
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == [] and report.duplicates == {}
    assert sorted(lines) == expected_lines(RECORDS, KEYS)

    # Disposed: gone, and a restore from it is one clear line.
    disposed = readme(env, DISPOSE, **{"/tmp/savepoints": str(savepoints)})
    assert disposed.returncode == 0 and not sp1.exists(), disposed.stderr
    assert disposed.stdout.strip() == f"Savepoint '{sp1}' disposed."
    one_line_error(cairn(env, "savepoint", "--dispose", sp1), "savepoint", "no such savepoint")
    one_line_error(cairn(env, "run", "-s", sp1, *job_args, 0), "run", str(sp1))
    one_line_error(cairn(env, "savepoint", "--dispose", chk), "savepoint", "not a savepoint")


@pytest.mark.timeout(300)
def test_cancel_from_another_process(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path)
    log = tmp_path / "run.log"
    job = start_job(
        env,
        log,
        "--executor",
        "inprocess",
        SCRIPT,
        tmp_path / "out",
        tmp_path / "checkpoints",
        10_000_000,
        KEYS,
        5_000,
    )
    try:
        jid = listed_job(env, set(), job, log)
        cancelled = readme(env, CANCEL, **{"<job-id>": jid})
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == f"Cancelled job {jid}."
        assert job.wait(timeout=60) == 0, log.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    listing = readme(env, LIST)
    assert listing.stdout.strip() == "No running jobs.", listing.stdout
    one_line_error(readme(env, CANCEL, **{"<job-id>": jid}), "cancel", f"no running job {jid}")


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_stop_with_drain_from_another_process_fires_every_window_exactly_once(
    tmp_path: Path,
) -> None:
    """Flink's ``stop --drain`` on real local Spark: the sources send the final watermark
    ahead of the savepoint's barrier, so every window open at the stop fires, the exactly-once
    file sink commits all of them with the savepoint, and the job ends FINISHED. The output is
    the golden one of exactly the records the sources read: every window once, whole."""
    env = subprocess_env(tmp_path)  # the workers import the job's classes from the repository
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env["PYTHONPATH"]])
    out, log = tmp_path / "out", tmp_path / "run.log"
    records, keys = 300_000, 10  # 10,000 records/s: the stop comes long before the end
    job = start_job(env, log, DRAIN_SCRIPT, out, records, keys, 10_000)
    try:
        jid = listed_job(env, set(), job, log, name="drain-job")
        wait_for_lines(out / "windows", 0, job, log)
        savepoints = tmp_path / "savepoints"
        stopped = readme(env, STOP_DRAIN, **{"<job-id>": jid, "/tmp/savepoints": str(savepoints)})
        assert stopped.returncode == 0, stopped.stderr
        assert job.wait(timeout=120) == 0, log.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    assert f'Draining job "{jid}" with a savepoint.' in stopped.stderr
    assert f"Savepoint completed. Path: {savepoints / 'final'}" in stopped.stdout
    assert f"Job {jid} FINISHED." in stopped.stdout
    assert (savepoints / "final" / "_metadata").exists()
    lines = read_visible_lines(str(out / "windows"))
    assert len(lines) == len(set(lines)), "a window's result is in the output twice"
    assert len(lines) < len(expected_windows(records, keys)), "stopped before the end"
    assert sorted(lines) == windows_of_prefixes(lines, keys)
    assert read_visible_lines(str(out / "late")) == []


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_savepoint_under_backpressure_with_unaligned_checkpoints_is_aligned(
    spark: Any, tmp_path: Path
) -> None:
    conf = {"cairn.executor": "spark", "execution.checkpointing.dir": f"file://{tmp_path}/chk"}
    env = backpressured_job(
        conf,
        str(tmp_path / "out"),
        records=50_000_000,
        keys=10,
        cost_us=300,
        checkpointing="unaligned",
        interval_ms=200,
    )
    client = env.execute_async("backpressured")
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 180)

        def with_in_flight_data() -> bool:  # backpressured: unaligned checkpoints persist it
            stats = client.get_checkpoint_statistics()
            latest = None if stats is None else stats.latest_completed
            return latest is not None and latest.unaligned and latest.persisted_bytes > 0

        wait_for(with_in_flight_data, 120, 0.1, "an unaligned checkpoint with in-flight data")
        path = client.trigger_savepoint(str(tmp_path / "sp")).result(timeout=300)
        savepoint = load_checkpoint(path)
        assert savepoint.metadata.is_savepoint
        states = [s for op in savepoint.metadata.operators.values() for s in op.subtasks.values()]
        assert states and all(s.input_channels is None for s in states), "in-flight data"
        stats = client.get_checkpoint_statistics()
        assert stats is not None
        [entry] = [c for c in stats.history if c.is_savepoint]
        assert not entry.unaligned and entry.persisted_bytes == 0
        assert entry.path == path
        after = entry.checkpoint_id

        def unaligned_after_it() -> bool:  # unaligned checkpoints go on after the savepoint
            latest = client.get_checkpoint_statistics().latest_completed  # type: ignore[union-attr]
            return latest is not None and latest.checkpoint_id > after and latest.unaligned

        wait_for(unaligned_after_it, 240, 0.1, "an unaligned checkpoint after the savepoint")
        assert client.get_job_status() is JobStatus.RUNNING
    finally:
        client.cancel()
        client.wait_for_status(JobStatus.CANCELED, 120)
    assert os.path.exists(os.path.join(path, "_metadata"))


@pytest.mark.timeout(300)
def test_job_client_savepoints_and_restore_through_the_configuration(tmp_path: Path) -> None:
    """PyFlink's way: ``trigger_savepoint`` and ``stop_with_savepoint`` futures on the client,
    then ``execution.savepoint.path`` in the Configuration of the next job."""
    from cairn.checkpoint.errors import SavepointRejectedError

    out, records = str(tmp_path / "out"), 60_000
    conf = {"cairn.executor": "inprocess"}
    client = sequence_job(
        conf, out, records=records, keys=KEYS, rate=10_000, checkpoint_dir=str(tmp_path / "chk")
    ).execute_async("client-1")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    committed_lines(out)
    with pytest.raises(SavepointRejectedError, match="no target directory given"):
        client.trigger_savepoint().result(timeout=60)
    assert client.trigger_savepoint(str(tmp_path / "sp")).result(timeout=60) == str(tmp_path / "sp")
    stopped = client.stop_with_savepoint(False, str(tmp_path / "stop")).result(timeout=120)
    assert stopped == str(tmp_path / "stop")
    assert client.get_job_status() is JobStatus.FINISHED
    with pytest.raises(SavepointRejectedError, match="is FINISHED, not RUNNING"):
        client.trigger_savepoint(str(tmp_path / "late")).result(timeout=10)
    first = len(read_visible_lines(out))
    assert 0 < first < records

    restored = {**conf, "execution.savepoint.path": stopped}
    sequence_job(
        restored,
        out,
        records=records,
        keys=KEYS,
        rate=None,
        parallelism=3,
        checkpoint_dir=str(tmp_path / "chk"),
    ).execute("client-2")
    lines = read_visible_lines(out)
    assert check_sequence_lines(lines).violations == []
    assert sorted(lines) == expected_lines(records, KEYS)

    # Into a job whose check has another uid: allowed with -n, the check's state is dropped
    # (its sequences restart where the source resumes: violations prove nothing was restored).
    other = tmp_path / "dropped"
    dropped = cairn(
        subprocess_env(tmp_path),
        "run",
        "--executor",
        "inprocess",
        "-n",
        "-s",
        stopped,
        SCRIPT,
        other,
        tmp_path / "chk",
        records,
        KEYS,
        0,
        "--check-uid",
        "renamed-check",
    )
    assert dropped.returncode == 0, dropped.stderr[-3000:]
    assert check_sequence_lines(read_visible_lines(str(other))).violations
