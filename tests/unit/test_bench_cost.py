"""The cost-at-a-rate benchmark's pure parts (``bench.cost_measure``, ``bench.cost_curve``,
``bench/peers/cost_common.py``): CPU split by role from fake process trees, the sink's lines
read into a rate and latencies, the table, the pacing schedule, the run order. No job runs
here (the runs are checked by hand: see bench/README.md, "Cost at a rate")."""

from __future__ import annotations

import doctest
import importlib
import os
from pathlib import Path

import pytest
from bench import cost_curve, cost_job, cost_measure
from bench.cost_measure import (
    Proc,
    WindowFigures,
    cost_figures,
    cpu_by_role,
    markdown_table,
    read_window,
    window_figures,
)

cost_common = importlib.import_module("cost_common")  # bench/peers, on sys.path via cost_curve


@pytest.mark.parametrize("module", [cost_measure, cost_curve, cost_common])
def test_doctests(module: object) -> None:
    failed, tried = doctest.testmod(module)  # type: ignore[arg-type]
    assert tried > 0 and failed == 0


def _procs(*rows: tuple[int, int, str, float, float]) -> dict[tuple[int, float], Proc]:
    return {(pid, ct): Proc(pid, ppid, name, ct, cpu) for pid, ppid, name, ct, cpu in rows}


def test_cairn_tree_splits_into_driver_jvm_and_spark_python_workers() -> None:
    # driver python -> java -> (bash wrapper, pyspark daemon -> two workers)
    start = _procs(
        (10, 1, "python", 1.0, 5.0),
        (11, 10, "java", 2.0, 30.0),
        (12, 11, "bash", 2.5, 0.1),
        (13, 11, "python", 3.0, 1.0),
        (14, 13, "python", 3.5, 20.0),
        (15, 13, "python3.11", 3.5, 21.0),
    )
    last = _procs(
        (10, 1, "python", 1.0, 5.5),
        (11, 10, "java", 2.0, 31.0),
        (12, 11, "bash", 2.5, 0.1),
        (13, 11, "python", 3.0, 1.25),
        (14, 13, "python", 3.5, 24.0),
        (15, 13, "python3.11", 3.5, 25.0),
        (16, 13, "python", 9.0, 0.75),  # a worker forked inside the window: all of it counts
    )
    assert cpu_by_role(start, last, 10, "cairn") == {
        "workers": 0.25 + 4.0 + 4.0 + 0.75,
        "driver": 0.5,
        "jvm": 1.0,
        "other": 0.0,  # the shell wrapper: there, idle
    }


def test_a_reused_pid_is_another_process_and_a_vanished_one_keeps_its_last_sample() -> None:
    start = _procs((10, 1, "python", 1.0, 5.0), (11, 10, "java", 2.0, 30.0))
    # pid 11 ended and was reused by a new Java process; only its own CPU counts.
    last = _procs(
        (10, 1, "python", 1.0, 6.0), (11, 10, "java", 2.0, 33.0), (11, 10, "java", 8.0, 0.5)
    )
    assert cpu_by_role(start, last, 10, "pyflink-100ms")["jvm"] == pytest.approx(3.5)


def test_pyflink_is_driver_and_jvm_and_bytewax_is_all_workers() -> None:
    start = _procs((10, 1, "python", 1.0, 1.0), (11, 10, "java", 2.0, 10.0))
    last = _procs((10, 1, "python", 1.0, 1.5), (11, 10, "java", 2.0, 14.0))
    flink = cpu_by_role(start, last, 10, "pyflink-1ms")
    assert flink == {"driver": 0.5, "jvm": 4.0}  # thread mode: no Python worker processes
    one = _procs((20, 1, "python", 1.0, 1.0))
    later = _procs((20, 1, "python", 1.0, 3.0), (21, 20, "python", 5.0, 1.0))  # -p mode child
    assert cpu_by_role(one, later, 20, "bytewax") == {"workers": 3.0}


def test_window_counts_arrivals_inside_it_and_skips_torn_lines() -> None:
    lines = [
        "k000001,1,1000000000,1000500000",  # arrived before the window
        "k000002,1,1999000000,2000000000",  # at its start: in, 1 ms
        "k000003,7,2500000000,2502000000",  # in, 2 ms
        "k000004,2,2900000000,3000000000",  # at its end: out
        "k000005,1,29000",  # torn by a kill
    ]
    w = window_figures(lines, 2_000_000_000, 3_000_000_000)
    assert (w.records, dict(w.latency_us), w.lines, w.torn) == (2, {1000: 1, 2000: 1}, 5, 1)


def test_read_window_reads_visible_files_only(tmp_path: Path) -> None:
    line = cost_job.stamp_arrival(("k000001", 3, 5_000_000_000)).rsplit(",", 1)[0]
    visible = tmp_path / "part-u-0-1"
    visible.write_text(f"{line},5000001000\n")
    hidden = tmp_path / ".part-u-0-2.inprogress.job.0"
    hidden.write_text(f"{line},5000002000\n")
    w = read_window(str(tmp_path), 0, 10**19)
    assert (w.records, dict(w.latency_us)) == (1, {1: 1})
    # A file last written before the window began cannot hold a line of it: not read.
    os.utime(visible, ns=(10**9, 10**9))
    assert read_window(str(tmp_path), 2 * 10**9, 10**19).lines == 0


