"""The Nexmark benchmark's harness: the shared CSV layout and query texts, the verification
(a result differing from the reference is rejected, its figure withheld), the peers' clear
failure without their venvs, and an end-to-end run of the driver for Cairn alone (in-process
executor, 3000 events, q0 and q5) whose results the Python oracle confirms."""

from __future__ import annotations

import copy
import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench import nexmark_bench as driver
from bench import nexmark_data, nexmark_oracle

# bench/peers' standard-library modules, on sys.path once bench.nexmark_bench is imported
nc = importlib.import_module("nexmark_common")
run_peer = importlib.import_module("run_peer")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", [driver, nexmark_data, nc])
def test_doctests(module: object) -> None:
    failed, tried = doctest.testmod(module)  # type: ignore[arg-type]
    assert tried > 0 and failed == 0


def test_every_query_file_gives_its_sink_and_select() -> None:
    for query in nc.QUERIES:
        create, insert = nc.query_statements(query)
        assert f"nexmark_{query}" in create and "'blackhole'" in create
        assert nc.select_of(insert).upper().startswith("SELECT")
        assert query in nc.SPARK_SQL


def test_the_ddl_names_every_column_once_and_the_views_keep_flinks_names() -> None:
    table, *views = nc.flink_ddl("/data")
    assert [n for n, _ in nc.COLUMNS] == ["event_type"] + [
        prefix + name for _, prefix, fields in nc.KINDS for name, _ in fields
    ]
    assert "WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND" in table
    assert "`b_auction` AS `auction`" in views[2] and views[2].endswith("event_type = 2")


def test_canonical_values_agree_across_engines_forms() -> None:
    import datetime
    import decimal

    assert nc.figures([("+I", (decimal.Decimal("1.500"), 1))]) == nc.figures(
        [("+U", (decimal.Decimal("1.5"), 1))]
    )
    stamp = datetime.datetime(2024, 1, 1, 0, 0, 0, 300000)
    assert nc.canonical(stamp) == "2024-01-01 00:00:00.300"
    retracted = nc.figures([("+I", (1,)), ("-U", (1,)), ("+U", (2,))])
    assert retracted == nc.figures([("+I", (2,))])


def test_a_missing_peer_venv_fails_clearly(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(run_peer, "PEERS_ROOT", tmp_path / "no-peers")
    args = run_peer.argparse.Namespace(
        system="pyflink", workload="nexmark", records=10, keys=1, checkpoint_interval_ms=1000,
        rate=0.0, parallelism=2, work_dir="", latency_warmup_s=0.0, kill_after_s=0.0,
        timeout=5.0, keep=False,
    )  # fmt: skip
    result = run_peer.run(args, ["--query", "q0"])
    assert "pyflink is not installed" in result["unsupported"]
    result.update(system="flink", query="q0")
    driver.judge([result], {"q0": None})
    cell = driver.summarize([result])["q0"]["flink"]
    assert cell["events_per_s"] is None
    assert cell["why"].startswith("unsupported: pyflink is not installed")


def _run_driver(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "bench.nexmark_bench", "--events", "3000", "--verify-events",
        "3000", "--queries", "q0,q5", "--systems", "cairn", "--executor", "inprocess",
        "--out", str(out), "--data-root", str(tmp_path / "data"), "--timeout", "120",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "geometric mean" in proc.stdout
    return dict(json.loads((out / "results.json").read_text()))


def test_the_driver_runs_cairn_verifies_it_and_rejects_a_planted_wrong_result(
    tmp_path: Path,
) -> None:
    saved = _run_driver(tmp_path)
    results = saved["results"]
    by_query = {r["query"]: r for r in results if r["mode"] == "verify"}
    timed = {r["query"]: r for r in results if r["mode"] == "timed"}
    data = Path(saved["meta"]["data"])
    bids = json.loads((data / "_manifest.json").read_text())["bids"]
    assert by_query["q0"]["result_rows"] == bids > 0
    assert by_query["q5"]["result_rows"] > 0
    assert all(r["verified"] is True for r in results), results
    assert timed["q0"]["events_per_s"] > 0 and timed["q5"]["events_per_s"] > 0
    # Each of Cairn's two source subtasks reads one file (its events in time order).
    assert nexmark_data.files_per_subtask(data, 2) == [1, 1]
    assert timed["q0"]["source_files_per_subtask"] == [1, 1]
    assert saved["meta"]["references"]["q5"]["source"] == "oracle"

    # A wrong q5 result (one row's worth of checksum off) must be rejected.
    planted = copy.deepcopy(results)
    wrong = next(r for r in planted if r["query"] == "q5" and r["mode"] == "verify")
    wrong["result_checksum"] = (wrong["result_checksum"] + 1) % (1 << 64)
    references = {q: nexmark_oracle.oracle(q, data) for q in ("q0", "q5")}
    driver.judge(planted, references)
    assert wrong["verified"] is False
    wrong_timed = next(r for r in planted if r["query"] == "q5" and r["mode"] == "timed")
    assert wrong_timed["verified"] is False and wrong_timed["events_per_s"] is None
    assert wrong_timed["invalid_events_per_s"] == timed["q5"]["events_per_s"]
    summary = driver.summarize(planted)
    assert summary["q5"]["cairn"]["why"].startswith("invalid")
    assert summary["q0"]["cairn"]["events_per_s"] == timed["q0"]["events_per_s"]
    assert summary["q5"]["cairn"]["events_per_s"] is None
    section = "\n".join(driver.section(saved["meta"], planted))
    assert "| q5 | invalid |" in section and "- cairn q5: invalid: results differ" in section

    # Without an oracle, Flink's figures are the reference: a differing Cairn is rejected.
    flink = dict(by_query["q5"], system="flink")
    cairn = dict(by_query["q5"], result_rows=by_query["q5"]["result_rows"] + 1)
    used = driver.judge([flink, cairn], {"q5": None})
    assert used["q5"]["source"] == "flink" and cairn["verified"] is False
