"""Smoke test of the benchmarks: a tiny version of every Cairn workload, run through the
runner's own functions on local Spark, then rendered into a RESULTS.md.

Invariant: no timing assertions (CI machines are noisy); only that each workload runs, reports
every shared field, and that its figures are internally consistent (counts add up, p50 <= p99,
a killed worker is recovered from), so the benchmarks never rot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench import RESULT_FIELDS
from bench.__main__ import QUICK as QUICK_SIZES
from bench.__main__ import calibrated_rate, command, plan_cases
from bench.measure import Progress, throughput_dip
from bench.peers.run_peer import last_json_line
from bench.report import BEGIN, END, render_results, update_results_file, write_chart
from bench.saved_runs import group_results
from bench.workloads import RECOVERY_MARK_EVERY, CairnOptions, run_workload

KEYS = 1_000


def _check_shared(result: dict[str, Any], workload: str, records: int) -> None:
    assert set(RESULT_FIELDS) <= set(result)
    assert result["system"] == "cairn"
    assert result["workload"] == workload
    assert result["records"] == records
    assert result["unsupported"] is None
    assert result["versions"]["cairn"]
    assert 0 < result["startup_s"] <= result["elapsed_s"]
    json.dumps(result)  # what the runner reads back


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One run of each workload (module-scoped: the runner's test renders them all)."""
    opts = CairnOptions(parallelism=2, executor="spark")
    out: dict[str, dict[str, Any]] = {}
    out["keyed-sum/checkpoints-1s"] = run_workload("keyed-sum", 100_000, KEYS, 300, opts=opts)
    out["keyed-sum/no-checkpoints"] = run_workload("keyed-sum", 100_000, KEYS, 0, opts=opts)
    out["overhead"] = run_workload("overhead", 50_000, KEYS, 300, opts=opts)
    out["latency"] = run_workload(
        "latency", 60_000, KEYS, 300, rate=30_000, opts=opts, warmup_s=0.5
    )
    # 6 s of input: the kill waits for two checkpoints after every key was emitted (the S3
    # variant of this run once ended first on CI with less).
    out["recovery"] = run_workload("recovery", 120_000, KEYS, 300, rate=20_000, opts=opts)
    keep = str(tmp_path_factory.mktemp("state-size"))
    out["state-size/keys-20000"] = run_workload(
        "state-size", 40_000, 20_000, 300, opts=CairnOptions(2, "spark", keep_dir=keep)
    )
    return out


@pytest.mark.spark
def test_keyed_sum_with_and_without_checkpoints(results: dict[str, dict[str, Any]]) -> None:
    with_cp, without = results["keyed-sum/checkpoints-1s"], results["keyed-sum/no-checkpoints"]
    for r in (with_cp, without):
        _check_shared(r, "keyed-sum", 100_000)
        assert r["note"] is None, r["note"]  # the sinks counted every record exactly once
        assert r["steady_records_per_s"] > 0
        assert r["restarts"] == 0
    assert with_cp["checkpoints_completed"] >= 1
    assert 0 <= with_cp["checkpoint_p50_ms"] <= with_cp["checkpoint_p99_ms"]
    assert with_cp["state_size_bytes"] > 0
    assert without["checkpoints_completed"] == 0
    assert without["checkpoint_p50_ms"] is None


@pytest.mark.spark
def test_overhead_runs_with_and_without_checkpoints_in_turn(
    results: dict[str, dict[str, Any]],
) -> None:
    r = results["overhead"]
    assert r["note"] is None, r["note"]
    runs = [float(x) for x in r["overhead_runs"].split()]
    assert len(runs) == 4 and all(x > 0 for x in runs)
    assert r["steady_records_per_s"] == round((runs[0] + runs[3]) / 2)
    assert r["no_checkpoint_records_per_s"] == round((runs[1] + runs[2]) / 2)
    expected = 100 * (1 - (runs[0] + runs[3]) / (runs[1] + runs[2]))
    assert abs(r["overhead_pct"] - expected) <= 0.1
    assert r["checkpoints_completed"] >= 1


@pytest.mark.spark
def test_latency_is_measured_at_the_sink(results: dict[str, dict[str, Any]]) -> None:
    r = results["latency"]
    _check_shared(r, "latency", 60_000)
    assert r["rate"] == 30_000
    assert 0 < r["latency_p50_ms"] <= r["latency_p99_ms"] <= r["latency_max_ms"] + 0.1
    assert "records timed" in r["note"]


