"""The recovery benchmark end to end with its checkpoints on S3: ``--storage s3`` starts a
real SeaweedFS server for the run, the job checkpoints there (not to the local work
directory), a worker is SIGKILLed once every key is in two checkpoints, the job recovers from
S3, and the server is gone when the run returns."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest
from bench.workloads import CairnOptions, run_workload

pytestmark = [pytest.mark.s3, pytest.mark.slow, pytest.mark.spark]

KEYS = 20_000


def _weed_processes() -> list[int]:
    found = []
    for p in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:  # killed, not yet reaped: gone
                continue
            cmdline = p.info["cmdline"] or []
            if p.info["name"] == "weed" and any("cairn-bench" in a for a in cmdline):
                found.append(p.pid)
        except psutil.Error:
            continue
    return found


def test_recovery_workload_on_s3_storage(spark: Any, tmp_path: Path) -> None:
    keep = tmp_path / "cairn-bench-s3"
    opts = CairnOptions(state_backend="rocksdb", incremental=True, storage="s3", keep_dir=str(keep))
    # 24 s of input: the kill waits for two checkpoints triggered after every key was emitted,
    # and CI twice saw a shorter job (4 s, then 8 s) end before that. If it happens again, the
    # note says when the fill was seen and how many checkpoints completed.
    r = run_workload("recovery", 240_000, KEYS, 300, rate=10_000, opts=opts, hot_fraction=0.01)
    assert r["storage"] == "s3"
    assert r["restarts"] >= 1 and r["recovery_s"] > 0, r["note"]
    assert 0 <= r["recovery_detected_s"] < r["recovery_running_s"]
    assert r["recovery_first_output_s"] == r["recovery_s"]
    # Where the restore's time went, as the job master and the workers measured it.
    init = r["restore_initialization"]
    assert init["state_bytes"] > 0 and init["checkpoint_id"] >= 1
    assert 0 <= init["state_read_ms"] <= init["initialize_state_ms"] <= init["total_ms"]
    # The state at the kill holds every key (a few bytes each at least) ...
    assert r["state_size_at_kill_bytes"] >= KEYS * 8
    assert r["checkpoint_bytes"] > 0  # sized on S3
    # ... on S3: nothing under the local checkpoint directory, SeaweedFS's volumes hold it.
    assert not (keep / "checkpoints").exists()
    volumes = [f for f in (keep / "seaweedfs" / "data").rglob("*.dat") if f.stat().st_size > 0]
    assert volumes
    assert sum(f.stat().st_size for f in volumes) >= r["state_size_at_kill_bytes"]
    assert _weed_processes() == [], "the benchmark's SeaweedFS server outlived the run"
    assert os.path.isdir(keep / "sink")
