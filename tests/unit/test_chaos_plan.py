"""The fault campaign's schedule replays from its seed, its internal faults are valid fault
specs, its verdict counts lost and duplicated records per source split, and its load (the
rate from the measured maximum, the records/s held) comes from the committed samples."""

from __future__ import annotations

import random
import threading
from typing import Any

import numpy as np
import pytest
from bench.chaos_faults import _job_directory
from bench.chaos_gates import RunGates, StartGate
from bench.chaos_load import (
    committed_lines,
    disturbed_windows,
    held_rate,
    steady_rate,
    steady_windows,
    target_rate,
)
from bench.chaos_plan import (
    EXTERNAL_KINDS,
    INTERNAL_PHASE,
    RunVerdict,
    internal_faults,
    load_table,
    percentile,
    plan_external,
    prefix_problems,
    report,
)
from bench.chaos_verify import order_violations, parse, problems

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


def test_the_target_is_the_load_of_the_measured_maximum_and_bad_loads_are_refused() -> None:
    assert target_rate(3000.0, 0.5) == 1500.0
    assert target_rate(3000.0, 1.0) == 3000.0
    for load in (0.0, -0.5, 1.01):
        with pytest.raises(ValueError, match="--load must be in"):
            target_rate(3000.0, load)
    with pytest.raises(ValueError, match="measured maximum"):
        target_rate(0.0, 0.5)


def test_the_held_rate_counts_committed_records_between_the_first_and_last_sample() -> None:
    # Commits land once per checkpoint: lumpy samples, a steady rate between their ends.
    samples = [(0.0, 0), (1.9, 0), (2.1, 400), (4.1, 800), (6.0, 800), (6.1, 1200)]
    assert held_rate(samples, 2.0, 6.5) == pytest.approx(800 / 4.0)
    assert held_rate(samples, 0.0, 1.0) is None  # a single sample: no rate
    assert held_rate([], 0.0, 10.0) is None
    assert held_rate([(1.0, 5), (1.0, 9)], 0.0, 2.0) is None  # no time between them


def test_a_fault_disturbs_until_the_first_checkpoint_after_its_heal_and_a_settle() -> None:
    completions = [1.0, 2.0, 3.0, 9.0, 10.0]
    windows = disturbed_windows([(3.5, 6.0), (20.0, 25.0)], completions, settle_s=2.0)
    assert windows == [(3.5, 11.0), (20.0, float("inf"))]  # never recovered: lasts on
    assert steady_windows(windows, 0.0, 30.0) == [(0.0, 3.5), (11.0, 20.0)]
    assert steady_windows([], 5.0, 9.0) == [(5.0, 9.0)]
    assert steady_windows([(0.0, 50.0)], 5.0, 9.0) == []


def test_the_steady_rate_leaves_out_faults_recoveries_and_short_windows() -> None:
    # 100 records/s, except while a fault is in effect: nothing, then a burst on recovery.
    samples = [(float(t), 100 * t) for t in range(0, 31)]
    samples += [(float(t), 3000 + 50 * (t - 30)) for t in range(31, 41)]  # the outage
    samples += [(float(t), 10_000 + 100 * (t - 41)) for t in range(41, 71)]  # the burst, then
    rate, seconds = steady_rate(samples, [(30.0, 42.0)], 0.0, 70.0)
    assert rate == pytest.approx(100.0)
    assert seconds == 30.0 + 28.0  # [0, 30] and [42, 70]
    # Over the whole phase the outage and the burst count: the held rate is not the steady.
    assert held_rate(samples, 0.0, 70.0) == pytest.approx((10_000 + 2_900) / 70.0)
    # Windows shorter than the minimum are left out: none left here.
    assert steady_rate(samples, [(8.0, 62.0)], 0.0, 70.0) == (None, 0.0)