@pytest.mark.spark
def test_recovery_after_a_killed_worker(results: dict[str, dict[str, Any]]) -> None:
    r = results["recovery"]
    _check_shared(r, "recovery", 120_000)
    assert r["restarts"] >= 1, r["note"]
    assert r["recovery_s"] > 0
    # Replay is at least what the surviving and killed workers did since the checkpoint,
    # up to the sinks' mark granularity (the killed worker's last marks are lost).
    assert r["replayed_records"] > -RECOVERY_MARK_EVERY * 2
    assert r["replayed_records"] < 120_000
    assert "failure detected" in r["note"]


@pytest.mark.spark
def test_state_size_reports_checkpoint_bytes(results: dict[str, dict[str, Any]]) -> None:
    r = results["state-size/keys-20000"]
    _check_shared(r, "state-size", 40_000)
    assert r["keys"] == 20_000
    assert r["checkpoints_completed"] >= 1
    assert r["checkpoint_bytes"] > 0 and r["state_size_bytes"] > 0
    assert r["checkpoint_last_ms"] >= 0


@pytest.mark.spark
def test_savepoints_measures_each_backend_and_format(spark: Any, tmp_path: Path) -> None:
    from bench.savepoints import run

    result = run([2_000], 2, str(tmp_path))
    rows = {(r["backend"], r["format"]): r for r in result["rows"]}
    assert set(rows) == {("hashmap", "canonical"), ("rocksdb", "canonical"), ("rocksdb", "native")}
    canonical = [rows[(b, "canonical")]["savepoint_bytes"] for b in ("hashmap", "rocksdb")]
    assert canonical[0] > 0 and abs(canonical[0] - canonical[1]) < 100  # the same sections
    assert all(r["savepoint_s"] > 0 and r["keys"] == 2_000 for r in rows.values())
    json.dumps(result)


