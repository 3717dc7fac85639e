"""``cairn chaos --driver-kills``'s pure parts: the seeded schedule of driver kills, each
kill as a fault spec of its driver life, the resume a new driver logs, and the report's
lines on the kills (landed where, or why not); and the checkpoint numbering a new driver
continues above, read from a real job directory."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from cairn.checkpoint.run_status import start_record, write_run_status
from cairn.cli.chaos_driver import (
    DRIVER_KINDS,
    DriverKill,
    KillOutcome,
    checkpoints_numbered,
    driver_kill_lines,
    kill_before,
    plan_driver_kills,
    resumed_checkpoint,
    why_not_landed,
)
from cairn.cli.chaos_verdict import Difference, Record
from cairn.ids import CheckpointId, JobId
from cairn.runtime.faults import DRIVER_POINTS, parse_faults
from cairn.testing.fault_plan import Vertex

_SHAPE = (Vertex("orders", 2, True), Vertex("totals -> Sink: totals-file", 2))


def test_the_schedule_is_a_function_of_the_seed_and_aims_within_each_lifes_share() -> None:
    kills = plan_driver_kills(5, 4, checkpoints=20, vertices=_SHAPE)
    assert kills == plan_driver_kills(5, 4, checkpoints=20, vertices=_SHAPE)
    assert [k.index for k in kills] == [0, 1, 2, 3]
    assert all(1 <= k.checkpoint <= 20 // 5 for k in kills)
    assert plan_driver_kills(6, 4, checkpoints=20, vertices=_SHAPE) != kills
    assert plan_driver_kills(5, 0, checkpoints=20, vertices=_SHAPE) == ()
    # Every moment is drawn over enough seeds.
    kinds = {
        k.kind for s in range(40) for k in plan_driver_kills(s, 2, checkpoints=9, vertices=_SHAPE)
    }
    assert kinds == set(DRIVER_KINDS)


def test_the_moments_replay_whatever_the_reference_completed() -> None:
    """The checkpoint count is the reference's timing; the kinds must not depend on it."""
    few = plan_driver_kills(9, 3, checkpoints=2, vertices=_SHAPE)
    many = plan_driver_kills(9, 3, checkpoints=40, vertices=_SHAPE)
    assert [k.kind for k in few] == [k.kind for k in many]
    assert all(k.checkpoint == 1 for k in few)  # a share of 2 // 4: at least the first


def test_the_sinks_moments_aim_at_the_last_vertex_unless_its_name_is_ambiguous() -> None:
    kills = [k for s in range(30) for k in plan_driver_kills(s, 1, checkpoints=9, vertices=_SHAPE)]
    for k in kills:
        aims_sink = DRIVER_KINDS[k.kind][1]
        assert k.vertex == ("totals -> Sink: totals-file" if aims_sink else None), k
    # "Sink" is part of another vertex's name: a spec naming it would match both.
    ambiguous = (Vertex("Sink", 1, True), Vertex("Sink -> Sink", 1))
    for s in range(30):
        (k,) = plan_driver_kills(s, 1, checkpoints=9, vertices=(*ambiguous, Vertex("Sink", 1)))
        assert k.vertex is None
    with pytest.raises(ValueError):
        plan_driver_kills(1, -1, checkpoints=9, vertices=_SHAPE)


def test_each_kill_is_a_driver_fault_of_its_life_at_the_checkpoint_numbered_above_base() -> None:
    for s in range(30):
        (kill,) = plan_driver_kills(s, 1, checkpoints=9, vertices=_SHAPE)
        (spec,) = parse_faults(kill.spec(base=7, marker_dir="/m"))
        assert spec.point == DRIVER_KINDS[kill.kind][0]
        assert spec.kill == "driver" and spec.attempt == 0
        assert spec.checkpoint == 7 + kill.checkpoint
        assert spec.vertex == kill.vertex
        assert spec.marker == "/m/driver-0"
    assert "driver-metadata" in DRIVER_POINTS  # the one moment on the driver itself


