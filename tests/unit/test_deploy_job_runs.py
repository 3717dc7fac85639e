"""How a run starts among the runs of its job (``deploy/job_runs.py``): read on real local
storage, written back as the run goes."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import fsspec
import pytest

from cairn.checkpoint.job_identity import RunState, RunStatus, identity_of
from cairn.checkpoint.locations import resolve
from cairn.checkpoint.run_status import read_job_dir, start_record, write_run_status
from cairn.common.job_status import JobStatus
from cairn.deploy.job_runs import RerunRefusedError, plan_run
from cairn.ids import CheckpointId
from cairn.runtime.faults import parse_faults, with_driver_pid
from cairn.settings import CheckpointSettings, JobSettings, RerunPolicy


def _settings(root: Path, **changes: object) -> JobSettings:
    cp = CheckpointSettings(interval_ms=100, storage_url=f"file://{root}")
    return replace(JobSettings("orders", 2, checkpoint=cp), **changes)  # type: ignore[arg-type]


def _lost_run(root: Path, ids: list[int], attempt: int = 0, pid: int = 1) -> Path:
    job_id = identity_of(None, "orders", f"file://{root}").job_id
    job_dir = root / job_id
    for n in ids:
        (job_dir / f"chk-{n}").mkdir(parents=True)
        (job_dir / f"chk-{n}" / "_metadata").write_bytes(b"")
    record = start_record(job_id, CheckpointId(1), None, "orders", "run-0", attempt)
    write_run_status(f"file://{job_dir}", replace(record, pid=pid, pid_started=0.0))
    return job_dir


def test_without_periodic_checkpoints_every_run_is_new(tmp_path: Path) -> None:
    settings = replace(_settings(tmp_path), checkpoint=CheckpointSettings())
    a, b = plan_run(settings), plan_run(settings)
    assert a.job_id != b.job_id and a.record is None and not a.resume_from


def test_a_first_run_starts_fresh_and_records_itself(tmp_path: Path) -> None:
    plan = plan_run(_settings(tmp_path))
    assert plan.job_id == identity_of(None, "orders", f"file://{tmp_path}").job_id
    assert plan.resume_from == () and plan.first_checkpoint_id == 1 and plan.first_attempt == 0
    plan.started({})
    listener = plan.on_event({})
    listener("running", 0)
    facts = read_job_dir(f"file://{tmp_path / plan.job_id}")
    assert facts.record is not None and facts.record.state is RunState.RUNNING
    listener("status", JobStatus.CANCELED)
    ended = read_job_dir(f"file://{tmp_path / plan.job_id}").record
    assert ended is not None and ended.state is RunState.CANCELED and ended.ended_ms


def test_a_rerun_resumes_the_lost_run_above_its_checkpoints_and_attempts(tmp_path: Path) -> None:
    job_dir = _lost_run(tmp_path, [3, 4], attempt=2)
    (job_dir / "chk-5").mkdir()  # in progress when the driver died
    plan = plan_run(_settings(tmp_path))
    assert plan.resume_from == (f"file://{job_dir}/chk-4", f"file://{job_dir}/chk-3")
    assert plan.first_checkpoint_id == 6 and plan.first_attempt == 3
    assert not (job_dir / "chk-5").exists()  # the lost run's incomplete checkpoint is gone
    assert plan.record is not None and plan.record.first_checkpoint_id == 1  # same history
    assert plan.inherited_from == 1  # the lost run's checkpoints are the rerun's to clean up


def test_a_storage_error_fails_the_rerun_instead_of_starting_it_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the fault campaign: fsspec's isfile answers False to any error, so a storage
    # blip made completed checkpoints look incomplete; the rerun deleted them and started
    # from scratch, writing every record again.
    job_dir = _lost_run(tmp_path, [3, 4])
    fs = type(resolve(f"file://{job_dir}", None).fs)
    real_info = fs.info

    for failing in ("_metadata", job_dir.name):  # a checkpoint's metadata, the job directory

        def flaky_info(self: object, path: object, failing: str = failing, **kw: object) -> object:
            if str(getattr(path, "path", path)).rstrip("/").endswith(failing):
                raise ConnectionError("storage restarting")
            return real_info(self, path, **kw)

        monkeypatch.setattr(fs, "info", flaky_info)
        # As on object stores: fsspec's generic isdir/isfile ask info() and answer False to
        # any OSError (the local filesystem asks os.path instead).
        monkeypatch.setattr(fs, "isdir", fsspec.AbstractFileSystem.isdir)
        monkeypatch.setattr(fs, "isfile", fsspec.AbstractFileSystem.isfile)
        with pytest.raises(ConnectionError):
            plan_run(_settings(tmp_path))
        monkeypatch.undo()
    assert (job_dir / "chk-4" / "_metadata").exists() and (job_dir / "chk-3").exists()
    assert plan_run(_settings(tmp_path)).resume_from[0] == f"file://{job_dir}/chk-4"


def test_options_fresh_and_refuse(tmp_path: Path) -> None:
    _lost_run(tmp_path, [3])
    fresh = plan_run(_settings(tmp_path, on_rerun=RerunPolicy.FRESH))
    assert fresh.resume_from == () and fresh.first_checkpoint_id == 4
    assert fresh.record is not None and fresh.record.first_checkpoint_id == 4
    with pytest.raises(RerunRefusedError, match=r"chk-3.*--fresh"):
        plan_run(_settings(tmp_path, on_rerun=RerunPolicy.REFUSE))


def test_an_explicit_restore_path_wins_and_is_recorded(tmp_path: Path) -> None:
    _lost_run(tmp_path, [3])
    plan = plan_run(_settings(tmp_path, restore_path="file:///savepoints/sp-1"))
    assert plan.resume_from == () and plan.first_checkpoint_id == 4
    assert plan.record is not None and plan.record.restored_from == "file:///savepoints/sp-1"


def test_a_live_driver_of_the_job_on_this_host_is_refused(tmp_path: Path) -> None:
    import psutil

    job_dir = _lost_run(tmp_path, [3])
    ppid = os.getppid()
    status = job_dir / "_run-status"
    alive = replace(
        RunStatus.decode(status.read_bytes()),
        pid=ppid,
        pid_started=psutil.Process(ppid).create_time(),
    )
    status.write_bytes(alive.encode())
    for policy in (RerunPolicy.RESUME, RerunPolicy.FRESH):
        with pytest.raises(RerunRefusedError, match=f"already running: its driver is pid {ppid}"):
            plan_run(_settings(tmp_path, on_rerun=policy))


def test_faults_count_attempts_from_the_runs_first_and_name_the_driver() -> None:
    (spec,) = with_driver_pid(parse_faults("point=after-commit,attempt=1,kill=driver"), 3)
    assert spec.attempt == 4 and spec.driver_pid == os.getpid()
    with pytest.raises(ValueError, match="unknown fault kill target"):
        parse_faults("point=after-commit,kill=everyone")
