"""A throw-away HDFS (a NameNode and DataNodes in one JVM) for tests and local runs.

Invariant: the cluster is one JVM in its own process group that ``stop()`` ends (SIGTERM,
then SIGKILL); the NameNode's RPC port is chosen at construction (9000, as in Flink's
examples, when it is free) and kept across ``restart()``, every other port is an ephemeral
one; every port listens on ``host`` (127.0.0.1 unless given), the address the DataNodes
register with and clients are sent to; all its data lives under one temporary directory that
``stop()`` removes.
``kill()`` SIGKILLs it and keeps the data, so ``restart()`` brings the same namespace back.

The cluster is Apache Hadoop's own ``MiniDFSCluster`` from
``org.apache.hadoop:hadoop-client-minicluster`` (the version of the Hadoop client PySpark
ships), started by ``hadoop/MiniHdfs.java``; the jars and the compiled mains are cached as
``cairn.testing.hadoop_minicluster`` says (``python -m cairn.testing.hdfs prepare``, which
``.ci/run`` calls, prepares them and the YARN mini cluster's).

Example::

    with HdfsCluster(datanodes=2) as hdfs:
        url = hdfs.url("checkpoints")  # "hdfs://127.0.0.1:9000/checkpoints"
        conf = hdfs.flink_config()     # {"flink.hadoop.dfs.replication": "2"}
        hdfs.stop_datanode(1)          # a DataNode lost; restart_datanode(1) brings it back

On a simulated host (``cairn.testing.hosts``), reachable from the others as
``hdfs://<host name>:9000``::

    nn = network.add_host("namenode")
    HdfsCluster(host=nn.address, port=9000, launcher=["ip", "netns", "exec", nn.netns])
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cairn.testing.hadoop_minicluster import (
    JVM_OPTS,
    MavenPrepareError,
    await_ready,
    hadoop_classpath,
    java_tool,
    send_command,
)
from cairn.testing.managed_server import ManagedServer, die_with_parent
from cairn.testing.spark_cluster import free_port

__all__ = ["HdfsCluster", "HdfsStartError", "MavenPrepareError", "hadoop_classpath"]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"
_DEFAULT_PORT = 9000
_START_TIMEOUT_S = 120.0
_MAIN = "MiniHdfs"


class HdfsStartError(RuntimeError):
    """The cluster did not serve in time; the message carries its log's tail."""


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((_HOST, port))
        except OSError:
            return False
    return True


