"""``cairn chaos --driver-kills`` with ``--rescale`` or ``--upgrade``: where the next driver
life takes a run in segments up, decided from what the run directory holds after a kill
(a stop with savepoint that completed or not, a segment whose job started from it or not),
where the kill landed, what the report says of both; and those facts read from a real run
directory (savepoint directories, a run-status record)."""

from __future__ import annotations

from pathlib import Path

from cairn.checkpoint.run_status import start_record, write_run_status
from cairn.cli.chaos_driver import DriverKill, KillOutcome, driver_kill_lines
from cairn.cli.chaos_driver_segments import (
    Landing,
    SegmentFacts,
    SegmentStart,
    kill_landing,
    landing_text,
    next_driver_text,
    resumed_at,
    savepoint_name,
    savepoint_segment,
    segment_facts,
    segment_name,
    segment_start,
)
from cairn.ids import CheckpointId, JobId

RESCALE = [2, 3, 2]
SP0, SP1 = "file:///w/faults/savepoint-0", "file:///w/faults/savepoint-1.1"


def test_a_run_without_a_completed_stop_takes_up_its_first_segment_as_on_rerun_decides() -> None:
    assert segment_start(SegmentFacts(1)) == SegmentStart(0)
    # A stop of segment 0 began and was cut short: segment 0 again, resumed.
    assert segment_start(SegmentFacts(3, (None, None), (1, 0))) == SegmentStart(0)


def test_a_completed_savepoint_ends_its_segment_whether_or_not_its_job_ended() -> None:
    facts = SegmentFacts(3, (SP0, None), (1, 0))
    assert segment_start(facts) == SegmentStart(1, SP0, SP0)  # restored explicitly
    # Once segment 1's job recorded that it started from savepoint 0 (however the path is
    # spelled), the next life resumes that job: from its own checkpoints, or the savepoint.
    started = SegmentFacts(3, (SP0, None), (1, 0), ("/w/faults/savepoint-0/",))
    assert segment_start(started) == SegmentStart(1, SP0, None)
    # A record of another restore (an earlier segment's) is no start of this one.
    other = SegmentFacts(3, (SP0, None), (1, 0), ("file:///w/faults/savepoint-0.1",))
    assert segment_start(other).restore == SP0


def test_every_stop_completed_leaves_the_last_segment() -> None:
    facts = SegmentFacts(3, (SP0, SP1), (1, 2))
    assert segment_start(facts) == SegmentStart(2, SP1, SP1)
    assert segment_start(SegmentFacts(3, (SP0, SP1), (1, 2), (SP1,))) == SegmentStart(2, SP1)
    # Upgrades: two segments, one stop.
    assert segment_start(SegmentFacts(2, (SP0,), (1,))) == SegmentStart(1, SP0, SP0)


def test_where_a_kill_landed_among_the_segments_and_their_stops() -> None:
    fresh = SegmentFacts(3, (None, None), (0, 0))
    assert kill_landing(fresh, fresh) == Landing(0)
    cut = SegmentFacts(3, (None, None), (1, 0))
    assert kill_landing(fresh, cut) == Landing(0, "cut short")
    # The stop cut short in an earlier life is no stop of this one.
    assert kill_landing(cut, cut) == Landing(0)
    saved = SegmentFacts(3, (SP0, None), (1, 0))
    assert kill_landing(fresh, saved) == Landing(0, "completed")
    in_one = SegmentFacts(3, (SP0, None), (1, 0), (SP0,))
    assert kill_landing(fresh, in_one) == Landing(1)
    assert kill_landing(saved, in_one) == Landing(1)
    # A life that began segment 1 from savepoint 0 and died before its job recorded it.
    assert kill_landing(saved, saved) == Landing(1)
    done = SegmentFacts(3, (SP0, SP1), (1, 1), (SP0,))
    assert kill_landing(in_one, done) == Landing(1, "completed")


