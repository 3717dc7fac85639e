"""A throw-away Spark standalone cluster on 127.0.0.1 for integration and fault-injection tests.

Invariant: every process this cluster starts (master, workers, and the executors and Python
workers below them) is a descendant of a pid in ``pids`` and is gone after ``stop()``; nothing
binds outside loopback and all files live under one temporary directory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pyspark

from cairn.testing.processes import (
    EXECUTOR_CLASS,
    find_processes,
    kill_process,
    terminate_tree,
    wait_for,
)

__all__ = ["ClusterStartError", "StandaloneCluster", "free_port", "spark_home"]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_LOG_TAIL_LINES = 25
_QUICK_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class ClusterStartError(RuntimeError):
    """The cluster did not come up; the message carries the tails of the daemon logs."""


def spark_home() -> Path:
    """The installed pyspark package directory, which doubles as SPARK_HOME (bin/, jars/)."""
    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        return int(sock.getsockname()[1])


class StandaloneCluster:
    """One Spark master and ``workers`` workers, started by ``spark-class`` on loopback.

    Workers are started only once the master answers, so they register on their first try
    instead of after Spark's 5-15 s registration back-off. With ``quick_jvm`` the daemons
    (not the executors) run C1-only with the serial GC, which halves their start-up CPU.

    Example (not a doctest: it needs a running system)::

        with StandaloneCluster(workers=2) as cluster:
            spark = get_or_create_spark(cluster.master_url, min_slots=2)
            victim = cluster.kill_executor()
    """

    def __init__(
        self,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory: str = "1g",
        start_timeout: float = 90.0,
        daemon_memory: str = "512m",
        quick_jvm: bool = True,
    ) -> None:
        if workers < 1 or cores_per_worker < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory = memory
        self.start_timeout = start_timeout
        self.daemon_memory = daemon_memory
        self.quick_jvm = quick_jvm
        self.port = 0
        self.webui_port = 0
        self.root: Path | None = None
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []
        self.started_in: float | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the master, then the workers; return once all workers are ALIVE.

        Raises :class:`ClusterStartError` (after stopping whatever started) on timeout or
        when a daemon exits early.
        """
        if self._master is not None:
            raise RuntimeError("cluster already started")
        began = time.monotonic()
        self.root = Path(tempfile.mkdtemp(prefix="cairn-spark-cluster-"))
        self.port, self.webui_port = free_port(), free_port()
        deadline = began + self.start_timeout
        try:
            self._master = self._launch(
                "master",
                [
                    _MASTER_CLASS,
                    "--host",
                    _HOST,
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.webui_port),
                ],
            )
            self._await(deadline, lambda: self._master_status() == "ALIVE", "the master")
            for index in range(self.workers):
                work_dir = self.root / f"worker-{index}"
                work_dir.mkdir()
                self._workers.append(
                    self._launch(
                        f"worker-{index}",
                        [
                            _WORKER_CLASS,
                            "--host",
                            _HOST,
                            "--cores",
                            str(self.cores_per_worker),
                            "--memory",
                            self.memory,
                            "--work-dir",
                            str(work_dir),
                            "--webui-port",
                            str(free_port()),
                            self.master_url,
                        ],
                    )
                )
            self._await(
                deadline,
                lambda: self.alive_workers() >= self.workers,
                f"{self.workers} ALIVE workers",
            )
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        log.info("Spark standalone cluster %s up in %.1f s", self.master_url, self.started_in)

    def stop(self) -> None:
        """Terminate every process tree of the cluster (workers first) and delete its files.

        Safe to call more than once and on a half-started cluster.
        """
        daemons = [*self._workers, *([self._master] if self._master else [])]
        for proc in daemons:
            # Workers kill their executors on SIGTERM; terminate_tree covers the rest.
            killed = terminate_tree(proc.pid, timeout=10.0)
            if killed:
                log.warning("SIGKILLed %s left over from pid %d", killed, proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
        self._workers = []
        self._master = None
        for handle in self._logs:
            handle.close()
        self._logs = []
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    # -- addresses and processes ---------------------------------------------------------

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``, the master URL for ``SparkSession.builder.master``."""
        return f"spark://{_HOST}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{_HOST}:{self.webui_port}"

    @property
    def master_pid(self) -> int:
        if self._master is None:
            raise RuntimeError("cluster not started")
        return self._master.pid

    @property
    def worker_pids(self) -> list[int]:
        return [proc.pid for proc in self._workers]

    @property
    def pids(self) -> list[int]:
        """Pids of the master and worker JVMs (``spark-class`` execs java in place)."""
        return [self.master_pid, *self.worker_pids]

    def executor_pids(self) -> list[int]:
        """Pids of the executor JVMs the workers of this cluster run right now."""
        return find_processes(EXECUTOR_CLASS, parent=self.worker_pids)

    def kill_executor(self, sig: int = signal.SIGKILL, pid: int | None = None) -> int:
        """Send ``sig`` to one executor (``pid`` or the first one found) and return its pid."""
        running = self.executor_pids()
        if pid is None:
            if not running:
                raise RuntimeError("no executor is running on this cluster")
            pid = running[0]
        elif pid not in running:
            raise ValueError(f"pid {pid} is not an executor of this cluster: {running}")
        kill_process(pid, sig)
        log.info("sent signal %d to executor pid %d", sig, pid)
        return pid

    # -- master state --------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The master's JSON status (``/json/``): workers, active apps, executors."""
        url = f"{self.webui_url}/json/"
        with urllib.request.urlopen(url, timeout=2.0) as response:
            data: dict[str, Any] = json.load(response)
        return data

    def alive_workers(self) -> int:
        """How many workers the master currently lists as ALIVE (0 if it does not answer)."""
        try:
            workers = self.state().get("workers", [])
        except (OSError, ValueError):
            return 0
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Return once no application runs and every worker is ALIVE with no executor left:
        what a test that shares the cluster with the one before expects to find."""

        def idle() -> bool:
            try:
                state = self.state()
            except (OSError, ValueError):  # a busy master may miss the 2 s timeout
                return False
            workers = state.get("workers", [])
            alive = sum(1 for worker in workers if worker.get("state") == "ALIVE")
            return (
                alive == self.workers and not state.get("activeapps") and not (self.executor_pids())
            )

        wait_for(idle, timeout, 0.2, lambda: f"an idle cluster: {self.log_tails()}")

    def log_tails(self, lines: int = _LOG_TAIL_LINES) -> str:
        """Last ``lines`` lines of every daemon and executor log, for error messages."""
        if self.root is None:
            return "(no logs: cluster not started)"
        logs = sorted(self.root.glob("*.log")) + sorted(self.root.glob("worker-*/*/*/stderr"))
        parts = []
        for path in logs:
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.relative_to(self.root)} ---\n" + "\n".join(text))
        return "\n".join(parts) or "(no logs written)"

    # -- internals -----------------------------------------------------------------------

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        assert self.root is not None
        handle = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(handle)
        command = [str(spark_home() / "bin" / "spark-class"), *args]
        # A new session keeps the JVMs out of the terminal's process group, so Ctrl-C on
        # the test run reaches pytest (which then stops the cluster) and not the daemons.
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=self.root,
            start_new_session=True,
        )

    def _env(self) -> dict[str, str]:
        assert self.root is not None
        conf_dir = self.root / "conf"
        conf_dir.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP=_HOST,
            # An empty conf dir: a developer's spark-defaults.conf must not leak in.
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_LOCAL_DIRS=str(self.root / "local"),
            SPARK_DAEMON_MEMORY=self.daemon_memory,
        )
        # The REST submission server binds the fixed port 6066; tests never submit through it.
        _append_opts(env, "SPARK_MASTER_OPTS", "-Dspark.master.rest.enabled=false")
        if self.quick_jvm:
            # Master, workers and the launcher JVM spark-class runs first do little work
            # but pay for JIT warm-up; C1-only starts the cluster ~40% faster on 2 cores.
            for var in ("SPARK_DAEMON_JAVA_OPTS", "SPARK_LAUNCHER_OPTS"):
                _append_opts(env, var, _QUICK_JVM_OPTS)
        return env

    def _master_status(self) -> str | None:
        try:
            status = self.state().get("status")
        except (OSError, ValueError):
            return None
        return str(status) if status is not None else None

    def _await(self, deadline: float, ready: Callable[[], object], what: str) -> None:
        def check() -> bool:
            self._fail_if_exited()
            return bool(ready())

        try:
            wait_for(
                check, timeout=max(0.0, deadline - time.monotonic()), interval=0.25, message=what
            )
        except TimeoutError as exc:
            raise ClusterStartError(
                f"Spark standalone cluster not ready after {self.start_timeout:.0f} s: "
                f"waiting for {what}\n{self.log_tails()}"
            ) from exc

    def _fail_if_exited(self) -> None:
        for proc in [self._master, *self._workers]:
            if proc is not None and proc.poll() is not None:
                raise ClusterStartError(
                    f"Spark daemon pid {proc.pid} exited with {proc.returncode} during "
                    f"start-up\n{self.log_tails()}"
                )


def _append_opts(env: dict[str, str], var: str, opts: str) -> None:
    env[var] = f"{env[var]} {opts}" if env.get(var) else opts
