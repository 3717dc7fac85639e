"""The Table API benchmark's pure parts: every system's input is the same events (Cairn's
generator, PyFlink's SQL and Spark's SQL of event ``i``), the expected figures and their
check, throughput from source progress, and the driver's run plan and summary. No engine
runs here except in the ``slow`` smoke test at the end (Cairn in-process, 20,000 events)."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench import table as driver
from bench.table_jobs import TableEvents

# bench/peers' standard-library modules, on sys.path once bench.table is imported
tc = importlib.import_module("table_common")
wc = importlib.import_module("window_common")
key_of = importlib.import_module("common").key_of
key_table = importlib.import_module("common").key_table

ROOT = Path(__file__).resolve().parents[2]
INDICES = [0, 1, 2, 7, 999, 12_345, 1_000_003, 2_000_000 - 1, (1 << 31) - 1]


def _eval_flink_sql(expr: str, i: int) -> int:
    """Evaluate the integer SQL of ``table_common`` as Flink does: ``/`` of two BIGINTs is an
    integer division, ``MOD`` the remainder; every intermediate value must fit a BIGINT."""
    python = re.sub(r"\bMOD\(", "_mod(", expr).replace(" / ", " // ")

    def _mod(a: int, b: int) -> int:
        assert -(1 << 63) <= a < (1 << 63), "BIGINT overflow"
        return a % b

    value = eval(python, {"_mod": _mod, "i": i})  # the expression is ours, not input
    assert -(1 << 63) <= value < (1 << 63)
    return int(value)


@pytest.mark.parametrize("keys", [3, 100, 10_000, 1_000_000])
def test_flink_sqls_word_rank_is_the_generators_key(keys: int) -> None:
    for i in INDICES:
        rank = _eval_flink_sql(tc.rank_sql("i", keys), i)
        width = max(6, len(str(keys - 1)))
        assert f"k{rank:0{width}d}" == key_of(i, keys)
    products = [i * v for i in INDICES for v in (tc._G_HIGH, tc._G_LOW)]
    assert max(products) < 1 << 63  # the SQL's products fit a BIGINT below 2**31 events


def test_flink_sqls_timestamp_is_the_events() -> None:
    keys = key_table(50)
    for eps in (1000, 200_000):
        for i in INDICES:
            assert _eval_flink_sql(tc.ts_sql("i", eps), i) == wc.event(i, keys, eps)[1]


def test_spark_sql_is_the_window_workloads_event() -> None:
    """Spark's event columns are the window workload's (verified there against Spark)."""
    spark_window = pytest.importorskip("spark_window", exc_type=ImportError)
    columns = spark_window.event_columns(1000, 100, 5000)
    assert any("AS key" in c for c in columns)
    assert any("AS ts" in c for c in columns)
    assert any("AS v" in c for c in columns)


def test_cairns_generator_gives_the_shared_events_and_marks_its_progress(tmp_path: Path) -> None:
    gen = TableEvents(100, 5000, str(tmp_path), records=10_000)
    batch = gen.generate_batch(range(0, 6000, 2))
    assert batch == [wc.event(i, key_table(100), 5000) for i in range(0, 6000, 2)]
    gen.generate_batch(range(6000, 10_000, 2))  # the subtask's last batch: always marked
    marks = tc.read_marks(str(tmp_path))
    assert len(marks) == 1 and marks[0][-1][1] == 5000
    assert TableEvents.__getstate__(gen)["_marks"] is None  # not shipped to workers


def test_every_system_runs_the_same_query_with_the_udf_on_the_key() -> None:
    pyflink_table = pytest.importorskip("pyflink_table", exc_type=ImportError)
    for workload in tc.WORKLOADS:
        plain = pyflink_table.query(workload, False)
        with_udf = pyflink_table.query(workload, True)
        assert "normalize_word(word)" not in plain
        assert with_udf.count("normalize_word(word)") == 2  # selected and grouped by
    assert "COUNT(*)" in pyflink_table.query("table-wordcount", False)
    assert "TUMBLE" in pyflink_table.query("table-window", False)


def test_expected_figures_do_not_depend_on_the_udf() -> None:
    want = tc.expected("table-wordcount", 5000, 40, 1000)
    counts: dict[str, int] = {}
    for i in range(5000):
        w = tc.normalize(key_of(i, 40))
        counts[w] = counts.get(w, 0) + 1
    tally = tc.WordCountTally()
    tally.update(counts.items())
    assert tally.figures() == want
    assert want["events"] == 5000 and want["results"] == 40

    rows: dict[tuple[str, int], list[int]] = {}
    keys = key_table(40)
    for i in range(5000):
        word, ts, v = wc.event(i, keys, 1000)
        start = ts - (ts - wc.T0_MS) % wc.WINDOW_MS
        slot = rows.setdefault((tc.normalize(word), start), [0, 0])
        slot[0] += 1
        slot[1] += v
    got = tc.window_figures((w, s, c, t) for (w, s), (c, t) in rows.items())
    assert got == tc.expected("table-window", 5000, 40, 1000)


def test_a_changed_figure_fails_verification_and_drops_the_rate() -> None:
    want = tc.expected("table-wordcount", 1000, 10, 1000)
    good = {f"result_{k}": v for k, v in want.items()} | {"steady_records_per_s": 10}
    tc.verify(good, want)
    assert good["verified"] is True and good["steady_records_per_s"] == 10
    bad = dict(good, result_checksum=want["checksum"] + 1)
    bad.pop("verified")
    tc.verify(bad, want)
    assert bad["verified"] is False and bad["steady_records_per_s"] is None
    assert "checksum" in bad["note"]
    silent = {"steady_records_per_s": 10}
    tc.verify(silent, want)
    assert "verified" not in silent  # a run without figures is left for the driver


def test_verify_all_carries_the_first_repetitions_verdict() -> None:
    want = {"table-wordcount": {"results": 1, "events": 2, "checksum": 3}}
    runs: list[dict[str, Any]] = [
        {"system": s, "workload": "table-wordcount", "udf": True, "steady_records_per_s": 5}
        for s in ("cairn", "cairn", "pyflink", "pyflink")
    ]
    runs[0].update(result_results=1, result_events=2, result_checksum=3)
    runs[2].update(result_results=1, result_events=2, result_checksum=4)
    driver.verify_all(runs, want)
    assert [r["verified"] for r in runs] == [True, True, False, False]
    assert runs[3]["steady_records_per_s"] is None


def test_progress_curves_merge_and_give_the_steady_rate() -> None:
    a = [(1.0, 100), (2.0, 300), (3.0, 500)]
    b = [(1.5, 100), (2.5, 300), (3.5, 500)]
    curve = tc.merge_marks([a, b])
    assert curve[-1] == (3.5, 1000)
    assert [n for _, n in curve] == sorted(n for _, n in curve)
    # 10 % (100 events) at 1.0 s; 90 % (900) between 3.0 s (800) and 3.5 s (1000): 3.25 s
    assert tc.steady_rate(curve, 1000) == pytest.approx(800 / (3.25 - 1.0))
    assert tc.steady_rate([(1.0, 1000)], 1000) is None  # one sample: no rate


def test_runs_alternate_and_summary_gives_ratios_against_cairn() -> None:
    plan = driver.plan_runs(["cairn", "pyflink", "spark"], list(tc.WORKLOADS), [False, True], 2)
    assert len(plan) == 2 * 2 * 2 * 3
    assert [s for r, w, u, s in plan if r == 1][:3] == ["spark", "pyflink", "cairn"]
    rows = driver.summarize(
        [
            {"system": "cairn", "workload": "w", "udf": False, "steady_records_per_s": 200,
             "elapsed_s": 1, "latency_p99_ms": 4.0},
            {"system": "spark", "workload": "w", "udf": False, "steady_records_per_s": 100,
             "elapsed_s": 1, "verified": True},
            {"system": "spark", "workload": "w", "udf": False, "steady_records_per_s": 300,
             "elapsed_s": 1, "verified": True},
            {"system": "pyflink", "workload": "w", "udf": False, "error": "boom"},
        ]
    )  # fmt: skip
    by = {r["system"]: r for r in rows}
    assert by["spark"]["events_per_s"] == 200 and by["spark"]["cairn_ratio"] == 1.0
    assert by["cairn"]["latency_p99_ms"] == 4.0
    assert by["pyflink"]["events_per_s"] is None and by["pyflink"]["errors"] == ["boom"]
    assert "failed: boom" in driver.text_table(rows)
    meta = {"command": "x", "date": "d", "repeat": 2, "events": 10, "keys": 2,
            "events_per_second": 1000}  # fmt: skip
    section = "\n".join(driver.table_section(meta, []))
    assert section.startswith("### Table API")


def test_commands_name_each_systems_script() -> None:
    cairn = driver.command("cairn", "table-wordcount", True, 10, 3, 1000, True, "inprocess")
    assert cairn[1:3] == ["-m", "bench.table_jobs"] and "--verify" in cairn
    peer = driver.command("spark", "table-window", False, 10, 3, 1000, False)
    assert peer[1].endswith("run_peer.py") and peer[peer.index("--udf") + 1] == "off"


@pytest.mark.slow
def test_smoke_cairn_side_of_the_driver_in_process(tmp_path: Path) -> None:
    """``python -m bench.table --systems cairn`` at 20,000 events: every case runs, verifies."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.table",
            "--events",
            "20000",
            "--keys",
            "100",
            "--systems",
            "cairn",
            "--repeat",
            "1",
            "--executor",
            "inprocess",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert len(saved["results"]) == 4
    for result in saved["results"]:
        assert result["verified"] is True, result
        assert result["checkpoints_completed"] is not None
    assert "Cairn / this" in proc.stdout