def test_the_checkpoint_a_new_driver_logs_it_resumed_from() -> None:
    log = (
        "WARNING cairn.deploy.job_runs: Job 'x' (...): its earlier run was lost without ending\n"
        "WARNING cairn.deploy.restore_choice: Job 1fee resumes from checkpoint 26 at "
        "file:///c/1fee/chk-26.\n"
    )
    assert resumed_checkpoint(log) == 26
    assert resumed_checkpoint("WARNING ...: Job 'x' starts fresh: no checkpoint.") is None


def _landed(index: int, at: float, kind: str = "before-commit") -> KillOutcome:
    kill = DriverKill(index, kind, 1, "totals -> Sink")
    return KillOutcome(kill, 2 * index, f"{kind} of totals#0 (checkpoint {index})", at, None, 3)


def test_the_kill_just_before_a_difference_is_the_last_that_landed_before_its_commit() -> None:
    outcomes = [_landed(0, 10.0), _landed(1, 20.0), KillOutcome(DriverKill(2, "metadata", 1))]
    extra = Difference("o", "duplicated", "a,1", Record("a,1", 15.0, "part-0:3"))
    before = kill_before(extra, outcomes)
    assert before is not None and before.kill.index == 0
    missing = Difference("o", "missing", "b,1", None)
    last = kill_before(missing, outcomes)
    assert last is not None and last.kill.index == 1  # the unlanded one never counts
    early = Difference("o", "extra", None, Record("z,1", 5.0, "part-0:1"))
    assert kill_before(early, outcomes) is None


def test_the_report_names_each_kill_landed_or_not_and_the_one_before_a_difference() -> None:
    not_landed = KillOutcome(DriverKill(1, "metadata", 4), 9, why=why_not_landed(0, None))
    outcomes = [_landed(0, 10.0), not_landed]
    lines = driver_kill_lines(outcomes, 2)
    assert (
        lines[0] == "  driver kills: 1 of 2 landed, each followed by a new driver of the same run"
    )
    assert lines[1] == (
        "  landed driver kill #0 after checkpoint 1 completed, before the sink committed it "
        "('totals -> Sink'): before-commit of totals#0 (checkpoint 0); the next driver "
        "resumed from checkpoint 3"
    )
    assert lines[2].startswith("  did not land: driver kill #1 during checkpoint 13: ")
    assert lines[2].endswith(
        ": the job ended before it (give it more input or a shorter --checkpoint-interval)"
    )
    diff = Difference("o", "duplicated", "a,1", Record("a,1", 11.0, "part-0:3"))
    with_diff = driver_kill_lines(outcomes, 2, [diff])
    assert with_diff[1].startswith("  driver kill just before: driver kill #0 after checkpoint 1")
    assert with_diff[2:] == lines[1:]
    fresh = KillOutcome(DriverKill(0, "metadata", 1), 0, "driver-metadata (checkpoint 1)", 1.0)
    assert driver_kill_lines([fresh], 1)[1].endswith(
        "; the next driver started fresh (no completed checkpoint)"
    )


def test_why_a_kill_did_not_land() -> None:
    assert why_not_landed(0, None, "JobExecutionException: x") == (
        "the job failed before it: JobExecutionException: x"
    )
    assert why_not_landed(0, None).startswith("the job ended before it")
    assert why_not_landed(None, None) == "the driver ran out of --minutes first"
    assert why_not_landed(-signal.SIGKILL, None).startswith("the driver was SIGKILLed by some")
    assert why_not_landed(1, "after-commit of x#0 (checkpoint 2)") == (
        "the driver exited with 1 (its marker says 'after-commit of x#0 (checkpoint 2)')"
    )


def test_a_new_driver_numbers_above_every_checkpoint_directory_and_the_runs_record(
    tmp_path: Path,
) -> None:
    assert checkpoints_numbered(str(tmp_path / "none")) == 0
    job = tmp_path / ("0" * 32)
    (job / "chk-3").mkdir(parents=True)
    (job / "chk-3" / "_metadata").write_bytes(b"x")
    (job / "chk-5").mkdir()  # in progress when the driver died: numbered above too
    assert checkpoints_numbered(str(tmp_path)) == 5
    # A run that started at 9 and was lost before it completed one: above 8 too.
    record = start_record(JobId("0" * 32), CheckpointId(9), None, "test", "run-1")
    write_run_status(str(job), record)
    assert checkpoints_numbered(str(tmp_path)) == max(5, 9 - 1)
