"""What a run does with the checkpoints an earlier run of the same job left: a pure decision.

Invariant: a run resumes only from complete checkpoints of the earlier run's own history
(ids from its record's ``first_checkpoint_id`` on, then what that run itself restored from),
never from a run older than the latest one; it never resumes on behalf of a run that ended
FINISHED or CANCELED unless asked (FORCE_RESUME); it never starts while the driver of the
earlier run still runs; and numbering continues above every ``chk-<n>`` in the job directory,
so no checkpoint of this run is written into a directory another run used.

Which of the candidates is usable is not decided here: the restore verifies them newest
first and falls back to older ones (``restore.find_restore_point``), as for ``-s``.

>>> chk_4 = ((CheckpointId(4), "j/chk-4"),)
>>> facts = JobDirFacts(record=_example(RunState.RUNNING), completed=chk_4)
>>> decide_rerun(facts, RerunPolicy.RESUME)
Resume(candidates=('j/chk-4',), latest=4, previous=<RunState.RUNNING: 'RUNNING'>)
>>> decide_rerun(facts, RerunPolicy.FRESH).reason
'asked to start fresh (cairn.recovery.on-rerun: FRESH)'
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.checkpoint.job_identity import RunState, RunStatus
from cairn.checkpoint.run_status import JobDirFacts
from cairn.ids import CheckpointId, JobId
from cairn.settings import RerunPolicy

__all__ = ["Refuse", "RerunDecision", "Resume", "StartFresh", "decide_rerun", "first_new_id"]


@dataclass(frozen=True, slots=True)
class Resume:
    """Restore the newest usable of ``candidates`` (newest first), as ``-s`` would."""

    candidates: tuple[str, ...]
    latest: CheckpointId | None  # the newest candidate's id (None: a restore path outside)
    previous: RunState | None  # how the earlier run ended (None: its record is unreadable)


@dataclass(frozen=True, slots=True)
class StartFresh:
    """Start from scratch; ``reason`` says why (logged)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not start; ``reason`` says why and what to do instead."""

    reason: str


RerunDecision = Resume | StartFresh | Refuse


def _candidates(facts: JobDirFacts) -> tuple[str, ...]:
    record = facts.record
    floor = record.first_checkpoint_id if record is not None else 0
    own = tuple(d for cid, d in facts.completed if cid >= floor)
    origin = record.restored_from if record is not None else None
    if origin is not None and origin.rstrip("/") not in {d.rstrip("/") for d in own}:
        own += (origin,)
    return own


def decide_rerun(facts: JobDirFacts, policy: RerunPolicy) -> RerunDecision:
    """Resume, start fresh or refuse, given what the job directory holds.

    >>> decide_rerun(JobDirFacts(), RerunPolicy.REFUSE).reason
    'no earlier run of this job'
    """
    record = facts.record
    if facts.driver_alive and record is not None:
        return Refuse(
            f"the job is already running: its driver is pid {record.pid} on {record.host} "
            f"(run {record.run_id}). Stop it first, or give this run another identity "
            "(pipeline.name or high-availability.cluster-id)."
        )
    if policy is RerunPolicy.FRESH:
        return StartFresh("asked to start fresh (cairn.recovery.on-rerun: FRESH)")
    if record is None and not facts.completed:
        return StartFresh("no earlier run of this job")
    if (
        record is not None
        and record.state.ended_on_purpose
        and policy is not RerunPolicy.FORCE_RESUME
    ):
        return StartFresh(
            f"the earlier run ended {record.state.value} (cairn.recovery.on-rerun: "
            "FORCE_RESUME resumes it anyway)"
        )
    candidates = _candidates(facts)
    if not candidates:
        how = record.state.value if record is not None else "with an unreadable record"
        return StartFresh(f"the earlier run ({how}) completed no checkpoint")
    own = [cid for cid, d in facts.completed if d == candidates[0]]
    latest = own[0] if own else None
    previous = record.state if record is not None else None
    if policy is RerunPolicy.REFUSE:
        how = f"ended {previous.value}" if previous is not None else "left no readable record"
        if previous is RunState.RUNNING:
            how = "was lost without ending (its driver died)"
        return Refuse(
            f"an earlier run of this job {how} and left checkpoint {candidates[0]}; "
            "cairn.recovery.on-rerun is REFUSE. Resume it (cairn run --resume), restore it "
            "explicitly (-s), or start from scratch (--fresh)."
        )
    return Resume(candidates, latest, previous)


def first_new_id(facts: JobDirFacts) -> CheckpointId:
    """The first checkpoint id this run may number: above every ``chk-<n>`` in the job
    directory, complete or not, and above the earlier run's first id.

    >>> first_new_id(JobDirFacts(highest_id=CheckpointId(7)))
    8
    >>> first_new_id(JobDirFacts())
    1
    """
    highest = facts.highest_id or 0
    if facts.record is not None:
        highest = max(highest, facts.record.first_checkpoint_id - 1)
    return CheckpointId(highest + 1)


def _example(state: RunState) -> RunStatus:
    return RunStatus(JobId("0" * 32), "run-1", state, CheckpointId(1), None, "h", 1, 0.0, 0)
