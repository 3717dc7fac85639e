"""A throw-away HDFS (a NameNode and DataNodes in one JVM) on 127.0.0.1 for tests and local runs.

Invariant: the cluster is one JVM in its own process group that ``stop()`` ends (SIGTERM,
then SIGKILL); the NameNode's RPC port is chosen at construction (9000, as in Flink's
examples, when it is free) and kept across ``restart()``, every other port is an ephemeral
loopback one, and all its data lives under one temporary directory that ``stop()`` removes.
``kill()`` SIGKILLs it and keeps the data, so ``restart()`` brings the same namespace back.

The cluster is Apache Hadoop's own ``MiniDFSCluster`` from
``org.apache.hadoop:hadoop-client-minicluster`` (the version of the Hadoop client PySpark
ships), copied from Maven Central over the repository's ``hadoop/pom.xml`` into
``~/.cache/cairn/hadoop-<version>/``, and started by ``hadoop/MiniHdfs.java``, compiled into
the cache beside it once (``python -m cairn.testing.hdfs prepare``, which ``.ci/run`` calls).
The same jar holds ``MiniYARNCluster``. ``CAIRN_HADOOP_LIBS`` may name another directory of
those jars.

Example::

    with HdfsCluster(datanodes=2) as hdfs:
        url = hdfs.url("checkpoints")  # "hdfs://127.0.0.1:9000/checkpoints"
        conf = hdfs.flink_config()     # {"flink.hadoop.dfs.replication": "2"}
        hdfs.stop_datanode(1)          # a DataNode lost; restart_datanode(1) brings it back
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cairn.testing.managed_server import ManagedServer, die_with_parent
from cairn.testing.maven_jars import (
    MavenPrepareError,
    cached_directory,
    copy_dependencies,
    pom_property,
    repo_file,
)
from cairn.testing.spark_cluster import free_port

__all__ = ["HdfsCluster", "HdfsStartError", "MavenPrepareError", "hadoop_classpath"]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"
_DEFAULT_PORT = 9000
_START_TIMEOUT_S = 120.0
_COMMAND_TIMEOUT_S = 60.0
_LIBS_ENV = "CAIRN_HADOOP_LIBS"
_POM_ENV = "CAIRN_HADOOP_POM"
_MAIN = "MiniHdfs"
# Sized for a 2-core test machine; C1 only: about half the start-up CPU.
_JVM_OPTS = ("-Xms64m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class HdfsStartError(RuntimeError):
    """The cluster did not serve in time; the message carries its log's tail."""


def _prepare_hint() -> str:
    return f"{sys.executable} -m cairn.testing.hdfs prepare"


def _hadoop_libs(*, fetch: bool) -> Path:
    env = os.environ.get(_LIBS_ENV)
    if env:
        libs = Path(env)
        if not any(libs.glob("hadoop-client-minicluster-*.jar")):
            raise MavenPrepareError(f"{_LIBS_ENV}={env} holds no hadoop-client-minicluster-*.jar")
        return libs
    pom = repo_file(_POM_ENV, "hadoop", "pom.xml")

    def build(staging: Path) -> None:
        copy_dependencies(pom, staging, libs_env=_LIBS_ENV)

    version = pom_property(pom, "hadoop.version")
    return cached_directory(f"hadoop-{version}", build, fetch=fetch, hint=_prepare_hint())


def _compiled_main(libs: Path, *, fetch: bool) -> Path:
    """The directory holding ``MiniHdfs.class``, compiled against ``libs`` (cached by the
    source's digest and the jars' directory)."""
    source = repo_file("CAIRN_HADOOP_MAIN", "hadoop", f"{_MAIN}.java")
    digest = hashlib.sha256(source.read_bytes() + str(libs).encode()).hexdigest()[:12]

    def build(staging: Path) -> None:
        javac = _java_tool("javac")
        done = subprocess.run(
            [javac, "-d", str(staging), "-cp", f"{libs}/*", str(source)],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
        if done.returncode != 0:
            raise MavenPrepareError(
                f"javac {source} failed:\n{(done.stdout + done.stderr)[-3000:]}"
            )

    return cached_directory(f"hadoop-main-{digest}", build, fetch=fetch, hint=_prepare_hint())


def hadoop_classpath(*, fetch: bool = True) -> str:
    """The class path that runs the mini cluster (compiled main first, then the jars)."""
    libs = _hadoop_libs(fetch=fetch)
    return f"{_compiled_main(libs, fetch=fetch)}{os.pathsep}{libs}/*"


def _java_tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", name)):
        return os.path.join(home, "bin", name)
    found = shutil.which(name)
    if found is None:
        raise MavenPrepareError(f"{name} not found (JAVA_HOME unset and no {name} on PATH)")
    return found


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
    of the servers (``dfs.*``)."""

    def __init__(
        self,
        *,
        datanodes: int = 1,
        replication: int | None = None,
        port: int | None = None,
        root: str | None = None,
        hadoop_conf: Mapping[str, str] | None = None,
        launcher: Sequence[str] = (),
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
        self.port = port or (_DEFAULT_PORT if _port_free(_DEFAULT_PORT) else free_port())
        self.host = _HOST
        self.launcher = tuple(launcher)
        self._hadoop_conf = dict(hadoop_conf or {})
        self._formatted = False
        self.start_seconds: float | None = None

    # -- what tests use ------------------------------------------------------------------

    def url(self, *parts: str) -> str:
        """``hdfs://127.0.0.1:<port>/<parts...>``."""
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
            _java_tool("java"),
            *_JVM_OPTS,
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
        deadline = time.monotonic() + _START_TIMEOUT_S
        ready = self.root / "ready"
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise HdfsStartError(
                    f"the HDFS mini cluster exited with {self._proc.returncode}: {self.log_tail()}"
                )
            if ready.exists():
                return
            time.sleep(0.1)
        raise HdfsStartError(f"the HDFS mini cluster did not serve in time: {self.log_tail()}")

    def _command(self, name: str) -> None:
        control = self.root / "control"
        done = control / f"{name}.done"
        with contextlib.suppress(FileNotFoundError):
            done.unlink()
        tmp = control / f".{name}"
        tmp.write_text("")
        tmp.rename(control / name)
        deadline = time.monotonic() + _COMMAND_TIMEOUT_S
        while not done.exists():
            if time.monotonic() > deadline or not self.running:
                raise HdfsStartError(f"the mini cluster did not answer {name}: {self.log_tail()}")
            time.sleep(0.05)
        answer = done.read_text().strip()
        if answer != "ok":
            raise HdfsStartError(f"{name}: {answer}")

    def log_tail(self, lines: int = 30) -> str:
        path = self.root / "hdfs.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

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
        with HdfsCluster() as hdfs:
            print(f"HDFS at {hdfs.url()} ({hdfs.start_seconds:.1f} s)")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    print("usage: python -m cairn.testing.hdfs [prepare|run]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
