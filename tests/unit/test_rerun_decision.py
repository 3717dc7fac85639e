"""What a rerun does with an earlier run's checkpoints: the pure decision over job-directory
facts, and the restore that follows it (newest usable of the earlier run's history, falling
back past a corrupt one with the same rules as ``-s``), on real storage."""

from __future__ import annotations

import logging
import os

import pytest
from fsspec.core import url_to_fs

from cairn.checkpoint.errors import FallbackRefusedError
from cairn.checkpoint.job_identity import RunState, RunStatus
from cairn.checkpoint.protocol import FallbackRule
from cairn.checkpoint.rerun import Refuse, Resume, StartFresh, decide_rerun, first_new_id
from cairn.checkpoint.run_status import JobDirFacts, read_job_dir, start_record, write_run_status
from cairn.ids import CheckpointId, JobId
from cairn.settings import RerunPolicy
from tests.unit._coordinator_harness import make

JOB = JobId("f" * 32)


def record(state: RunState, floor: int = 1, restored_from: str | None = None) -> RunStatus:
    return RunStatus(JOB, "run-1", state, CheckpointId(floor), restored_from, "h", 1, 0.0, 0)


def facts(state: RunState | None, *ids: int, floor: int = 1, **kw: object) -> JobDirFacts:
    completed = tuple((CheckpointId(i), f"/cp/{JOB}/chk-{i}") for i in sorted(ids, reverse=True))
    rec = record(state, floor, **kw) if state is not None else None  # type: ignore[arg-type]
    highest = CheckpointId(max(ids)) if ids else None
    return JobDirFacts(record=rec, completed=completed, highest_id=highest)


@pytest.mark.parametrize("state", [RunState.RUNNING, RunState.FAILED])
def test_a_lost_or_failed_run_with_checkpoints_is_resumed(state: RunState) -> None:
    decision = decide_rerun(facts(state, 3, 4, 5), RerunPolicy.RESUME)
    assert decision == Resume(
        (f"/cp/{JOB}/chk-5", f"/cp/{JOB}/chk-4", f"/cp/{JOB}/chk-3"), CheckpointId(5), state
    )


@pytest.mark.parametrize("state", [RunState.FINISHED, RunState.CANCELED])
def test_a_run_that_ended_on_purpose_starts_fresh_unless_asked(state: RunState) -> None:
    fresh = decide_rerun(facts(state, 4), RerunPolicy.RESUME)
    assert isinstance(fresh, StartFresh) and state.value in fresh.reason
    assert "FORCE_RESUME" in fresh.reason  # says how to resume anyway
    forced = decide_rerun(facts(state, 4), RerunPolicy.FORCE_RESUME)
    assert isinstance(forced, Resume) and forced.candidates == (f"/cp/{JOB}/chk-4",)
    # Refusing is about resuming: a run that ended on purpose is not resumed, so it starts.
    assert isinstance(decide_rerun(facts(state, 4), RerunPolicy.REFUSE), StartFresh)


def test_no_completed_checkpoint_means_fresh() -> None:
    assert decide_rerun(JobDirFacts(), RerunPolicy.RESUME) == StartFresh(
        "no earlier run of this job"
    )
    lost = decide_rerun(facts(RunState.RUNNING), RerunPolicy.RESUME)
    assert lost == StartFresh("the earlier run (RUNNING) completed no checkpoint")


def test_checkpoints_older_than_the_earlier_runs_history_are_never_resumed() -> None:
    # chk-2 is of a run before the latest (which started fresh at 3 and completed nothing).
    assert isinstance(
        decide_rerun(facts(RunState.RUNNING, 2, floor=3), RerunPolicy.RESUME), StartFresh
    )
    resumed = decide_rerun(facts(RunState.RUNNING, 2, 6, floor=3), RerunPolicy.RESUME)
    assert isinstance(resumed, Resume) and resumed.candidates == (f"/cp/{JOB}/chk-6",)


def test_what_the_earlier_run_restored_from_is_its_oldest_candidate() -> None:
    sp = "s3://bucket/savepoints/sp-1"
    lost = facts(RunState.RUNNING, 9, floor=9, restored_from=sp)
    assert decide_rerun(lost, RerunPolicy.RESUME) == Resume(
        (f"/cp/{JOB}/chk-9", sp), CheckpointId(9), RunState.RUNNING
    )
    nothing_yet = facts(RunState.RUNNING, floor=9, restored_from=sp)
    assert decide_rerun(nothing_yet, RerunPolicy.RESUME) == Resume((sp,), None, RunState.RUNNING)
    inside = facts(RunState.RUNNING, 4, floor=9, restored_from=f"/cp/{JOB}/chk-4")
    assert decide_rerun(inside, RerunPolicy.RESUME).candidates == (f"/cp/{JOB}/chk-4",)  # type: ignore[union-attr]


