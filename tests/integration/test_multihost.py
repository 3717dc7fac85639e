"""A job across simulated hosts (network namespaces: a Spark master, two worker hosts, a
storage host with SeaweedFS and PostgreSQL, a driver host) under network partitions and a
short fault campaign: what partitions teach, as tests.

- A worker host cut off from the driver stops processing (its worker's control connection
  fails within the dead-peer timeout) and commits nothing; the driver restarts the attempt
  on the worker host it can reach, while the partition lasts.
- A worker host cut off from storage fails its checkpoints, which the driver counts against
  the tolerable-failure limit; the job runs on and checkpoints again once storage is back.
- A short seeded campaign (``bench.chaos``'s schedule): every fault healed, and the job
  checkpoints after each.

All on one job (a job start costs tens of seconds), whose output is checked at the end: 0
lost, 0 duplicated, per-key order kept.

Needs root and iproute2 (``ip netns``); skipped with the reason elsewhere.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from bench.chaos import ROOT, _verify
from bench.chaos_faults import Injector
from bench.chaos_plan import RunVerdict, plan_external

from cairn.testing.hosts import netns_unavailable
from cairn.testing.netns_cluster import NetnsCluster
from cairn.testing.processes import wait_for

_UNAVAILABLE = netns_unavailable()

pytestmark = [
    pytest.mark.multihost,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.s3,
    pytest.mark.postgres,
    pytest.mark.skipif(_UNAVAILABLE is not None, reason=_UNAVAILABLE or ""),
    pytest.mark.timeout(900),
]

# Spark must stop offering an executor it cannot reach within seconds, not its 120 s default,
# or a new attempt may be placed on the cut-off host (docs/operations.md).
SPARK_LIVENESS = {
    "spark.network.timeout": "20s",
    "spark.network.timeoutInterval": "5s",
    "spark.executor.heartbeatInterval": "2s",
}


@pytest.fixture(scope="module")
def hosts() -> Iterator[NetnsCluster]:
    with NetnsCluster(workers=2, cores_per_worker=2) as cluster:
        yield cluster


def _start(cluster: NetnsCluster, name: str, *, tolerable: int) -> tuple[Injector, dict[str, Any]]:
    """The campaign's job (files on S3 + PostgreSQL) on the driver host, no faults planned."""
    assert cluster.s3 is not None and cluster.pg is not None and cluster.net is not None
    with cluster.pg.connect() as conn:
        conn.execute(
            f"CREATE TABLE {name} (id bigserial PRIMARY KEY, k text, seq bigint, total bigint)"
        )
    work = cluster.net.dir / name
    work.mkdir()
    spec = {
        "name": name,
        "out": cluster.s3.url(name, "out"),
        "checkpoints": cluster.s3.url(name, "chk"),
        "jdbc": {
            "url": cluster.pg.jdbc_url(),
            "user": cluster.pg.user,
            "password": cluster.pg.password,
            "table": name,
        },
        "records": 10**12,
        "keys": 20,
        "rate": 200.0,
        "unaligned": False,
        "backend": "hashmap",
        "interval_ms": 1000,
        "faults_file": str(work / "faults"),
        "checkpoint_timeout_ms": 6_000,
        "tolerable_failures": tolerable,
        "conf": {**cluster.job_conf(), **SPARK_LIVENESS},
    }
    (work / "spec.json").write_text(json.dumps(spec))
    (work / "faults").write_text("")
    injector = Injector(
        cluster,
        argv=[sys.executable, str(ROOT / "bench" / "chaos_job.py"), str(work / "spec.json")],
        checkpoints=spec["checkpoints"],
        faults_file=work / "faults",
        marker=work / "fired",
        unaligned=False,
        seed=0,
        verdict=RunVerdict(name=name, seed=0, records=0),
    )
    injector.start_driver()
    return injector, spec


def _finish(cluster: NetnsCluster, injector: Injector, spec: dict[str, Any]) -> RunVerdict:
    assert cluster.s3 is not None
    injector.stop_job(cluster.s3.url(spec["name"], "savepoint"))
    _verify(cluster, spec, spec["name"], injector.verdict)
    return injector.verdict


def _driver_log(cluster: NetnsCluster) -> str:
    assert cluster.net is not None
    return "".join(
        p.read_text(errors="replace")
        for p in sorted(cluster.host("driver").dir.glob("driver-*.log"))
    )


@pytest.fixture(scope="module")
def partitioned_job(hosts: NetnsCluster) -> Iterator[tuple[Injector, dict[str, Any]]]:
    """One job for both partition tests (a job start costs tens of seconds): at most two
    failed checkpoints in a row tolerated, a checkpoint expires after 6 s."""
    injector, spec = _start(hosts, "partitioned", tolerable=2)
    try:
        injector.await_checkpoints(3, timeout=400, since=0.0)
        yield injector, spec
    finally:
        injector.close()


