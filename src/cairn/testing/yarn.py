"""A throw-away YARN cluster on this machine for tests: Apache Hadoop's own ``MiniYARNCluster``
(a ResourceManager and NodeManagers in one JVM, ``hadoop/MiniYarn.java``) from the same
Maven Central jars as the HDFS mini cluster (``cairn.testing.hdfs``).

Invariant: the JVM and every container its NodeManagers launch (they run in sessions of their
own: the ApplicationMaster, Spark's executors and their Python workers) end with ``stop()``:
the JVM's group first, then any process still working under ``root``; the cluster's files
(``conf/yarn-site.xml`` and ``core-site.xml`` for clients, the NodeManagers' local and log
directories) all live under ``root``. A NodeManager stopped with ``stop_nodemanager`` takes
its containers down with it, and the ResourceManager declares it lost within seconds
(``yarn.nm.liveness-monitor.expiry-interval-ms``), so Spark asks for new executors.

Example::

    with YarnCluster(nodemanagers=2) as yarn:
        os.environ.update(yarn.client_env())          # HADOOP_CONF_DIR for Spark's client
        conf = {"cairn.spark.master": "yarn", **yarn.spark_conf()}
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cairn.testing.hadoop_minicluster import (
    JVM_OPTS,
    MavenPrepareError,
    await_ready,
    hadoop_classpath,
    java_tool,
    send_command,
)
from cairn.testing.managed_server import ManagedServer, die_with_parent
from cairn.testing.processes import find_ancestor, find_processes
from cairn.testing.spark_cluster import spark_home

__all__ = ["MavenPrepareError", "YarnCluster", "YarnStartError", "container_node"]

log = logging.getLogger(__name__)

_MAIN = "MiniYarn"
_START_TIMEOUT_S = 120.0
# A container's working directory: <root>/data/.../cairn-localDir-nm-<i>_<dir>/usercache/...
# Spark's executor on YARN: org.apache.spark.executor.YarnCoarseGrainedExecutorBackend.
_EXECUTOR = "CoarseGrainedExecutorBackend"
_NODE_OF_PATH = re.compile(r"-localDir-nm-(\d+)_\d+/")


def container_node(pid: int, root: Path | str) -> int | None:
    """The NodeManager of the cluster under ``root`` whose container runs ``pid`` (a Python
    worker, or the executor JVM itself), or None if it runs in none of them.

    >>> container_node(os.getpid(), "/nonexistent") is None
    True
    """
    executor = find_ancestor(pid, _EXECUTOR) or pid
    try:
        cwd = os.readlink(f"/proc/{executor}/cwd")
    except OSError:
        return None
    found = _NODE_OF_PATH.search(cwd + "/")
    return int(found.group(1)) if found and cwd.startswith(str(root) + "/") else None


class YarnStartError(RuntimeError):
    """The cluster did not serve in time; the message carries its log's tail."""