def test_each_stop_of_a_segment_gets_a_directory_of_its_own() -> None:
    assert savepoint_name(1, ["savepoint-0", "checkpoints"]) == "savepoint-1"
    assert savepoint_name(1, ["savepoint-1"]) == "savepoint-1.1"
    assert savepoint_name(1, ["savepoint-1", "savepoint-1.1", "savepoint-1.3"]) == "savepoint-1.2"
    assert [savepoint_segment(p) for p in (SP0, SP1, "/w/chk-3", "/w/savepoint-x")] == [
        0,
        1,
        None,
        None,
    ]


def test_the_report_says_where_each_kill_landed_and_what_the_next_driver_did() -> None:
    assert segment_name(2, RESCALE, []) == "the third of 3 segments (p=2)"
    assert landing_text(Landing(1), RESCALE, []) == "in the second of 3 segments (p=3)"
    assert landing_text(Landing(0, "cut short"), RESCALE, []) == (
        "in the first of 3 segments (p=2), during its stop with savepoint 1, cut short"
    )
    upgrade = ["examples/chaos_orders.py", "examples/chaos_orders_v2.py"]
    assert landing_text(Landing(0, "completed"), [None, None], upgrade) == (
        "in the first of 2 segments (chaos_orders.py), during its stop with savepoint 1, "
        "which completed"
    )
    assert next_driver_text(SegmentStart(1, SP0, SP0), None, [None, None], upgrade) == (
        "the next driver restored the second of 2 segments (chaos_orders_v2.py) from savepoint 1"
    )
    log = "WARNING x: Job 1f resumes from checkpoint 12 at file:///w/faults/checkpoints/j/chk-12.\n"
    assert resumed_at(log) == (12, "file:///w/faults/checkpoints/j/chk-12")
    assert next_driver_text(SegmentStart(2, SP1), resumed_at(log), RESCALE, []) == (
        "the next driver resumed the third of 3 segments (p=2) from checkpoint 12"
    )
    on_savepoint = (9, SP1)
    assert next_driver_text(SegmentStart(2, SP1), on_savepoint, RESCALE, []) == (
        "the next driver resumed the third of 3 segments (p=2) from savepoint 2 (no checkpoint "
        "of its own)"
    )
    assert next_driver_text(SegmentStart(0), None, RESCALE, []) == (
        "the next driver started the first of 3 segments (p=2) fresh (no completed checkpoint)"
    )
    kill = DriverKill(0, "completed", 3)
    outcome = KillOutcome(
        kill,
        0,
        "after-commit of orders#0 (checkpoint 3)",
        1.0,
        resumed_from=None,
        segment=landing_text(Landing(0, "completed"), RESCALE, []),
        next_step=next_driver_text(SegmentStart(1, SP0, SP0), None, RESCALE, []),
    )
    assert driver_kill_lines([outcome], 1)[1] == (
        "  landed driver kill #0 after checkpoint 3 completed and a subtask committed it: "
        "after-commit of orders#0 (checkpoint 3), in the first of 3 segments (p=2), during its "
        "stop with savepoint 1, which completed; the next driver restored the second of 3 "
        "segments (p=3) from savepoint 1"
    )


def test_the_facts_are_read_from_the_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "faults"
    assert segment_facts(str(run), 3) == SegmentFacts(3, (None, None), (0, 0))
    (run / "savepoint-0").mkdir(parents=True)  # a stop cut short: state copied, no _metadata
    (run / "savepoint-0" / "op-state").write_bytes(b"x")
    assert segment_facts(str(run), 3) == SegmentFacts(3, (None, None), (1, 0))
    (run / "savepoint-0.1").mkdir()
    (run / "savepoint-0.1" / "_metadata").write_bytes(b"x")
    done = f"file://{run}/savepoint-0.1"
    assert segment_facts(str(run), 3) == SegmentFacts(3, (done, None), (2, 0))
    job = run / "checkpoints" / ("0" * 32)
    job.mkdir(parents=True)
    record = start_record(JobId("0" * 32), CheckpointId(4), done, "test", "run-1")
    write_run_status(str(job), record)
    facts = segment_facts(str(run), 3)
    assert facts.restored_from == (done,)
    assert segment_start(facts) == SegmentStart(1, done, None)
    assert segment_facts(str(run), 1) == SegmentFacts(1, (), (), (done,))
