"""The benchmark runner's planning and merging decisions (pure functions, no runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.__main__ import own_rate, peer_case
from bench.saved_runs import merge_saved

KEYED = "keyed-sum/checkpoints-1s"


def _runs(system: str, *rates: float) -> list[dict[str, Any]]:
    return [{"system": system, "case": KEYED, "steady_records_per_s": r} for r in rates]


def test_own_rate_is_the_median_of_the_systems_keyed_sum_runs() -> None:
    results = _runs("pyflink", 12_000, 14_000, 13_000) + _runs("cairn", 600_000)
    assert own_rate(results, "pyflink") == 13_000
    assert own_rate(results, "spark") is None


def test_a_peer_slower_than_the_common_rate_runs_latency_at_half_its_own_rate() -> None:
    case = {
        "case": "latency",
        "workload": "latency",
        "rate": 300_000.0,
        "seconds": 10.0,
        "records": 3_000_000,
    }
    run, note, skip = peer_case("pyflink", case, _runs("pyflink", 13_000), 600)
    assert skip is None
    assert run["rate"] == 6_500 and run["records"] == 65_000
    assert note is not None and "cannot sustain the common 300,000" in note
    assert case["rate"] == 300_000, "the common case is left alone"
    assert peer_case("bytewax", case, _runs("bytewax", 700_000), 600) == (case, None, None)
    assert peer_case("cairn", case, _runs("cairn", 10), 600) == (case, None, None)


def test_a_state_size_run_over_the_budget_is_not_run_and_says_why() -> None:
    case = {"case": "state-size/keys-5000000", "workload": "state-size", "records": 10_000_000}
    _, _, skip = peer_case("pyflink", case, _runs("pyflink", 13_000), 600)
    assert skip is not None and "over 769 s" in skip
    assert peer_case("pyflink", case, _runs("pyflink", 13_000), 1_000)[2] is None


def test_the_bytewax_target_compares_with_its_faster_way_to_run() -> None:
    from bench.report import Group, _targets

    def group(system: str, rate: float) -> Group:
        return Group(KEYED, system, ({"steady_records_per_s": rate},))

    rows = _targets(
        {KEYED: [group("cairn", 600_000), group("bytewax", 100_000), group("bytewax-2p", 250_000)]}
    )
    line = next(r for r in rows if "Bytewax" in r)
    assert "2x Bytewax (2 processes)" in line and "2.40x" in line and "yes" in line
    rows = _targets({KEYED: [group("cairn", 600_000), group("bytewax", 400_000)]})
    assert any("1.50x" in r and "**no**" in r for r in rows)


def test_the_overhead_workload_is_cairns_own() -> None:
    case = {"case": "overhead", "workload": "overhead", "records": 10_000_000}
    _, _, skip = peer_case("bytewax", case, _runs("bytewax", 300_000), 600)
    assert skip is not None and "Cairn's own" in skip
    assert peer_case("cairn", case, [], 600) == (case, None, None)


def test_merged_runs_show_the_case_parameters_of_cairns_run(tmp_path: Path) -> None:
    def saved(name: str, systems: list[str], rate: float) -> str:
        path = tmp_path / name
        path.write_text(
            json.dumps(
                {
                    "meta": {
                        "cases": {"latency": {"case": "latency", "rate": rate}},
                        "repeat": 1,
                        "command": f"python -m bench {name}",
                        "machine": {},
                    },
                    "results": [{"case": "latency", "system": s, "x": name} for s in systems],
                }
            )
        )
        return str(path)

    first = saved("a", ["cairn", "spark"], 267_000)
    later = saved("b", ["spark"], 303_000)  # a peer rerun against another common rate
    results, meta = merge_saved([first, later])
    assert meta["cases"]["latency"]["rate"] == 267_000
    assert {(r["system"], r["x"]) for r in results} == {("cairn", "a"), ("spark", "b")}
    _, meta = merge_saved([later, first])
    assert meta["cases"]["latency"]["rate"] == 267_000


def test_no_results_leaves_results_md_alone(tmp_path: Path, monkeypatch: Any) -> None:
    import bench.__main__ as runner

    written: list[str] = []
    monkeypatch.setattr(runner, "run_all", lambda args, out_dir: ([], {"cases": {}}))
    monkeypatch.setattr(runner, "write_outputs", lambda r, m, md, chart: written.append(md))
    monkeypatch.setattr(runner, "BENCH", str(tmp_path))  # bench/out/<stamp> goes here
    results_md = str(tmp_path / "RESULTS.md")
    assert runner.main(["--no-results", "--results", results_md]) == 0
    assert written == []
    assert runner.main(["--results", results_md]) == 0
    assert written == [results_md]
