"""Host-level faults on a :class:`~cairn.testing.netns_cluster.NetnsCluster`, each made and
healed in one call: a worker host lost, a job's worker paused (SIGSTOP, SIGCONT), partitions,
a host cut off, a full disk, the storage host's servers down, and the HDFS store's own faults.

Invariant: ``make_and_heal`` returns only once the fault is healed (links up, routes
removed, disk freed, storage restarted, a lost host's Spark worker started again), so
faults never pile up; it changes kernel or process state of the cluster's own hosts only.
Which host a fault aims at is a pure decision (``aim``), apart from making it. Shared by
the project's campaign (``bench/chaos_faults.py``) and ``cairn chaos --profile hosts``.

    >>> aim("kill-host", 0, [False, True]), aim("storage-down", 0, [False, True])
    (1, 0)
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cairn.testing.netns_cluster import NetnsCluster

__all__ = ["HOST_FAULTS", "ON_A_JOB_HOST", "aim", "make_and_heal"]

# Faults aimed at the job's part on one worker host: missed if it runs none there.
ON_A_JOB_HOST = frozenset(
    {
        "kill-host",
        "pause-worker",
        "partition-driver",
        "partition-storage",
        "partition-peer",
        "isolate-host",
        "disk-full",
    }
)
# The kinds ``make_and_heal`` makes: the cluster's hosts, links, disks and servers.
HOST_FAULTS = frozenset(
    {
        "kill-host",
        "pause-worker",
        "partition-driver",
        "partition-storage",
        "partition-peer",
        "isolate-host",
        "disk-full",
        "storage-down",
        "slow-store",
        "datanode-lost",
        "store-disk-full",
    }
)


def aim(kind: str, target: int, running: Sequence[bool]) -> int:
    """The worker host a fault of ``kind`` aimed at ``target`` hits: another host running
    a worker of the job when ``target`` runs none (``running``, by worker host) and the
    fault is about the job's part on one host; else ``target``.

    >>> aim("disk-full", 1, [True, False]), aim("disk-full", 1, [False, False])
    (0, 1)
    """
    if kind in ON_A_JOB_HOST and not running[target]:
        return next((i for i, r in enumerate(running) if r), target)
    return target


def make_and_heal(
    cluster: NetnsCluster,
    kind: str,
    target: int,
    duration_s: float,
    *,
    driver_host: str = "driver",
) -> None:
    """Make the fault ``kind`` of ``HOST_FAULTS`` at worker host ``target`` (a DataNode's
    index for ``datanode-lost``), let it last ``duration_s``, heal it.

    Raises:
        LookupError: ``pause-worker`` on a host that runs no worker of the job (whose
            control connection goes to ``driver_host``).
    """
    host = f"worker-{target}"
    c = cluster
    if kind == "kill-host":
        c.kill_host(host)
        time.sleep(duration_s)
        c.restart_worker(host)
    elif kind == "pause-worker":  # a GC pause, a frozen process: its kernel still answers
        pids = c.job_worker_pids(host, driver=driver_host)
        if not pids:
            raise LookupError(f"{host} runs no worker of the job")
        _signal(pids[0], signal.SIGSTOP)
        try:
            time.sleep(duration_s)
        finally:
            _signal(pids[0], signal.SIGCONT)
    elif kind in ("partition-driver", "partition-storage", "partition-peer"):
        other = {
            "partition-driver": driver_host,
            "partition-storage": "storage",
            "partition-peer": f"worker-{(target + 1) % c.workers}",
        }[kind]
        c.partition(host, other)
        time.sleep(duration_s)
        c.heal(host, other)
    elif kind == "isolate-host":
        c.isolate(host)
        time.sleep(duration_s)
        c.reconnect(host)
    elif kind == "disk-full":
        c.fill_disk(host)
        time.sleep(duration_s)
        c.free_disk(host)
    elif kind == "storage-down":
        c.storage_down()
        time.sleep(duration_s)
        c.storage_up()
    elif kind == "slow-store":
        c.pause_store()
        time.sleep(duration_s)
        c.resume_store()
    elif kind == "datanode-lost":
        c.lose_datanode(target)
        time.sleep(duration_s)
        c.restore_datanode(target)
    elif kind == "store-disk-full":
        c.fill_store_disk()
        time.sleep(duration_s)
        c.free_store_disk()
    else:
        raise ValueError(f"not a host fault: {kind}")


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it died meanwhile
        os.kill(pid, sig)