def test_fresh_and_refuse_options() -> None:
    lost = facts(RunState.RUNNING, 7)
    assert decide_rerun(lost, RerunPolicy.FRESH) == StartFresh(
        "asked to start fresh (cairn.recovery.on-rerun: FRESH)"
    )
    refused = decide_rerun(lost, RerunPolicy.REFUSE)
    assert isinstance(refused, Refuse)
    assert f"/cp/{JOB}/chk-7" in refused.reason and "driver died" in refused.reason
    assert "--fresh" in refused.reason and "-s" in refused.reason


def test_a_record_that_cannot_be_read_resumes_every_complete_checkpoint() -> None:
    unreadable = JobDirFacts(record_problem="garbage", completed=facts(None, 1, 2).completed)
    decision = decide_rerun(unreadable, RerunPolicy.RESUME)
    assert isinstance(decision, Resume) and decision.previous is None
    assert decision.candidates == (f"/cp/{JOB}/chk-2", f"/cp/{JOB}/chk-1")


def test_a_live_driver_is_never_run_beside() -> None:
    alive = JobDirFacts(record=record(RunState.RUNNING), driver_alive=True)
    for policy in RerunPolicy:
        decision = decide_rerun(alive, policy)
        assert isinstance(decision, Refuse) and "already running" in decision.reason


def test_numbering_continues_above_every_checkpoint_directory() -> None:
    assert first_new_id(JobDirFacts()) == 1
    assert first_new_id(facts(RunState.RUNNING, 3, 4)) == 5
    incomplete = JobDirFacts(record=record(RunState.RUNNING), highest_id=CheckpointId(9))
    assert first_new_id(incomplete) == 10
    assert first_new_id(JobDirFacts(record=record(RunState.FINISHED, floor=12))) == 12


# --- the restore that follows: real checkpoints on disk -----------------------------------


def _lost_run(root: str, checkpoints: int) -> tuple[str, list[str]]:
    """A run that completed ``checkpoints`` checkpoints and then lost its driver (RUNNING)."""
    h = make(root, JOB, retained=checkpoints)
    for _ in range(checkpoints):
        h.checkpoint()
    job_dir = h.storage.job_dir
    write_run_status(job_dir, start_record(JOB, CheckpointId(1), None, "test", "run-1"))
    return job_dir, [cp.directory for cp in reversed(h.coord.completed_checkpoints())]


def _truncate_a_state_file(directory: str) -> str:
    from cairn.checkpoint.storage import load_checkpoint

    victim = sorted(load_checkpoint(directory).metadata.referenced_files())[0]
    fs, path = url_to_fs(f"{directory}/{victim}")
    fs.pipe_file(path, b"")
    return victim


def test_resume_restores_the_latest_and_continues_its_numbering(root: str) -> None:
    job_dir, dirs = _lost_run(root, 2)
    decision = decide_rerun(read_job_dir(job_dir), RerunPolicy.RESUME)
    assert isinstance(decision, Resume) and list(decision.candidates) == dirs
    rerun = make(root, JOB)
    rerun.coord.set_next_checkpoint_id(first_new_id(read_job_dir(job_dir)))
    chosen = rerun.coord.restore_point(decision.candidates, claim=True)
    assert chosen is not None and chosen.checkpoint_id == 2
    assert rerun.checkpoint() == 3  # into a new chk-3, next to the earlier run's


def test_a_corrupt_latest_checkpoint_falls_back_to_an_older_one(
    root: str, caplog: pytest.LogCaptureFixture
) -> None:
    job_dir, dirs = _lost_run(root, 2)
    victim = _truncate_a_state_file(dirs[0])
    decision = decide_rerun(read_job_dir(job_dir), RerunPolicy.RESUME)
    assert isinstance(decision, Resume)
    rerun = make(root, JOB, fallback=FallbackRule(("sink",), allow_past_committed=True))
    with caplog.at_level(logging.WARNING, logger="cairn.checkpoint"):
        chosen = rerun.coord.restore_point(decision.candidates, claim=True)
    assert chosen is not None and chosen.checkpoint_id == 1
    assert any(victim in r.getMessage() and "truncated" in r.getMessage() for r in caplog.records)
    # With a committing sink and no permission, the same fallback is refused, as for -s.
    strict = make(root, JOB, fallback=FallbackRule(("sink",)))
    with pytest.raises(FallbackRefusedError, match="chk-2"):
        strict.coord.restore_point(decision.candidates, claim=True)


def test_a_missing_restore_source_is_a_skipped_candidate(root: str) -> None:
    _, dirs = _lost_run(root, 1)
    gone = os.path.join(root, "savepoints", "sp-gone")
    chosen = make(root, JOB).coord.restore_point([gone, *dirs], claim=True)
    assert chosen is not None and chosen.checkpoint_id == 1
