"""Jobs on Spark on YARN (Hadoop's MiniYARNCluster: a ResourceManager and two NodeManagers),
checkpointing to a real HDFS: ``cairn run --master yarn`` runs a job whose workers are YARN
containers, and a NodeManager stopped mid-run (its containers with it) is survived exactly
once: Spark gets new executors from YARN, Cairn's job master restores the latest checkpoint,
and the committed output equals the failure-free output line for line.

The job's driver runs in a child process (one SparkContext per process, and the test session
has its own local one) with ``HADOOP_CONF_DIR`` naming the mini cluster's client files.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.testing.hdfs import HdfsCluster
from cairn.testing.processes import find_processes, run_in_subprocess, terminate_tree, wait_for
from cairn.testing.sequence_jobs import read_visible_lines
from cairn.testing.yarn import YarnCluster, container_node
from tests.integration.jobs import expected_lines

# 12 s of data at RATE: checkpoint 2 comes ~1 s in; losing a node costs ~10-20 s.
RECORDS, KEYS, RATE = 48_000, 20, 4_000
REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.spark,
    pytest.mark.yarn,
    pytest.mark.hdfs,
    pytest.mark.slow,
    pytest.mark.timeout(300),
]


def _env(yarn: YarnCluster) -> dict[str, str]:
    env = dict(os.environ)
    env.update(yarn.client_env())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def _spark_args(yarn: YarnCluster) -> list[str]:
    return [arg for k, v in yarn.spark_conf().items() for arg in ("-D", f"{k}={v}")]


def test_cairn_run_master_yarn_runs_the_job_in_yarn_containers(yarn: YarnCluster) -> None:
    run = [sys.executable, "-m", "cairn.cli.main", "run", "--master", "yarn", "-p", "2"]
    done = subprocess.run(
        [*run, *_spark_args(yarn), str(REPO_ROOT / "examples" / "keyed_sum.py")],
        env=_env(yarn),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "even: 2 6 12 20 30 42 56 72 90 110" in done.stdout
    assert "odd: 1 4 9 16 25 36 49 64 81 100" in done.stdout
    # The workers ran in containers the NodeManagers launched: their logs are there.
    logs = list((yarn.root / "data").rglob("container_*/stderr"))
    assert logs, "no container of this YARN cluster ran anything"


def _drive(out: str, checkpoints: str, conf: dict[str, str], yarn_root: str) -> dict[str, Any]:
    """Child-process driver: the sequence job on YARN; where each attempt's workers ran."""
    from tests.integration.jobs import sequence_job

    env = sequence_job(
        {
            "cairn.executor": "spark",
            "cairn.spark.master": "yarn",
            "execution.checkpointing.dir": checkpoints,
            **conf,
        },
        out,
        records=RECORDS,
        keys=KEYS,
        parallelism=2,
        rate=RATE,
        interval_ms=300,
        retain=True,
    )
    started = time.monotonic()
    client = env.execute_async("on-yarn")
    master = client.job_master
    nodes: dict[int, dict[int, int | None]] = {}

    def on_event(event: str, attempt: Any) -> None:
        if event == "running":
            nodes[attempt] = {
                i: container_node(pid, yarn_root) for i, pid in master.worker_pids.items()
            }

    master.listeners.append(on_event)
    client.get_job_execution_result(timeout=240)
    return {
        "status": master.status.name,
        "restarts": master.restarts,
        "nodes": nodes,
        "job_s": round(time.monotonic() - started, 1),
    }


def _latest_checkpoint(paths: list[str]) -> int:
    ids = [
        int(m.group(1))
        for p in paths
        if p.endswith("/_metadata")
        if (m := re.fullmatch(r"chk-(\d+)", p.rsplit("/", 2)[-2]))
    ]
    return max(ids, default=0)


def test_a_lost_nodemanager_is_survived_exactly_once(
    tmp_path: Path, yarn: YarnCluster, hdfs: HdfsCluster
) -> None:
    out = tmp_path / "out"
    checkpoints = hdfs.url("yarn", tmp_path.name)
    conf = {**yarn.spark_conf(), **hdfs.flink_config()}
    fs = hdfs.filesystem()

    def listing() -> list[str]:
        try:
            return [str(p) for p in fs.find(checkpoints)]
        except FileNotFoundError:
            return []

    outcome: dict[str, Any] = {}

    def drive() -> None:
        try:
            outcome["facts"] = run_in_subprocess(
                _drive,
                str(out),
                checkpoints,
                conf,
                str(yarn.root),
                timeout=260.0,
                env=_env(yarn),
            )
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        wait_for(
            lambda: _latest_checkpoint(listing()) >= 2 or not driver.is_alive(),
            timeout=150.0,
            interval=0.1,
            message=lambda: f"checkpoint 2 on HDFS\n{yarn.log_tail()}",
        )
        assert driver.is_alive(), f"driver ended before checkpoint 2: {outcome}"
        executors = yarn.executor_pids()
        assert executors, "no Spark executor runs in a YARN container"
        victim = min(executors.values())
        killed_at = _latest_checkpoint(listing())
        yarn.stop_nodemanager(victim)
        gone = [pid for pid, node in executors.items() if node == victim]
        wait_for(
            lambda: not any(os.path.exists(f"/proc/{pid}") for pid in gone),
            timeout=60.0,
            message=f"the executors of NodeManager {victim} to end with it",
        )
        driver.join(timeout=260.0)
        assert not driver.is_alive(), "the driver did not finish"
    finally:
        if driver.is_alive():  # a failed test must not leave the driver and its JVM
            for pid in find_processes("cairn-subprocess-", parent=os.getpid()):
                terminate_tree(pid, timeout=5.0)
            driver.join(timeout=10.0)
    if "error" in outcome:
        raise outcome["error"]
    facts = outcome["facts"]
    print(f"[timing] job {facts['job_s']} s, node {victim} lost after checkpoint {killed_at}")

    assert facts["status"] == "FINISHED"
    assert facts["restarts"] >= 1, "losing the node's executors must have failed the attempt"
    assert sorted(read_visible_lines(str(out))) == expected_lines(RECORDS, KEYS)
    nodes = facts["nodes"]
    first, last = nodes[min(nodes)], nodes[max(nodes)]
    assert None not in first.values(), f"a worker ran outside YARN's containers: {first}"
    assert victim in first.values(), f"the lost node ran none of the job's workers: {first}"
    assert victim not in last.values() and None not in last.values(), (
        f"the recovered attempt must run on the surviving NodeManager: {last}"
    )