class _Files:
    """An fsspec-like filesystem of committed and in-progress files, counting its reads."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.reads = 0

    def invalidate_cache(self) -> None:
        pass

    def find(self, base: str, detail: bool = False) -> dict[str, Any]:
        return {p: {"size": len(d)} for p, d in self.files.items() if p.startswith(base)}

    def cat_file(self, path: str) -> bytes:
        self.reads += 1
        return self.files[path]


def test_committed_lines_skip_hidden_files_and_read_each_committed_file_once() -> None:
    fs = _Files()
    known: dict[str, tuple[int, int]] = {}
    fs.files["b/out/2026/part-0-0"] = b"k00000,1,1\nk00000,2,3\n"
    fs.files["b/out/2026/.part-1-0.inprogress"] = b"k00001,1,1\n"
    fs.files["b/out/_pending/part-1-0"] = b"k00001,1,1\n"
    assert committed_lines(fs, "b/out", known) == 2
    fs.files["b/out/2026/part-1-0"] = b"k00001,1,1\n"
    assert committed_lines(fs, "b/out", known) == 3
    assert fs.reads == 2  # the first file was not read again
    fs.files["b/out/2026/part-1-0"] = b"k00001,1,1\nk00001,2,3\n"  # its size changed
    assert committed_lines(fs, "b/out", known) == 4


def test_the_report_has_a_load_row_per_run() -> None:
    paced = RunVerdict("aligned-rocksdb", 1002, 500, max_rate=3210.0, target_rate=1605.0)
    paced.held_rate, paced.steady_rate, paced.steady_s = 1100.0, 1598.0, 64.0
    fixed = RunVerdict("unaligned-hashmap", 1001, 50, target_rate=300.0)  # --rate, no max
    rows = load_table([paced, fixed])
    assert rows[2] == ("| aligned-rocksdb | 3,210 | 1,605 | 1,598 (64 s) | 1,100 | 0.50 | 0.34 |")
    assert rows[3] == "| unaligned-hashmap | - | 300 | - | - | - | - |"
    assert rows[2] in report([paced, fixed], "python -m bench.chaos").splitlines()


def test_a_run_that_gives_up_releases_the_runs_waiting_at_its_gates() -> None:
    shared = {name: StartGate(2) for name in ("warm", "measured", "started")}
    passed: list[str] = []

    def waiting_run() -> None:
        gates = RunGates(shared)
        for name in ("warm", "measured", "started"):
            gates.meet(name)
            passed.append(name)

    thread = threading.Thread(target=waiting_run, daemon=True)
    thread.start()
    quitter = RunGates(shared)
    quitter.meet("warm")
    quitter.leave()  # broke while measuring: arrives at "measured" and "started" once each
    quitter.leave()
    thread.join(10)
    assert passed == ["warm", "measured", "started"]
    assert not thread.is_alive()


def test_the_columnar_verdict_agrees_with_the_line_by_line_one() -> None:
    # At load a run commits millions of records: the verdict reads them as columns, and
    # must count exactly what prefix_problems counts, gaps, duplicates and bad sums included.
    rng = random.Random(11)
    for _ in range(30):
        keys = rng.randrange(1, 6)
        lines = []
        for index in rng.sample(range(200), rng.randrange(0, 120)):
            key, seq = index % keys, index // keys + 1
            total = seq * (seq + 1) // 2 + (rng.random() < 0.05)  # a few bad sums
            lines += [f"k{key:05d},{seq},{total}"] * rng.choice([1, 1, 1, 2])
        lines += rng.choice([[], ["!late k00000"], [f"k{keys:05d},1,1"]])  # unexpected ones
        rng.shuffle(lines)
        cut = rng.randrange(len(lines) + 1)
        chunks = ["".join(f"{x}\n" for x in part).encode() for part in (lines[:cut], lines[cut:])]
        assert problems(*parse(chunks), keys) == prefix_problems(lines, keys)


def test_order_violations_count_keys_out_of_insertion_order() -> None:
    keys = np.array([0, 1, 0, 1, 0])
    assert order_violations(keys, np.array([1, 1, 2, 2, 3]), np.arange(5)) == 0
    # Key 0's rows 2 and 3 swapped in id order; key 1 starts at 2.
    assert order_violations(keys, np.array([1, 2, 3, 3, 2]), np.arange(5)) == 2