@pytest.mark.spark
def test_runner_renders_results_and_keeps_hand_written_sections(
    results: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    rows = [{**r, "case": case, "repetition": 1} for case, r in results.items()]
    rows.append(
        {
            **results["keyed-sum/checkpoints-1s"],
            "system": "bytewax",
            "case": "keyed-sum/checkpoints-1s",
            "unsupported": "not installed",
            "elapsed_s": None,
        }
    )
    cases = {
        c["case"]: c
        for c in plan_cases(["keyed-sum", "overhead", "latency", "recovery"], QUICK_SIZES, 30_000)
    }
    cases["latency"]["records"] = cases["recovery"]["records"] = 60_000
    cases["state-size/keys-20000"] = {
        "case": "state-size/keys-20000",
        "keys": 20_000,
        "records": 40_000,
    }
    meta = {
        "date": "today",
        "command": "python -m bench --quick",
        "repeat": 1,
        "machine": {"cores": "2"},
        "cases": cases,
    }
    path = tmp_path / "RESULTS.md"
    path.write_text(f"# Mine\n\n{BEGIN}\nold\n{END}\n\n## Optimizations\n\nhand-written\n")
    update_results_file(str(path), render_results(group_results(rows), meta, cases))
    text = path.read_text()
    assert text.startswith("# Mine\n") and text.endswith("## Optimizations\n\nhand-written\n")
    assert "old" not in text
    overhead = results["overhead"]["overhead_pct"]
    assert f"| checkpointing overhead ≤ 10 % (section 1b) | {overhead:.1f} %" in text
    for heading in (
        "### 1. keyed-sum",
        "### 1b. checkpointing overhead",
        "### 2. latency",
        "### 3. recovery",
        "### 4. checkpoint cost vs. state size",
    ):
        assert heading in text
    assert "| Bytewax | 1 s, exactly-once | not run: not installed |" in text
    assert calibrated_rate(rows) == max(
        1000, round(results["keyed-sum/checkpoints-1s"]["steady_records_per_s"] / 2, -3)
    )
    why = write_chart(group_results(rows), str(tmp_path / "chart.png"))
    assert why is None or "matplotlib" in why


def test_runner_commands_and_result_parsing() -> None:
    case = plan_cases(["latency"], QUICK_SIZES, 1234.0)[0]
    case["records"] = 99
    cmd = command("cairn", case, "spark", 600)
    assert cmd[1:3] == ["-m", "bench.workloads"]
    assert cmd[cmd.index("--rate") + 1] == "1234"
    assert "--latency-warmup-s" in cmd
    peer = command("bytewax", case, "spark", 600)
    assert peer[peer.index("--system") + 1] == "bytewax"
    assert last_json_line('noise\n{"a": 1}\n\n') == {"a": 1}
    assert last_json_line("no json at all") is None


def test_progress_and_dip_arithmetic() -> None:
    # Two subtasks at 100 and 50 records/s; the second pauses in [1, 2).
    p = Progress.of(
        [
            [(0.0, 0), (1.0, 100), (2.0, 200), (3.0, 300)],
            [(0.0, 0), (1.0, 50), (2.0, 50), (3.0, 100)],
        ]
    )
    assert p.total == 400
    assert p.first_output == 1.0
    assert p.time_reaching(150) == 1.0
    assert p.time_reaching(200) == pytest.approx(1.5)
    assert p.steady_rate(400, 0.5, 1.0) == pytest.approx(200 / 1.5)
    dip = throughput_dip(
        p, busy=[(1.0, 2.0)], quiet_exclusions=[], start=0.0, end=3.0, window_s=1.0
    )
    assert dip is not None
    assert (dip.busy_rate, dip.quiet_rate) == (100.0, 150.0)
    assert dip.dip_pct == pytest.approx(100 / 3)
    excluded = throughput_dip(
        p, busy=[(1.0, 2.0)], quiet_exclusions=[(0.5, 0.9)], start=0.0, end=3.0, window_s=1.0
    )
    assert excluded is not None and excluded.quiet_windows == 1


def test_bench_doctests() -> None:
    import doctest

    import bench
    import bench.ab
    import bench.cairn_functions
    import bench.measure
    import bench.report
    import bench.report_tables

    modules = (bench, bench.ab, bench.cairn_functions, bench.measure, bench.report)
    for module in (*modules, bench.report_tables):
        failed, _ = doctest.testmod(module)
        assert failed == 0, module.__name__


@pytest.mark.spark
def test_ui_overhead_runs_both_sides_and_the_on_side_really_reads_the_endpoint(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import ui_overhead

    argv = ["--records", "300000", "--keys", str(KEYS), "--repeat", "1", "--poll-s", "0.2"]
    assert ui_overhead.main([*argv, "--work-dir", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["median_off"] > 0 and summary["median_on"] > 0
    assert summary["on_off_ratio"] == pytest.approx(
        summary["median_on"] / summary["median_off"], 1e-3
    )
    # The on side served a client: REST calls and live events (off has no endpoint at all).
    assert summary["ui_requests"] > 0 and summary["ui_events"] > 0
    assert summary["driver_cpu_per_s_on"] > 0 and summary["driver_cpu_per_s_off"] > 0
    assert summary["cpu_s_per_million_on"] > 0 and summary["cpu_s_per_million_off"] > 0


@pytest.mark.spark
def test_window_workload_produces_the_expected_windows(spark: Any) -> None:
    """The Cairn side of the window workload at a tiny size: its results equal the expected
    ones (so ``verify`` marks it), and the window section renders its row and latency."""
    import doctest

    import bench.windows
    import window_common
    from bench.window_report import window_section

    for module in (bench.windows, window_common):
        assert doctest.testmod(module).failed == 0, module.__name__
    case = {**bench.windows.plan_cases(quick=True)[0], "records": 40_000, "keys": 100}
    case["events_per_second"] = 4_000
    case["expected"] = bench.windows.expected_results(case)
    assert case["expected"]["events"] == 40_000
    result = bench.windows.run_cairn(40_000, 100, 4_000, interval_ms=300)
    bench.windows.verify(result, case["expected"])
    assert result["verified"] is True, result.get("note")
    assert result["window_results"] == case["expected"]["results"] > 100  # 10+ windows
    assert result["steady_records_per_s"] > 0
    assert 0 <= result["latency_p50_ms"] <= result["latency_p99_ms"] <= result["latency_max_ms"]
    wrong = {**result, "window_checksum": result["window_checksum"] + 1}
    bench.windows.verify(wrong, case["expected"])
    assert wrong["verified"] is False and wrong["steady_records_per_s"] is None
    text = "\n".join(
        window_section(
            1, {"window": list(group_results([{**result, "case": "window"}]))}, {"window": case}
        )
    )
    assert "| Cairn | yes |" in text
    assert "watermark passing a window's end" in text
