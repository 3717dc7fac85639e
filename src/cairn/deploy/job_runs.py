"""A run of a job among its runs: its job id from its identity, what it does with an earlier
run's checkpoints, and its run-status record.

Invariant: the shell around ``checkpoint/rerun.py``'s pure decision: facts are read once,
before the job master exists; the record says RUNNING before any checkpoint of this run can
be written and says how the run ended once it did (unless the retention policy removed the
job directory: nothing is left to resume); an explicit restore path (``-s``) bypasses the
decision but is recorded, so a later rerun resumes from it if this run completes nothing.
Without periodic checkpoints a run has no history and a fresh random job id, as before.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from cairn.checkpoint.errors import CheckpointError
from cairn.checkpoint.job_identity import JobIdentity, RunState, RunStatus, identity_of
from cairn.checkpoint.locations import remove_tree, resolve
from cairn.checkpoint.rerun import Refuse, Resume, StartFresh, decide_rerun, first_new_id
from cairn.checkpoint.run_status import JobDirFacts, read_job_dir, start_record, write_run_status
from cairn.checkpoint.storage import CheckpointStorage, default_storage_url
from cairn.common.job_status import JobStatus
from cairn.ids import CheckpointId, JobId
from cairn.settings import JobSettings

__all__ = ["RerunRefusedError", "RunPlan", "plan_run"]

log = logging.getLogger(__name__)

_RUN_STATE_OF = {
    JobStatus.FINISHED: RunState.FINISHED,
    JobStatus.CANCELED: RunState.CANCELED,
    JobStatus.FAILED: RunState.FAILED,
}


class RerunRefusedError(CheckpointError):
    """The run does not start: an earlier run of the job is running, or is to be resumed
    and ``cairn.recovery.on-rerun`` is REFUSE."""


@dataclass(frozen=True)
class RunPlan:
    """How this run starts: its job id, the earlier run's history to resume from (newest
    first; empty: no resume), the first checkpoint id it numbers, and the record to write
    (None: the job keeps no run history, e.g. without periodic checkpoints)."""

    job_id: JobId
    resume_from: tuple[str, ...] = ()
    first_checkpoint_id: CheckpointId = CheckpointId(1)  # noqa: RUF009 (a NewType: no call)
    record: RunStatus | None = None
    job_dir: str | None = None
    identity: JobIdentity | None = None
    first_attempt: int = 0  # above every attempt of the earlier run of this job id

    @property
    def inherited_from(self) -> CheckpointId | None:
        """The first checkpoint id of the lost run this run resumes (its checkpoints are
        this run's to clean up), or None when it resumes nothing."""
        if not self.resume_from or self.record is None:
            return None
        return self.record.first_checkpoint_id

    def started(self, storage_options: Any) -> None:
        """Write the RUNNING record (before the job master may write any checkpoint)."""
        if self.record is not None and self.job_dir is not None:
            write_run_status(self.job_dir, self.record, storage_options)

    def on_event(self, storage_options: Any) -> Callable[[str, Any], None]:
        """A job master listener that records each attempt the run deploys and how it
        ended."""
        current = [self.record]

        def listener(event: str, payload: Any) -> None:
            record = current[0]
            if record is None or self.job_dir is None:
                return
            if event == "running":  # before any sink of the attempt prepares a commit
                record = current[0] = record.at_attempt(int(payload))
                try:
                    write_run_status(self.job_dir, record, storage_options, create=False)
                except Exception as e:  # the next run then numbers from an older attempt
                    log.warning(
                        "could not record attempt %s of job %s: %s", payload, self.job_id, e
                    )
                return
            state = _RUN_STATE_OF.get(payload) if event == "status" else None
            if state is None:
                return
            ended = record.ended(state, int(time.time() * 1000))
            try:
                write_run_status(self.job_dir, ended, storage_options, create=False)
            except Exception as e:  # the job's outcome stands; a rerun then sees RUNNING
                log.warning("could not record that job %s ended %s: %s", self.job_id, state, e)

        return listener


def plan_run(
    settings: JobSettings, running_here: Collection[str] = (), leading: bool = False
) -> RunPlan:
    """Read the job directory of the job's identity and decide how this run starts.
    ``leading``: this driver holds the job's leader lease (high availability), which, not
    the process table, says who runs the job: an earlier driver still alive is no reason
    to refuse.

    Raises:
        RerunRefusedError: the earlier run's driver still runs, or on-rerun is REFUSE and
            there is something to resume; the message says what and how to go on.
    """
    cp = settings.checkpoint
    if not cp.enabled:
        return RunPlan(JobId(uuid.uuid4().hex))
    identity = identity_of(
        settings.cluster_id, settings.job_name, cp.storage_url or default_storage_url()
    )
    job_id = identity.job_id
    job_dir = CheckpointStorage(cp.storage_url, job_id, cp.storage_options).job_dir
    facts = read_job_dir(job_dir, cp.storage_options, running_here)
    if leading:
        facts = replace(facts, driver_alive=False)
    if facts.record_problem is not None:
        log.warning("Job %s: unreadable run-status record (%s).", job_id, facts.record_problem)
    run_id = uuid.uuid4().hex
    first_id = first_new_id(facts)
    attempt = facts.record.attempt + 1 if facts.record is not None else 0
    name = f"Job {settings.job_name!r} ({job_id}, {identity.describe()})"
    if settings.restore_path:  # -s: explicit, whatever the earlier runs left
        if facts.driver_alive:
            _refuse(decide_rerun(facts, settings.on_rerun), name)
        record = start_record(
            job_id, first_id, settings.restore_path, identity.describe(), run_id, attempt
        )
        return RunPlan(job_id, (), first_id, record, job_dir, identity, attempt)
    decision = decide_rerun(facts, settings.on_rerun)
    if isinstance(decision, Refuse):
        _refuse(decision, name)
    _discard_incomplete(facts, cp.storage_options)
    if isinstance(decision, StartFresh):
        if facts.record is not None or facts.completed:
            log.warning("%s starts fresh: %s.", name, decision.reason)
        record = start_record(job_id, first_id, None, identity.describe(), run_id, attempt)
        return RunPlan(job_id, (), first_id, record, job_dir, identity, attempt)
    assert isinstance(decision, Resume)
    log.warning(
        "%s: %s; resuming from its latest completed checkpoint %s (--fresh starts from "
        "scratch instead).",
        name,
        _how_it_went(facts),
        decision.candidates[0],
    )
    previous = facts.record
    floor = (
        previous.first_checkpoint_id if previous is not None else min(c for c, _ in facts.completed)
    )
    restored_from = previous.restored_from if previous is not None else None
    record = start_record(job_id, floor, restored_from, identity.describe(), run_id, attempt)
    return RunPlan(job_id, decision.candidates, first_id, record, job_dir, identity, attempt)


def _refuse(decision: object, name: str) -> None:
    assert isinstance(decision, Refuse)
    raise RerunRefusedError(f"{name} does not start: {decision.reason}")


def _how_it_went(facts: JobDirFacts) -> str:
    record = facts.record
    if record is None:
        return "an earlier run left checkpoints but no readable run-status record"
    if record.state is RunState.RUNNING:
        return f"its earlier run was lost without ending (driver pid {record.pid} on {record.host})"
    return f"its earlier run ended {record.state.value}"


def _discard_incomplete(facts: JobDirFacts, storage_options: Any) -> None:
    """Remove the ``chk-<n>`` directories the lost run left without ``_metadata``: no run
    will complete them (numbering continues above them) and nothing references them."""
    for directory in facts.incomplete:
        try:
            remove_tree(resolve(directory, storage_options))
            log.info("Removed %s, an incomplete checkpoint of an earlier run.", directory)
        except OSError as e:
            log.warning("could not remove %s (incomplete checkpoint): %s", directory, e)