class HdfsCluster(ManagedServer):
    """A ``MiniDFSCluster`` of ``datanodes`` DataNodes, files replicated ``replication``
    times (default: as many as DataNodes, at most 3); ``hadoop_conf`` overrides Hadoop keys
    of the servers (``dfs.*``); ``host``: the address every server listens on (and the
    DataNodes are handed out at); ``launcher``: a prefix of the JVM's command line
    (``ip netns exec <netns>``: the cluster on a simulated host); ``data_dir``: where the
    DataNodes keep their blocks (``<data_dir>/dn<i>``; default: under ``root`` with the
    NameNode's files), e.g. a small file system of their own to fill."""

    def __init__(
        self,
        *,
        datanodes: int = 1,
        replication: int | None = None,
        port: int | None = None,
        root: str | None = None,
        hadoop_conf: Mapping[str, str] | None = None,
        launcher: Sequence[str] = (),
        host: str = _HOST,
        data_dir: str | None = None,
    ) -> None:
        if not 1 <= datanodes <= 8:
            raise ValueError(f"datanodes must be between 1 and 8, got {datanodes}")
        self.datanodes = datanodes
        self.replication = replication or min(datanodes, 3)
        if not 1 <= self.replication <= datanodes:
            raise ValueError(f"replication must be between 1 and {datanodes}, got {replication}")
        super().__init__(
            Path(root or tempfile.mkdtemp(prefix="cairn-hdfs-")), own_root=root is None
        )
        # A host of its own serves on the seed's port 9000; on the loopback, where other test
        # processes start clusters too, a free port (checking 9000 first raced them).
        self.host = host
        self.port = port or (free_port() if host == _HOST else _DEFAULT_PORT)
        self.launcher = tuple(launcher)
        self._hadoop_conf = dict(hadoop_conf or {})
        self.data_dir = data_dir
        self._formatted = False
        self.start_seconds: float | None = None

    # -- what tests use ------------------------------------------------------------------

    def url(self, *parts: str) -> str:
        """``hdfs://<host>:<port>/<parts...>``."""
        return f"hdfs://{self.host}:{self.port}/" + "/".join(p.strip("/") for p in parts)

    def flink_config(self) -> dict[str, str]:
        """Configuration keys for jobs writing here: the replication of the files they
        write, as Flink passes Hadoop keys (``flink.hadoop.<key>``)."""
        return {"flink.hadoop.dfs.replication": str(self.replication)}

    def filesystem(self) -> Any:
        """An hdfs-native fsspec filesystem on this cluster (inspecting files, modes)."""
        from hdfs_native.fsspec import HdfsFileSystem

        return HdfsFileSystem(host=self.host, port=self.port, skip_instance_cache=True)

    def stop_datanode(self, index: int) -> None:
        """Stop DataNode ``index`` (its blocks stay on its disk): a DataNode lost."""
        self._command(f"stop-datanode-{index}")

    def restart_datanode(self, index: int) -> None:
        """Start the DataNode stopped as ``index`` again on its ports and data."""
        self._command(f"restart-datanode-{index}")

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> HdfsCluster:
        """Start the JVM (formatting the namespace on the first start), wait until it serves."""
        classpath = hadoop_classpath()
        started = time.monotonic()
        with contextlib.suppress(FileNotFoundError):
            (self.root / "ready").unlink()
        args = [
            *self.launcher,
            java_tool("java"),
            *JVM_OPTS,
            f"-Dminihdfs.host={self.host}",
            *([f"-Dminihdfs.datadir={self.data_dir}"] if self.data_dir else []),
            "-cp",
            classpath,
            _MAIN,
            str(self.root),
            str(self.port),
            str(self.datanodes),
            str(self.replication),
            "keep" if self._formatted else "format",  # a restart keeps namespace and blocks
            *(f"{k}={v}" for k, v in self._hadoop_conf.items()),
        ]
        self._spawn(args, "hdfs.log", preexec_fn=die_with_parent)
        self._guard_start(self._await_ready)
        self._formatted = True
        self.start_seconds = time.monotonic() - started
        log.info("HDFS at %s served after %.1f s", self.url(), self.start_seconds)
        return self

    def _await_ready(self) -> None:
        assert self._proc is not None
        await_ready(
            self.root,
            "HDFS mini cluster",
            self._proc.poll,
            self.log_tail,
            HdfsStartError,
            _START_TIMEOUT_S,
        )

    def _command(self, name: str) -> None:
        send_command(self.root, name, lambda: self.running, self.log_tail, HdfsStartError)

    def restart(self) -> HdfsCluster:
        """Stop (SIGTERM) if running, then start again on the same port and data."""
        self._end_process(self.stop_signal)
        return self.start()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cairn.testing.hdfs prepare``: fetch the jars and compile the main
    (``.ci/run``); ``python -m cairn.testing.hdfs run``: a cluster until Ctrl-C."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "prepare"
    if command == "prepare":
        try:
            print(hadoop_classpath())
        except MavenPrepareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if command == "run":
        with HdfsCluster(port=_DEFAULT_PORT if _port_free(_DEFAULT_PORT) else None) as hdfs:
            print(f"HDFS at {hdfs.url()} ({hdfs.start_seconds:.1f} s)")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    print("usage: python -m cairn.testing.hdfs [prepare|run]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