class YarnCluster(ManagedServer):
    """A ResourceManager (FIFO scheduler) and ``nodemanagers`` NodeManagers of ``memory_mb``
    and ``vcores`` each; ``default_fs`` (e.g. an HDFS URL) goes into the clients'
    ``core-site.xml``; ``yarn_conf`` overrides YARN keys of the servers."""

    #: The ResourceManager and NodeManagers stop their services one by one (~5-8 s here).
    stop_grace_s = 15.0

    def __init__(
        self,
        *,
        nodemanagers: int = 2,
        memory_mb: int = 4096,
        vcores: int = 4,
        default_fs: str = "file:///",
        root: str | None = None,
        yarn_conf: Mapping[str, str] | None = None,
    ) -> None:
        if not 1 <= nodemanagers <= 8:
            raise ValueError(f"nodemanagers must be between 1 and 8, got {nodemanagers}")
        super().__init__(
            Path(root or tempfile.mkdtemp(prefix="cairn-yarn-")), own_root=root is None
        )
        self.nodemanagers = nodemanagers
        self.default_fs = default_fs
        self._yarn_conf = {
            "yarn.nodemanager.resource.memory-mb": str(memory_mb),
            "yarn.nodemanager.resource.cpu-vcores": str(vcores),
            **(yarn_conf or {}),
        }
        self.resource_manager: str | None = None
        self.start_seconds: float | None = None

    # -- what tests use ------------------------------------------------------------------

    @property
    def conf_dir(self) -> Path:
        """The clients' Hadoop configuration directory (``HADOOP_CONF_DIR``)."""
        return self.root / "conf"

    def client_env(self) -> dict[str, str]:
        """Environment a Spark driver needs to submit here (``--master yarn``)."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def spark_conf(self) -> dict[str, str]:
        """Spark settings for this machine's cluster: executors use the installed PySpark's
        jars where they are (``local:``, nothing uploaded), the staging files stay under
        ``root``, small containers."""
        return {
            "spark.yarn.jars": f"local:{spark_home() / 'jars'}/*",
            "spark.yarn.stagingDir": (self.root / "staging").as_uri(),
            "spark.executor.memory": "512m",
            "spark.yarn.am.memory": "384m",
        }

    def node_of(self, pid: int) -> int | None:
        """The NodeManager whose container runs ``pid`` (see :func:`container_node`)."""
        return container_node(pid, self.root)

    def executor_pids(self) -> dict[int, int]:
        """Spark executor JVMs running in this cluster's containers: pid -> NodeManager."""
        found = {}
        for pid in find_processes(_EXECUTOR):
            node = container_node(pid, self.root)
            if node is not None:
                found[pid] = node
        return found

    def stop_nodemanager(self, index: int) -> None:
        """Stop NodeManager ``index`` and its containers: a node lost."""
        self._command(f"stop-nodemanager-{index}")

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> YarnCluster:
        classpath = hadoop_classpath()
        started = time.monotonic()
        with contextlib.suppress(FileNotFoundError):
            (self.root / "ready").unlink()
        args = [
            java_tool("java"),
            *JVM_OPTS,
            f"-Dtest.build.data={self.root / 'data'}",
            "-cp",
            classpath,
            _MAIN,
            str(self.root),
            str(self.nodemanagers),
            self.default_fs,
            *(f"{k}={v}" for k, v in self._yarn_conf.items()),
        ]
        self._spawn(args, "yarn.log", preexec_fn=die_with_parent)
        self._guard_start(self._await_ready)
        self.start_seconds = time.monotonic() - started
        log.info("YARN at %s served after %.1f s", self.resource_manager, self.start_seconds)
        return self

    def _end_process(self, sig: int) -> None:
        super()._end_process(sig)
        self._kill_containers()

    def _kill_containers(self) -> None:
        """SIGKILL what still runs in a container directory under ``root`` (a NodeManager
        ended by SIGKILL leaves its containers, which run in sessions of their own)."""
        root = str(self.root)
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                cwd = os.readlink(f"/proc/{entry.name}/cwd")
            except OSError:
                continue
            if cwd.startswith(root + "/"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)

    def _await_ready(self) -> None:
        assert self._proc is not None
        text = await_ready(
            self.root,
            "YARN mini cluster",
            self._proc.poll,
            self.log_tail,
            YarnStartError,
            _START_TIMEOUT_S,
        )
        self.resource_manager = text.strip().partition("=")[2]

    def _command(self, name: str) -> None:
        send_command(self.root, name, lambda: self.running, self.log_tail, YarnStartError)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cairn.testing.yarn run``: a cluster until Ctrl-C, its conf dir printed."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["run"]:
        print("usage: python -m cairn.testing.yarn run", file=sys.stderr)
        return 2
    with YarnCluster() as yarn:
        print(f"ResourceManager at {yarn.resource_manager}")
        print(f"export HADOOP_CONF_DIR={yarn.conf_dir}")
        with contextlib.suppress(KeyboardInterrupt):
            while yarn.running:
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
