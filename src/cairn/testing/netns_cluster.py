"""A multi-host Spark cluster on one machine: a Spark master host, worker hosts, a storage
host (SeaweedFS S3 and PostgreSQL; with ``storage="hdfs"`` also an HDFS for the
checkpoints) and a driver host, each a network namespace
(:mod:`cairn.testing.hosts`), and the faults a real cluster has.

Invariant: hosts share nothing but the machine's binaries: each has its own address, TMPDIR,
Spark work and local dirs (a tmpfs on worker hosts), so job data moves between hosts only
over the network — checkpoints go to S3 on the storage host. Every process is started on a
host and every host is emptied and deleted by ``stop()`` (also on exit). A fault changes
kernel or process state only, and its ``heal``/``restart`` counterpart undoes exactly that.

Example (not a doctest: it needs root and a few seconds)::

    with NetnsCluster(workers=2) as cluster:
        driver = cluster.start_driver([sys.executable, "job.py"], conf=cluster.job_conf())
        cluster.kill_host("worker-1")        # every process on it, SIGKILL
        cluster.restart_worker("worker-1")   # the host comes back: a new Spark worker
        cluster.partition("worker-0", "driver")
        cluster.heal("worker-0", "driver")
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from cairn.testing.hdfs import HdfsCluster
from cairn.testing.hosts import Host, HostNetwork
from cairn.testing.postgres import PostgresServer
from cairn.testing.processes import EXECUTOR_CLASS, wait_for
from cairn.testing.seaweedfs import SeaweedS3
from cairn.testing.spark_cluster import spark_home

__all__ = ["NetnsCluster", "python_env"]

log = logging.getLogger(__name__)

# The NameNode notices a lost DataNode within seconds and writes around it (defaults: 30 s
# to stale, 10.5 min to dead, and no avoiding stale ones): see docs/storage.md.
QUICK_DATANODE_LOSS = {
    "dfs.namenode.write.stale.datanode.ratio": "1.0",
    "dfs.heartbeat.interval": "1",
    "dfs.namenode.heartbeat.recheck-interval": "1000",
    "dfs.namenode.stale.datanode.interval": "3000",
    "dfs.namenode.avoid.write.stale.datanode": "true",
    "dfs.namenode.avoid.read.stale.datanode": "true",
    "dfs.blocksize": "1048576",  # the NameNode hands out a DataNode with a block's room
}
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_QUICK_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_SPARK_PORT, _WEBUI_PORT = 7077, 8080


class NetnsCluster:
    """Hosts ``master``, ``worker-0``..``worker-<n-1>``, ``storage`` and ``driver`` (and
    ``driver-1``..``driver-<d-1>`` with ``drivers=d``: one host per concurrent job, so a
    driver loss or a partition from the driver hits one job).

    ``disk_mb``: the size of each worker host's tmpfs work dir (its "disk"), which
    :meth:`fill_disk` fills. ``postgres``: also run PostgreSQL on the storage host.
    ``worker_timeout_s``: the master's ``spark.worker.timeout`` (a starved machine needs
    more than the default 10 s, or the master drops slow but healthy Spark workers).
    ``storage``: where checkpoints go, ``"s3"`` (SeaweedFS) or ``"hdfs"`` (a NameNode and two
    DataNodes on the storage host, their blocks on its tmpfs of ``store_disk_mb``, which
    :meth:`fill_store_disk` fills); the storage host serves S3 either way (the job's output).
    """

    def __init__(
        self,
        workers: int = 2,
        cores_per_worker: int = 2,
        *,
        worker_memory: str = "1g",
        disk_mb: int = 256,
        postgres: bool = True,
        start_timeout: float = 120.0,
        drivers: int = 1,
        worker_timeout_s: int = 10,
        storage: str = "s3",
        store_disk_mb: int = 256,
    ) -> None:
        if storage not in ("s3", "hdfs"):
            raise ValueError(f"storage must be 's3' or 'hdfs', got {storage!r}")
        self.workers = workers
        self.drivers = drivers
        self.cores_per_worker = cores_per_worker
        self.worker_memory = worker_memory
        self.disk_mb = disk_mb
        self.with_postgres = postgres
        self.start_timeout = start_timeout
        self.worker_timeout_s = worker_timeout_s
        self.storage = storage
        self.store_disk_mb = store_disk_mb
        self.net: HostNetwork | None = None
        self.s3: SeaweedS3 | None = None
        self.hdfs: HdfsCluster | None = None
        self.pg: PostgresServer | None = None
        self._spark: dict[str, subprocess.Popen[bytes]] = {}

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> NetnsCluster:
        began = time.monotonic()
        self.net = HostNetwork()
        try:
            net = self.net
            net.add_host("master")
            for index in range(self.workers):
                net.add_host(f"worker-{index}", disk_mb=self.disk_mb)
            hdfs = self.storage == "hdfs"
            # With HDFS the storage host's tmpfs "disk" holds the DataNodes' blocks only.
            storage = net.add_host("storage", disk_mb=self.store_disk_mb if hdfs else None)
            for name in self.driver_hosts:
                net.add_host(name)
            launcher = ["ip", "netns", "exec", storage.netns]
            self.s3 = SeaweedS3(
                bucket="cairn",
                root=str(storage.dir / "seaweedfs"),
                host=storage.address,
                launcher=launcher,
            )
            if hdfs:
                (storage.dir / "hdfs").mkdir()
                self.hdfs = HdfsCluster(
                    datanodes=2,
                    root=str(storage.dir / "hdfs"),
                    data_dir=str(storage.work / "hdfs-data"),
                    host=storage.address,
                    launcher=launcher,
                    hadoop_conf=QUICK_DATANODE_LOSS,
                )
            self._start_spark("master")  # its JVM starts while the storage servers do
            self.s3.start()
            if self.hdfs is not None:
                self.hdfs.start()
            if self.with_postgres:
                self.pg = PostgresServer(host=storage.address, launcher=launcher)
                self.pg.start()
            wait_for(
                lambda: self.master_state().get("status") == "ALIVE",
                timeout=self.start_timeout,
                interval=0.25,
                message=lambda: f"the Spark master\n{self.log_tail('master', 'spark')}",
            )
            for index in range(self.workers):
                self._start_spark(f"worker-{index}")
            self.await_workers(self.workers)
        except BaseException:
            self.stop()
            raise
        log.info("multi-host cluster up in %.1f s", time.monotonic() - began)
        return self

    def stop(self) -> None:
        """Stop every process on every host and delete the hosts (safe to call twice)."""
        if self.pg is not None:
            with contextlib.suppress(Exception):
                self.pg.stop()
            self.pg = None
        if self.hdfs is not None:
            with contextlib.suppress(Exception):
                self.hdfs.stop()
            self.hdfs = None
        if self.s3 is not None:
            with contextlib.suppress(Exception):
                self.s3.stop()
            self.s3 = None
        if self.net is not None:
            self.net.delete()
            self.net = None
        self._spark = {}

    def __enter__(self) -> NetnsCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- hosts and addresses ---------------------------------------------------------------

    def host(self, name: str) -> Host:
        if self.net is None:
            raise RuntimeError("cluster not started")
        return self.net.hosts[name]

    @property
    def worker_hosts(self) -> list[Host]:
        return [self.host(f"worker-{i}") for i in range(self.workers)]

    @property
    def driver_hosts(self) -> list[str]:
        return ["driver"] + [f"driver-{i}" for i in range(1, self.drivers)]

    @property
    def master_url(self) -> str:
        return f"spark://{self.host('master').address}:{_SPARK_PORT}"

    def job_conf(self) -> dict[str, str]:
        """Configuration keys a job needs here: the master, S3 on the storage host, and the
        executors' Python (this interpreter)."""
        assert self.s3 is not None
        return {
            "cairn.spark.master": self.master_url,
            **self.s3.flink_config(),
            **(self.hdfs.flink_config() if self.hdfs is not None else {}),
        }

    def checkpoint_url(self, *parts: str) -> str:
        """A URL on the checkpoint storage: HDFS's with ``storage="hdfs"``, else S3's."""
        assert self.s3 is not None
        return (self.hdfs or self.s3).url(*parts)

    def checkpoint_filesystem(self) -> Any:
        """An fsspec filesystem on the checkpoint storage (for the controller: it names paths
        without the scheme, S3's with the bucket)."""
        assert self.s3 is not None
        return (self.hdfs or self.s3).filesystem()

    def storage_env(self) -> dict[str, str]:
        """The S3 credentials and endpoint as the ``AWS_*`` variables, which every worker
        and driver host has (an instance profile): fsspec's s3:// URLs in a job (the file
        sink's output) reach the storage host with them."""
        assert self.s3 is not None
        identity = self.s3.flink_config()
        return {
            "AWS_ACCESS_KEY_ID": identity["s3.access-key"],
            "AWS_SECRET_ACCESS_KEY": identity["s3.secret-key"],
            "AWS_ENDPOINT_URL": identity["s3.endpoint"],
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def master_state(self) -> dict[str, Any]:
        """The master's JSON status (empty when it does not answer)."""
        url = f"http://{self.host('master').address}:{_WEBUI_PORT}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as response:
                data: dict[str, Any] = json.load(response)
        except (OSError, ValueError):
            return {}
        return data

    def alive_workers(self) -> int:
        workers = self.master_state().get("workers", [])
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def await_workers(self, count: int, timeout: float | None = None) -> None:
        wait_for(
            lambda: self.alive_workers() >= count,
            timeout=timeout or self.start_timeout,
            interval=0.25,
            message=f"{count} ALIVE Spark workers",
        )

    def log_tail(self, host: str, name: str, lines: int = 30) -> str:
        path = self.host(host).dir / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return f"(no log {path})"

    # -- the driver --------------------------------------------------------------------------

    def start_driver(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        name: str = "driver",
        host_name: str = "driver",
    ) -> subprocess.Popen[bytes]:
        """Run ``argv`` (a job script, ``cairn run``...) on the driver host (``host_name``),
        in its own session so that a driver kill takes its whole process group."""
        host = self.host(host_name)
        extra = {**python_env(), **self.storage_env(), **(env or {})}
        return host.popen(argv, name=name, env=host.env(extra))

    # -- faults ------------------------------------------------------------------------------

    def executor_pids(self, host: str, driver: str | None = None) -> list[int]:
        """The Spark executor JVMs running on worker host ``host`` (those of the
        application whose driver runs on host ``driver``, if given)."""
        pids = [pid for pid in self.host(host).pids() if _cmdline_has(pid, EXECUTOR_CLASS)]
        if driver is None:
            return pids
        return [p for p in pids if _connected_to(p, self.host(driver).address)]

    def python_worker_pids(self, host: str) -> list[int]:
        """The Python processes (Cairn's workers and their daemon) on ``host``: their program
        is a Python (a JVM's class path names ``.../python3.11/site-packages/pyspark/jars``
        too)."""
        return [pid for pid in self.host(host).pids() if _runs_python(pid)]

    def job_worker_pids(self, host: str, driver: str = "driver") -> list[int]:
        """Cairn's worker processes on ``host``: Python processes with a TCP connection to
        the driver host ``driver`` (their control connection). Idle PySpark workers have
        none."""
        address = self.host(driver).address
        return [p for p in self.python_worker_pids(host) if _connected_to(p, address)]

    def kill_host(self, name: str) -> list[int]:
        """SIGKILL every process on the host, as when it loses power."""
        return self.host(name).signal_all(signal.SIGKILL)

    def pause_host(self, name: str) -> list[int]:
        """SIGSTOP every process on the host (a frozen VM); :meth:`resume_host` wakes it."""
        return self.host(name).signal_all(signal.SIGSTOP)

    def resume_host(self, name: str) -> list[int]:
        return self.host(name).signal_all(signal.SIGCONT)

    def restart_worker(self, name: str) -> None:
        """After a host kill: empty the host's disk and start its Spark worker again."""
        host = self.host(name)
        host.signal_all(signal.SIGKILL)
        host.wipe_disk()
        self._start_spark(name)

    def partition(self, a: str, b: str) -> None:
        """Drop every packet between hosts ``a`` and ``b`` (both ways)."""
        assert self.net is not None
        self.net.partition(self.host(a), self.host(b))

    def heal(self, a: str, b: str) -> None:
        assert self.net is not None
        self.net.heal(self.host(a), self.host(b))

    def isolate(self, name: str) -> None:
        """The host's link down: cut off from every other host."""
        self.host(name).isolate()

    def reconnect(self, name: str) -> None:
        self.host(name).reconnect()

    def fill_disk(self, name: str) -> None:
        self.host(name).fill_disk()

    def free_disk(self, name: str) -> None:
        self.host(name).free_disk()

    def storage_down(self) -> None:
        """SIGKILL the S3 server (and PostgreSQL, and HDFS): storage is gone until
        :meth:`storage_up`."""
        assert self.s3 is not None
        self.s3.kill()
        if self.pg is not None:
            self.pg.kill()
        if self.hdfs is not None:
            self.hdfs.kill()

    def storage_up(self) -> None:
        """Start the storage servers again on their data directories and addresses."""
        assert self.s3 is not None
        self.s3.restart()
        if self.pg is not None:
            self.pg.restart()
        if self.hdfs is not None:
            self.hdfs.restart()

    # HDFS's own faults (``storage="hdfs"``), each undone by its counterpart.

    def _checkpoint_store(self) -> HdfsCluster:
        if self.hdfs is None:
            raise RuntimeError("the checkpoint store's faults need storage='hdfs'")
        return self.hdfs

    def pause_store(self) -> None:
        """SIGSTOP the HDFS JVM: a store that answers nothing (slow) until :meth:`resume_store`."""
        self._checkpoint_store().pause()

    def resume_store(self) -> None:
        self._checkpoint_store().resume()

    def lose_datanode(self, index: int) -> None:
        """Stop DataNode ``index`` (a lost one); :meth:`restore_datanode` brings it back."""
        self._checkpoint_store().stop_datanode(index)

    def restore_datanode(self, index: int) -> None:
        self._checkpoint_store().restart_datanode(index)

    def fill_store_disk(self) -> None:
        """Fill the DataNodes' disk (the storage host's tmpfs) to the last byte."""
        self._checkpoint_store()
        self.host("storage").fill_disk()

    def free_store_disk(self) -> None:
        self._checkpoint_store()
        self.host("storage").free_disk()

    # -- internals -------------------------------------------------------------------------

    def _start_spark(self, name: str) -> subprocess.Popen[bytes]:
        host = self.host(name)
        conf_dir = host.dir / "spark-conf"
        conf_dir.mkdir(exist_ok=True)
        env = host.env(
            {
                **python_env(),
                **self.storage_env(),
                "SPARK_HOME": str(spark_home()),
                "SPARK_CONF_DIR": str(conf_dir),  # empty: no developer's defaults leak in
                "SPARK_DAEMON_MEMORY": "512m",
                "SPARK_DAEMON_JAVA_OPTS": _QUICK_JVM_OPTS,
                "SPARK_LAUNCHER_OPTS": _QUICK_JVM_OPTS,
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
                # A lost worker is noticed within seconds, not Spark's 60 s (a worker
                # heartbeats every quarter of it).
                "SPARK_WORKER_OPTS": f"-Dspark.worker.timeout={self.worker_timeout_s}",
            }
        )
        if name == "master":
            env["SPARK_MASTER_OPTS"] += f" -Dspark.worker.timeout={self.worker_timeout_s}"
            args = [
                _MASTER_CLASS,
                "--host",
                host.address,
                "--port",
                str(_SPARK_PORT),
                "--webui-port",
                str(_WEBUI_PORT),
            ]
        else:
            work = host.work / "spark-work"
            work.mkdir(exist_ok=True)
            args = [
                _WORKER_CLASS,
                "--host",
                host.address,
                "--cores",
                str(self.cores_per_worker),
                "--memory",
                self.worker_memory,
                "--work-dir",
                str(work),
                "--webui-port",
                str(_WEBUI_PORT),
                self.master_url,
            ]
        proc = host.popen([str(spark_home() / "bin" / "spark-class"), *args], name="spark", env=env)
        self._spark[name] = proc
        return proc


def python_env() -> dict[str, str]:
    """Executors and drivers run this interpreter with this process's import path, so a
    checkout's sources (PYTHONPATH) reach every host."""
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    src = Path(__file__).resolve().parents[2]  # .../src, or site-packages when installed
    path = [str(src)] if src.name == "src" else []
    if (src.parent / "bench").is_dir():
        path.append(str(src.parent))  # a checkout: its bench/ and tests/ jobs import too
    path += [p for p in os.environ.get("PYTHONPATH", "").split(":") if p and p not in path]
    if path:
        env["PYTHONPATH"] = ":".join(path)
    return env


def _connected_to(pid: int, address: str) -> bool:
    """Whether ``pid`` holds a TCP socket whose peer is ``address`` (IPv4), read from /proc:
    psutil cannot see sockets of another network namespace."""
    peer = "".join(f"{int(part):02X}" for part in reversed(address.split(".")))
    try:
        inodes = {
            os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1]
            for fd in os.listdir(f"/proc/{pid}/fd")
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")
        }
        lines: list[str] = []
        for table in ("tcp", "tcp6"):
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
                lines += f.read().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        remote, inode = fields[2], fields[9]
        if inode in inodes and remote.split(":")[0].endswith(peer):
            return True
    return False


def _runs_python(pid: int) -> bool:
    """Whether ``pid``'s program (its first argument) is a Python interpreter."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            program = f.read().split(b"\0", 1)[0]
    except OSError:
        return False
    return os.path.basename(program).startswith(b"python")


def _cmdline_has(pid: int, text: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return text.encode() in f.read()
    except OSError:
        return False
