"""The fault campaign's schedule replays from its seed, its internal faults are valid fault
specs, and its verdict counts lost and duplicated records per source split."""

from __future__ import annotations

from bench.chaos import prefix_problems
from bench.chaos_faults import _job_directory
from bench.chaos_plan import (
    EXTERNAL_KINDS,
    INTERNAL_PHASE,
    internal_faults,
    percentile,
    plan_external,
)

from cairn.runtime.faults import parse_faults


def test_a_seed_replays_the_same_schedule_and_other_seeds_differ() -> None:
    first = plan_external(seed=5, count=60)
    assert first == plan_external(seed=5, count=60)
    assert first != plan_external(seed=6, count=60)
    assert {f.kind for f in first} <= set(EXTERNAL_KINDS)
    assert len({f.kind for f in first}) >= 8  # 60 draws reach most kinds


def test_internal_faults_parse_and_leave_every_other_attempt_free() -> None:
    specs = parse_faults(internal_faults(seed=3, marker="/tmp/m", unaligned=True, attempts=41))
    assert [s.attempt for s in specs] == list(range(1, 41, 2))
    assert all(s.marker == "/tmp/m" for s in specs)
    with_driver = parse_faults(
        internal_faults(seed=3, marker="/tmp/m", unaligned=False, driver_metadata=True)
    )
    assert with_driver[-1].point == "driver-metadata"
    assert "replay" not in {s.point for s in with_driver}


def test_the_verdict_sees_losses_and_duplicates_in_each_split() -> None:
    # Two splits: even indices (k00000 with keys=2) and odd ones (k00001).
    good = ["k00000,1,1", "k00001,1,1", "k00000,2,3"]
    assert prefix_problems(good, keys=2)["lost"] == 0
    gap = ["k00000,1,1", "k00000,3,6"]  # index 2 of split 0 missing
    assert prefix_problems(gap, keys=2)["lost"] == 1
    twice = [*good, "k00001,1,1"]
    assert prefix_problems(twice, keys=2)["duplicated"] == 1
    assert prefix_problems(["k00000,2,2"], keys=2)["bad_sums"] == 1
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0


def test_every_fault_point_is_planned_and_replay_fires_at_the_first_replayed_records() -> None:
    # A restore at the campaign's pace brings back tens of in-flight records: a replay
    # fault aimed at 50 or more never fired (62 faults, none of them a replay).
    specs = parse_faults(internal_faults(seed=1, marker="/tmp/m", unaligned=True, attempts=201))
    points = {s.point for s in specs}
    assert points == set(INTERNAL_PHASE) - {"driver-metadata"}
    assert {s.records for s in specs if s.point == "replay"} == {1}
    aligned = parse_faults(internal_faults(seed=1, marker="/tmp/m", unaligned=False))
    assert "replay" not in {s.point for s in aligned}
    assert "alignment" in {s.point for s in aligned}


def test_the_watcher_takes_the_job_directory_not_the_submission_probe() -> None:
    job = "6cdec71569d304fda6e7f52c0ac5262d"
    entries = [
        {"name": "cairn/chk/.cairn-probe-0123456789abcdef0123456789abcdef", "type": "file"},
        {"name": "cairn/chk/shared", "type": "directory"},
        {"name": f"cairn/chk/{job}", "type": "directory"},
    ]
    assert _job_directory(entries) == job
    assert _job_directory(entries[:2]) is None
