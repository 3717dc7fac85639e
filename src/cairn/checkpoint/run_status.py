"""Reading and writing what a job directory says about the job's earlier runs: the run-status
record and which ``chk-<n>`` directories it holds.

Invariant: the thin I/O shell around ``job_identity`` and ``rerun``: it only gathers facts
(``JobDirFacts``) and writes the record atomically (``atomic_write``: a reader sees the old
record or the new one, never part of one); every decision over the facts is pure and lives in
``rerun.py``. An unreadable record is a fact (its problem), never an exception.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.job_identity import RUN_STATUS_FILE, RunState, RunStatus
from cairn.checkpoint.loading import chk_subdirs, has_metadata, is_dir, is_file
from cairn.checkpoint.locations import atomic_write, makedirs, resolve
from cairn.ids import CheckpointId, JobId

__all__ = [
    "JobDirFacts",
    "driver_alive",
    "read_job_dir",
    "start_record",
    "this_host",
    "write_run_status",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JobDirFacts:
    """What a job directory holds: the run-status record (or why it could not be read), the
    complete checkpoints newest first as ``(id, directory)``, the highest ``chk-<n>`` id of
    any directory (complete or not), the incomplete ones, and whether the driver the record
    names still runs."""

    record: RunStatus | None = None
    record_problem: str | None = None
    completed: tuple[tuple[CheckpointId, str], ...] = ()
    highest_id: CheckpointId | None = None
    incomplete: tuple[str, ...] = ()
    driver_alive: bool = False


def this_host() -> str:
    return socket.gethostname()


def _process_started(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def driver_alive(record: RunStatus, running_here: Collection[str] = ()) -> bool:
    """Whether the driver that ``record`` names still runs: only a RUNNING record on this
    host can tell (the same pid, started at the same time, so a reused pid does not count).
    In this very process the run is alive iff its job id is among ``running_here`` (the job
    ids this process runs now). A driver on another host is taken as lost (high
    availability's lease is what tells them apart there)."""
    if record.state is not RunState.RUNNING or record.host != this_host():
        return False
    if record.pid == os.getpid():
        return record.job_id in running_here
    started = _process_started(record.pid)
    return started is not None and abs(started - record.pid_started) < 1.0


def read_job_dir(
    job_dir: str,
    storage_options: Mapping[str, Any] | None = None,
    running_here: Collection[str] = (),
) -> JobDirFacts:
    """The facts of ``job_dir`` (a job that never ran there: empty facts)."""
    loc = resolve(job_dir, storage_options)
    if not is_dir(loc.fs, loc.path):
        return JobDirFacts()
    record: RunStatus | None = None
    problem: str | None = None
    status_loc = loc.join(RUN_STATUS_FILE)
    if is_file(loc.fs, status_loc.path):
        try:
            record = RunStatus.decode(loc.fs.cat_file(status_loc.path))
        except ValueError as e:
            problem = f"{status_loc.public()}: {e}"
    completed: list[tuple[CheckpointId, str]] = []
    incomplete: list[str] = []
    dirs = chk_subdirs(loc)
    for cid, chk in dirs:
        if has_metadata(chk):
            completed.append((cid, chk.public()))
        else:
            incomplete.append(chk.public())
    return JobDirFacts(
        record=record,
        record_problem=problem,
        completed=tuple(completed),
        highest_id=dirs[0][0] if dirs else None,
        incomplete=tuple(incomplete),
        driver_alive=record is not None and driver_alive(record, running_here),
    )


def start_record(
    job_id: JobId,
    first_checkpoint_id: CheckpointId,
    restored_from: str | None,
    identity: str,
    run_id: str,
    attempt: int = 0,
) -> RunStatus:
    """The record of a run of this process that starts now (at ``attempt``)."""
    pid = os.getpid()
    return RunStatus(
        job_id=job_id,
        run_id=run_id,
        state=RunState.RUNNING,
        first_checkpoint_id=first_checkpoint_id,
        restored_from=restored_from,
        host=this_host(),
        pid=pid,
        pid_started=_process_started(pid) or time.time(),
        started_ms=int(time.time() * 1000),
        identity=identity,
        attempt=attempt,
    )


def write_run_status(
    job_dir: str,
    record: RunStatus,
    storage_options: Mapping[str, Any] | None = None,
    create: bool = True,
) -> bool:
    """Write ``record`` as ``job_dir/_run-status`` (atomically). Without ``create``, a job
    directory that no longer exists (the retention policy removed it: nothing is left to
    resume) is not created again just for the record; returns whether it was written."""
    loc = resolve(job_dir, storage_options)
    if not create and not loc.fs.isdir(loc.path):
        return False
    makedirs(loc)
    atomic_write(loc.join(RUN_STATUS_FILE), record.encode())
    return True
