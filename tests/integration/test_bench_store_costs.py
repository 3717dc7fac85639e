"""The store-costs benchmark at a tiny scale on Azure Blob (Azurite, started by the benchmark
for each run and stopped after it): both measurements run, and the figures it prints and
writes are sane — positive durations, every checkpoint adds less than the full state, a killed
worker is restored from the store. One store keeps the test near 20 s; the others run the same
code with another ``--storage`` (``python -m bench.store_costs`` smoke-runs them all)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench.store_costs import CostPlan, in_process_runner, measure, report

pytestmark = [pytest.mark.azure, pytest.mark.slow, pytest.mark.spark]

KEYS = 5_000


def test_store_costs_on_azure(spark: Any, tmp_path: Path) -> None:
    plan = CostPlan(
        keys=KEYS,
        recovery_keys=KEYS,
        checkpoints=3,
        warmup=1,
        interval_ms=300,
        rate=20_000,
        recovery_rate=20_000,
        recovery_tail_s=4,
    )
    lines: list[str] = []
    doc = measure(plan, ["azure"], str(tmp_path), in_process_runner, lines.append)
    assert json.loads((tmp_path / "results.json").read_text()) == doc
    assert doc["machine_start"]["cores"] >= 1 and len(doc["machine_end"]["load"]) == 3
    for row in doc["stores"]:
        c, r = row["checkpoint"], row["recovery"]
        assert row["checkpoint_raw"]["storage"] == row["store"], c["note"]
        # A loaded machine may fit fewer checkpoints into the input than asked: the note says.
        assert 1 <= c["checkpoints"] <= plan.checkpoints, c["note"]
        assert 0 < c["e2e_p50_ms"] <= c["e2e_p95_ms"] <= c["e2e_max_ms"]
        # Incremental: each checkpoint uploads a part of a state that holds every key.
        assert c["full_bytes"] >= KEYS * 8
        assert 0 < c["added_bytes_p50"] <= c["added_bytes_max"] < c["full_bytes"]
        assert 0 < c["added_pct_mean"] < 100
        assert r["recovery_s"] > 0 and r["all_running_s"] > 0, r["note"]
        assert 0 <= r["restore_read_ms"] <= r["restore_state_ms"] <= r["restore_total_ms"]
        assert r["restore_total_ms"] > 0
        assert r["restored_bytes"] >= KEYS * 8 and r["restored_checkpoint"] >= 1
    assert [line.split()[:2] for line in lines] == [["checkpoint", "azure"], ["recovery", "azure"]]
    table = report(doc).splitlines()
    assert table[2].startswith(f"| azure | {doc['stores'][0]['checkpoint']['checkpoints']} |")
    assert "load average" in table[-1]