def test_stamp_arrival_is_the_line_the_window_reads() -> None:
    key, count, created, arrival = cost_job.stamp_arrival(("k000042", 9, 123)).split(",")
    assert (key, count, created) == ("k000042", "9", "123") and int(arrival) > 123


def test_committed_past_waits_for_every_writer_active_in_the_window(tmp_path: Path) -> None:
    def touch(name: str, at_s: int) -> None:
        (tmp_path / name).write_text("x\n")
        os.utime(tmp_path / name, ns=(at_s * 10**9, at_s * 10**9))

    touch("part-a-0-0", 5)  # an old writer, idle in the window: ignored
    touch("part-b-0-1", 12)
    touch("part-b-1-1", 14)
    touch(".part-b-0-2.inprogress.j.0", 30)  # not committed
    assert not cost_curve.committed_past(tmp_path, 10 * 10**9, 20 * 10**9)
    touch("part-b-0-2", 21)
    assert not cost_curve.committed_past(tmp_path, 10 * 10**9, 20 * 10**9)  # subtask 1 not yet
    touch("part-b-1-2", 22)
    assert cost_curve.committed_past(tmp_path, 10 * 10**9, 20 * 10**9)
    assert cost_curve.first_output(tmp_path) == 5.0


def test_a_run_short_of_90_percent_of_its_rate_is_saturated() -> None:
    w = WindowFigures(records=8_900, latency_us={1000: 8_900}, lines=8_900, torn=0)
    cpu = {"workers": 2.0}
    figures = cost_figures(cpu, 1.0, w, 10_000.0)
    assert figures["saturated"] and figures["achieved_per_s"] == 8_900.0
    assert figures["us_per_record"] == pytest.approx(2e6 / 8_900, abs=0.1)
    assert figures["jvm_cores"] is None  # no JVM: not a zero
    assert not cost_figures(cpu, 1.0, w, 9_000.0)["saturated"]
    empty = cost_figures(cpu, 1.0, WindowFigures(0, {}, 0, 0), 10.0)
    assert empty["us_per_record"] is None and empty["latency_p99_ms"] is None


def test_table_has_a_row_per_rate_and_system_with_medians_and_notes() -> None:
    def run(system: str, rate: int, cores: float, saturated: bool = False) -> dict[str, object]:
        return {"system": system, "rate": rate, "cores": cores, "saturated": saturated}

    results = [
        run("cairn", 10_000, 0.6),
        run("cairn", 10_000, 0.8),
        run("cairn", 10_000, 0.7),
        run("bytewax", 10_000, 1.9, saturated=True),
        run("cairn", 10, 0.05),
        {"system": "pyflink-1ms", "rate": 10, "error": "no committed output after 240 s"},
    ]
    lines = markdown_table(results, ["cairn", "pyflink-1ms", "bytewax"])
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    total = header.index("total cores")
    assert [(r[0], r[1]) for r in rows] == [
        ("10", "cairn"),
        ("10", "pyflink-1ms"),
        ("10,000", "cairn"),
        ("10,000", "bytewax"),
    ]
    assert rows[2][total] == "0.700"  # the median of three repeats
    assert rows[3][-1] == "saturated"
    assert rows[1][-1] == "failed: no committed output after 240 s"


def test_pacer_never_releases_a_record_before_it_is_due() -> None:
    pacer = cost_common.Pacer(50_000.0, start_ns=0)  # 20 µs apart, batches of 50 (1 ms)
    released = 0
    for now_us in range(0, 20_000, 7):
        now = now_us * 1000
        first = pacer.next
        granted = pacer.grant(now, limit=1 << 20)
        released += granted
        if granted:
            assert granted >= 50
            assert pacer.due_ns(first + granted - 1) <= now  # the batch's last one is due
            assert pacer.due_ns(first + granted) > now  # and nothing later leaves
        else:
            assert pacer.ready_ns() > now
    assert abs(released - 1000) <= 50  # 20 ms at 50,000/s
    behind = cost_common.Pacer(1000.0, start_ns=0)
    assert behind.grant(10 * 10**9, limit=300) == 300  # far behind: as much as allowed
    assert behind.due_ns(300) == 301 * 10**6  # the schedule stays the schedule


def test_systems_expand_and_unknown_ones_are_refused() -> None:
    assert cost_curve.expand_systems(["pyflink"], [100]) == ["pyflink-100ms"]
    with pytest.raises(SystemExit, match="unknown system 'flink'"):
        cost_curve.expand_systems(["flink"], [100])


def test_the_floor_runs_both_processes_and_times_their_records() -> None:
    """``bench.cost_floor``: two processes hold a low rate, and every record written in the
    window is timed (its latency is positive and below a second)."""
    from bench import cost_floor

    figures = cost_floor.run(rate=400, tick_ms=2.0, seconds=1.5, warmup=0.5)
    assert figures["achieved"] == pytest.approx(400, rel=0.2), figures
    assert figures["records"] == pytest.approx(600, rel=0.2), figures
    assert 0 < figures["p50_ms"] < 1000, figures
    assert figures["cores"] > 0, figures
