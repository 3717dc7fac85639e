"""Exactly-once on a real Spark standalone cluster when an executor JVM is SIGKILLed mid-run.

The cluster (master + 2 workers, 1 core each) runs on 127.0.0.1; the job's driver runs in a
child process (one SparkContext per process), while this process watches the retained
checkpoints appear and kills an executor once checkpoint 2 is complete. Spark relaunches the
executor, Cairn's job master redeploys from the latest checkpoint, and the committed output
must equal the failure-free golden output line for line.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.testing.processes import (
    find_processes,
    run_in_subprocess,
    terminate_tree,
    wait_for,
)
from cairn.testing.sequence_jobs import read_visible_lines
from cairn.testing.spark_cluster import StandaloneCluster
from tests.integration.jobs import expected_lines

# 12 s of data at RATE: checkpoint 2 comes ~1 s in, recovery takes ~5 s, then 11 s remain.
RECORDS, KEYS, RATE = 48_000, 20, 4_000
REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(300)]


def _drive(
    master_url: str, out: str, checkpoints: str, extra_conf: dict[str, str] | None = None
) -> dict[str, Any]:
    """Child-process driver: run the sequence job on the cluster and report what happened.

    ``placements[attempt]`` maps each worker index to (Python worker pid, executor JVM pid),
    read in the job master's thread the moment all workers of that attempt run.
    """
    from cairn.testing.processes import EXECUTOR_CLASS, find_ancestor
    from tests.integration.jobs import sequence_job

    conf = {"cairn.executor": "spark", "cairn.spark.master": master_url, **(extra_conf or {})}
    if "://" in checkpoints:  # an object store, configured by extra_conf's keys
        conf["execution.checkpointing.dir"] = checkpoints
        local_dir = None
    else:
        local_dir = checkpoints
    env = sequence_job(
        conf,
        out,
        records=RECORDS,
        keys=KEYS,
        parallelism=2,
        rate=RATE,
        interval_ms=300,
        checkpoint_dir=local_dir,
        retain=True,
    )
    started = time.monotonic()
    client = env.execute_async("standalone-cluster")
    master = client.job_master
    placements: dict[int, dict[int, tuple[int, int | None]]] = {}

    timeline: list[tuple[str, float]] = []

    def on_event(event: str, attempt: Any) -> None:
        if event in ("running", "restart"):
            timeline.append((event, round(time.monotonic() - started, 1)))
        if event == "running":
            placements[attempt] = {
                index: (pid, find_ancestor(pid, EXECUTOR_CLASS))
                for index, pid in master.worker_pids.items()
            }

    master.listeners.append(on_event)
    client.get_job_execution_result(timeout=150)
    return {
        "status": master.status.name,
        "restarts": master.restarts,
        "num_workers": master.num_workers,
        "placements": placements,
        "job_s": round(time.monotonic() - started, 1),
        "timeline": timeline,
    }


def _latest_checkpoint(paths: list[str]) -> int:
    ids = [
        int(m.group(1))
        for p in paths
        if p.endswith("/_metadata")
        if (m := re.fullmatch(r"chk-(\d+)", p.rsplit("/", 2)[-2]))
    ]
    return max(ids, default=0)


@pytest.mark.s3
def test_killed_executor_is_replaced_and_output_stays_exactly_once(
    tmp_path: Path, seaweed: Any, standalone_cluster: StandaloneCluster
) -> None:
    """The configuration a user who outgrows one machine runs: RocksDB with incremental
    checkpoints on storage every executor reaches (S3 on SeaweedFS). (The heap backend with
    a local directory ran here too: the same proof on other storage. The heap backend's
    exactly-once under killed workers is test_exactly_once.py's, on local Spark.)"""
    out = tmp_path / "out"
    checkpoints = seaweed.url("cluster", tmp_path.name)
    extra_conf: dict[str, str] = dict(seaweed.flink_config())
    # Issue 11's configuration: RocksDB with incremental checkpoints on S3.
    extra_conf["state.backend.type"] = "rocksdb"
    extra_conf["execution.checkpointing.incremental"] = "true"
    extra_conf["state.backend.rocksdb.localdir"] = str(tmp_path / "rocksdb")
    s3 = seaweed.filesystem()

    def listing() -> list[str]:
        s3.invalidate_cache()
        return [str(p) for p in s3.find(checkpoints[len("s3://") :])]

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    outcome: dict[str, Any] = {}
    began = time.monotonic()
    cluster = standalone_cluster

    def drive() -> None:
        try:
            outcome["facts"] = run_in_subprocess(
                _drive,
                cluster.master_url,
                str(out),
                checkpoints,
                extra_conf,
                timeout=150.0,
                env=env,
            )
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        wait_for(
            lambda: _latest_checkpoint(listing()) >= 2 or not driver.is_alive(),
            timeout=90.0,
            interval=0.05,
            message=lambda: f"checkpoint 2 on the cluster\n{cluster.log_tails()}",
        )
        assert driver.is_alive(), f"driver ended before checkpoint 2: {outcome}"
        executors_at_kill = cluster.executor_pids()
        killed_at_checkpoint = _latest_checkpoint(listing())
        victim = cluster.kill_executor()
        driver.join(timeout=160.0)
        assert not driver.is_alive(), "the driver did not finish"
    finally:
        if driver.is_alive():  # a failed test must not leave the driver and its JVM
            for pid in find_processes("cairn-subprocess-", parent=os.getpid()):
                terminate_tree(pid, timeout=5.0)
            driver.join(timeout=10.0)
    if "error" in outcome:
        raise outcome["error"]
    facts = outcome["facts"]
    print(
        f"[timing] job {facts['job_s']} s, "
        f"kill after checkpoint {killed_at_checkpoint}, total {time.monotonic() - began:.1f} s, "
        f"job events (s): {facts['timeline']}"
    )

    assert facts["status"] == "FINISHED"
    assert facts["restarts"] >= 1, "the killed executor must have failed the attempt"
    assert sorted(read_visible_lines(str(out))) == expected_lines(RECORDS, KEYS)

    placements = facts["placements"]
    assert facts["num_workers"] == 2
    first, last = placements[0], placements[max(placements)]
    first_executors = {executor for _, executor in first.values()}
    assert len(first_executors) == 2, f"both workers ran in one executor: {first}"
    assert victim in first_executors and first_executors <= set(executors_at_kill)
    last_executors = {executor for _, executor in last.values()}
    assert len(last_executors) == 2 and victim not in last_executors, (
        f"the recovered attempt must use the surviving and the relaunched executor: {last}"
    )
