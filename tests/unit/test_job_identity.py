"""The job's identity across runs, its job id and the run-status record (read and written
on a real local filesystem)."""

from __future__ import annotations

import os

import pytest

from cairn.checkpoint.job_identity import RUN_STATUS_FILE, RunState, RunStatus, identity_of
from cairn.checkpoint.run_status import (
    driver_alive,
    read_job_dir,
    start_record,
    write_run_status,
)
from cairn.ids import CheckpointId, JobId


def test_same_job_on_same_storage_has_one_job_id() -> None:
    a = identity_of(None, "orders", "file:///data/cp")
    assert a.job_id == identity_of(None, "orders", "file:///data/cp/").job_id
    assert len(a.job_id) == 32 and int(a.job_id, 16) >= 0
    assert a.job_id != identity_of(None, "payments", "file:///data/cp").job_id
    assert a.job_id != identity_of(None, "orders", "file:///data/other").job_id


def test_cluster_id_names_the_job_whatever_its_name_and_storage() -> None:
    a = identity_of("prod", "orders", "file:///a")
    assert a.job_id == identity_of("prod", "renamed", "s3://b/c").job_id
    assert a.job_id != identity_of("staging", "orders", "file:///a").job_id
    assert a.job_id != identity_of(None, "orders", "file:///a").job_id
    assert "cluster-id 'prod'" in a.describe()


def _record(**changes: object) -> RunStatus:
    base = RunStatus(
        JobId("j" * 32), "run", RunState.RUNNING, CheckpointId(3), None, "h", 1, 2.0, 5
    )
    fields = {f: getattr(base, f) for f in RunStatus.__slots__}
    fields.update(changes)
    return RunStatus(**fields)  # type: ignore[arg-type]


def test_record_round_trips_and_refuses_what_it_cannot_read() -> None:
    record = _record(restored_from="s3://b/sp-1", ended_ms=9, state=RunState.FAILED)
    assert RunStatus.decode(record.encode()) == record
    for bad, why in [
        (b"\xff", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"version": 99}', "unknown record version"),
        (record.encode().replace(b'"FAILED"', b'"LOST"'), "LOST"),
        (record.encode().replace(b'"pid": 1', b'"pid": "1"'), "'pid' has the wrong type"),
    ]:
        with pytest.raises(ValueError, match=why):
            RunStatus.decode(bad)


def test_job_dir_facts(tmp_path: os.PathLike[str]) -> None:
    job_dir = os.path.join(tmp_path, "job")
    assert read_job_dir(job_dir).record is None  # never ran: empty facts
    for n, complete in [(1, True), (2, True), (3, False)]:
        chk = os.path.join(job_dir, f"chk-{n}")
        os.makedirs(chk)
        if complete:
            open(os.path.join(chk, "_metadata"), "wb").close()
    record = start_record(JobId("a" * 32), CheckpointId(1), None, "test", "run-1")
    assert write_run_status(job_dir, record)
    facts = read_job_dir(job_dir, running_here={record.job_id})
    assert facts.record == record
    assert [cid for cid, _ in facts.completed] == [2, 1]
    assert facts.completed[0][1].endswith("/job/chk-2")
    assert facts.highest_id == 3 and facts.incomplete[0].endswith("/job/chk-3")
    assert facts.driver_alive  # this process runs the job
    assert not read_job_dir(job_dir).driver_alive  # this process does not run it (any more)

    with open(os.path.join(job_dir, RUN_STATUS_FILE), "wb") as f:
        f.write(b"{garbage")
    facts = read_job_dir(job_dir)
    assert facts.record is None and "not JSON" in (facts.record_problem or "")


def test_record_is_not_written_into_a_removed_job_dir(tmp_path: os.PathLike[str]) -> None:
    job_dir = os.path.join(tmp_path, "gone")
    record = start_record(JobId("b" * 32), CheckpointId(1), None, "test", "run-1")
    assert not write_run_status(job_dir, record.ended(RunState.FINISHED, 1), create=False)
    assert not os.path.exists(job_dir)


def test_a_lost_driver_is_told_from_a_live_one() -> None:
    mine = start_record(JobId("c" * 32), CheckpointId(1), None, "test", "run-1")
    assert driver_alive(mine, running_here={mine.job_id})
    assert not driver_alive(mine.ended(RunState.FAILED, 1), running_here={mine.job_id})
    parent = _record(host=mine.host, pid=os.getppid(), pid_started=0.0)
    assert not driver_alive(parent)  # a live pid started at another time: reused, not ours
    assert not driver_alive(_record(host="elsewhere", pid=os.getppid()))


def test_a_live_driver_on_this_host_is_alive() -> None:
    import psutil

    ppid = os.getppid()
    mine = start_record(JobId("d" * 32), CheckpointId(1), None, "test", "run-1")
    parent = _record(host=mine.host, pid=ppid, pid_started=psutil.Process(ppid).create_time())
    assert driver_alive(parent)