def test_a_worker_cut_off_from_the_driver_stops_and_the_attempt_moves(
    hosts: NetnsCluster, partitioned_job: tuple[Injector, dict[str, Any]]
) -> None:
    injector, _ = partitioned_job
    victim, before = next(iter(_latest_workers(hosts).items()))
    logged = len(_driver_log(hosts))
    hosts.partition(f"worker-{victim}", "driver")
    cut = time.monotonic()
    try:
        # The job master loses the worker and restarts the attempt: its control connection
        # fails (no acknowledgement within the dead-peer timeout), or, as early, a task on
        # the other host fails sending to it (its data connection crosses the same cut) ...
        wait_for(
            lambda: re.search(r"attempt \d+ failed \(", _driver_log(hosts)[logged:]),
            timeout=120,
            message=lambda: (
                f"the driver to notice the cut-off worker-{victim} (pids {sorted(before)}); "
                f"the driver's log ends:\n{_driver_log(hosts)[-6000:]}"
            ),
        )
        noticed = time.monotonic() - cut
        # ... on the host it can reach: checkpoints complete while the victim is cut off.
        injector.await_checkpoints(2, timeout=300, since=time.monotonic())
        moved = time.monotonic() - cut
        # The cut-off worker stopped too: no process of the old attempt runs the job there.
        wait_for(
            lambda: (
                not set(injector._workers_on(victim)) & before
                or all(_idle(pid) for pid in set(injector._workers_on(victim)) & before)
            ),
            timeout=60,
            message="the cut-off worker to stop",
        )
    finally:
        hosts.heal(f"worker-{victim}", "driver")
    print(f"cut off: noticed after {noticed:.1f} s, checkpointing again after {moved:.1f} s")


def _latest_workers(cluster: NetnsCluster) -> dict[int, set[int]]:
    """The pids of the job's latest attempt's workers by worker host, read from the job
    master's log (a worker of an attempt that ended may linger, still connected)."""
    found = re.findall(
        r"attempt (\d+): worker \d+ runs on \S+ \(([\d.]+)\), pid (\d+)", _driver_log(cluster)
    )
    assert found, "the job master logs no worker registration"
    latest = max(int(attempt) for attempt, _, _ in found)
    hosts = {cluster.host(f"worker-{t}").address: t for t in range(cluster.workers)}
    workers: dict[int, set[int]] = {}
    for attempt, address, pid in found:
        if int(attempt) == latest:
            workers.setdefault(hosts[address], set()).add(int(pid))
    return workers


def _idle(pid: int, window_s: float = 3.0) -> bool:
    """True if ``pid`` used (almost) no CPU for ``window_s``: it no longer processes."""
    import psutil

    try:
        proc = psutil.Process(pid)
        before = sum(proc.cpu_times()[:2])
        time.sleep(window_s)
        return sum(proc.cpu_times()[:2]) - before < 0.05
    except psutil.Error:
        return True


def test_seeded_faults_on_the_hosts_keep_the_job_checkpointing(
    hosts: NetnsCluster, partitioned_job: tuple[Injector, dict[str, Any]]
) -> None:
    """A short campaign (``bench.chaos``'s schedule, without driver losses, which cost a
    Spark session each): every fault healed, a checkpoint completes after each; the output
    is checked by the last test of the module."""
    injector, _ = partitioned_job
    plan = [f for f in plan_external(seed=11, count=60) if f.kind != "kill-driver"][:4]
    assert len({f.kind for f in plan}) >= 3
    for fault in plan:
        time.sleep(fault.gap_s)
        injector.inject(fault)
    verdict = injector.verdict
    assert sum(verdict.external.values()) >= len(plan), verdict.external
    assert len(verdict.recovery_s) == len(plan), verdict
    print(f"faults {dict(verdict.external)}, recovery {sorted(verdict.recovery_s)}")


def test_a_worker_cut_off_from_storage_fails_checkpoints_then_recovers_exactly_once(
    hosts: NetnsCluster, partitioned_job: tuple[Injector, dict[str, Any]]
) -> None:
    injector, spec = partitioned_job
    injector.await_checkpoints(2, timeout=300, since=time.monotonic())
    victim = next(iter(_latest_workers(hosts)))
    seen = len(_driver_log(hosts))  # only what the job logs from the cut on counts
    hosts.partition(f"worker-{victim}", "storage")
    try:
        # Checkpoints expire (6 s each); the third in a row exceeds the tolerated two.
        wait_for(
            lambda: "Exceeded checkpoint tolerable failure threshold" in _driver_log(hosts)[seen:],
            timeout=180,
            message=lambda: (
                f"checkpoint failures to exceed the tolerable limit (worker-{victim} cut off, "
                f"pids {injector._workers_on(victim)}); the driver's log since the cut:\n"
                f"{_driver_log(hosts)[seen:][-8000:]}"
            ),
        )
    finally:
        hosts.heal(f"worker-{victim}", "storage")
    healed = time.monotonic()
    log = _driver_log(hosts)[seen:]
    assert "CHECKPOINT_EXPIRED" in log, log[-3000:]
    assert "(3 consecutive failures, 2 tolerated)" in log, log[-3000:]
    injector.await_checkpoints(2, timeout=300, since=healed)
    print(f"checkpointing again {time.monotonic() - healed:.1f} s after storage came back")
    verdict = _finish(hosts, injector, spec)
    assert verdict.records > 0
    assert verdict.lost == 0 and verdict.duplicated == 0 and verdict.order_violations == 0, verdict
    assert verdict.unexpected == 0, verdict
