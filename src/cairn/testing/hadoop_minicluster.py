"""Hadoop's mini clusters as processes for tests: their jars, their compiled mains and the
control files a running one answers (``cairn.testing.hdfs``, ``cairn.testing.yarn``).

Invariant: the jars are ``org.apache.hadoop:hadoop-client-minicluster`` (the version of the
Hadoop client PySpark ships) and what ``MiniYARNCluster`` needs beside it, copied from Maven
Central over the repository's ``hadoop/pom.xml`` into ``~/.cache/cairn/hadoop-<version>-<pom
digest>/`` (a changed pom is a new cache); every ``hadoop/*.java`` main is compiled against
them into a cache named by the sources' digest (``python -m cairn.testing.hdfs prepare``,
which ``.ci/run`` calls). ``CAIRN_HADOOP_LIBS`` may name another directory of those jars.

A main says it serves by renaming ``<root>/ready`` into place (``await_ready`` waits for it);
a running main takes commands as files: ``send_command`` renames ``<root>/control/<name>`` into
place (never half written) and waits for ``<name>.done``, whose text is ``ok`` or the error.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cairn.testing.maven_jars import (
    MavenPrepareError,
    cached_directory,
    pom_jars,
    repo_file,
)

__all__ = [
    "JVM_OPTS",
    "MavenPrepareError",
    "await_ready",
    "hadoop_classpath",
    "java_tool",
    "send_command",
]

_LIBS_ENV = "CAIRN_HADOOP_LIBS"
_POM_ENV = "CAIRN_HADOOP_POM"
_COMMAND_TIMEOUT_S = 60.0
# Sized for a 2-core test machine; C1 only: about half the start-up CPU.
JVM_OPTS = ("-Xms64m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def _prepare_hint() -> str:
    return f"{sys.executable} -m cairn.testing.hdfs prepare"


def _hadoop_libs(*, fetch: bool) -> Path:
    return pom_jars(
        repo_file(_POM_ENV, "hadoop", "pom.xml"),
        stem="hadoop",
        version_property="hadoop.version",
        libs_env=_LIBS_ENV,
        marker="hadoop-client-minicluster-*.jar",
        fetch=fetch,
        hint=_prepare_hint(),
    )


def _compiled_mains(libs: Path, *, fetch: bool) -> Path:
    """The directory holding every ``hadoop/*.java`` main compiled against ``libs`` (cached
    by the sources' digest and the jars' directory)."""
    sources = sorted(repo_file("CAIRN_HADOOP_MAINS", "hadoop").glob("*.java"))
    if not sources:
        raise MavenPrepareError("no hadoop/*.java mains found")
    hashed = hashlib.sha256(str(libs).encode())
    for source in sources:
        hashed.update(source.name.encode() + source.read_bytes())
    digest = hashed.hexdigest()[:12]

    def build(staging: Path) -> None:
        done = subprocess.run(
            [java_tool("javac"), "-d", str(staging), "-cp", f"{libs}/*", *map(str, sources)],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
        if done.returncode != 0:
            raise MavenPrepareError(f"javac failed:\n{(done.stdout + done.stderr)[-3000:]}")

    return cached_directory(f"hadoop-main-{digest}", build, fetch=fetch, hint=_prepare_hint())


def hadoop_classpath(*, fetch: bool = True) -> str:
    """The class path that runs the mini clusters (compiled mains first, then the jars)."""
    libs = _hadoop_libs(fetch=fetch)
    return f"{_compiled_mains(libs, fetch=fetch)}{os.pathsep}{libs}/*"


def java_tool(name: str) -> str:
    """``java``/``javac`` of ``JAVA_HOME``, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", name)):
        return os.path.join(home, "bin", name)
    found = shutil.which(name)
    if found is None:
        raise MavenPrepareError(f"{name} not found (JAVA_HOME unset and no {name} on PATH)")
    return found


def send_command(
    root: Path,
    name: str,
    alive: Callable[[], bool],
    log_tail: Callable[[], str],
    error: type[Exception],
    timeout: float = _COMMAND_TIMEOUT_S,
) -> None:
    """Ask the main running under ``root`` to do ``name`` and wait for its answer; raises
    ``error`` (with the log's tail) if it answers otherwise, dies or takes too long."""
    control = root / "control"
    done = control / f"{name}.done"
    with contextlib.suppress(FileNotFoundError):
        done.unlink()
    tmp = control / f".{name}"
    tmp.write_text("")
    tmp.rename(control / name)
    deadline = time.monotonic() + timeout
    while not done.exists():
        if time.monotonic() > deadline or not alive():
            raise error(f"the mini cluster did not answer {name}: {log_tail()}")
        time.sleep(0.05)
    answer = done.read_text().strip()
    if answer != "ok":
        raise error(f"{name}: {answer}")


def await_ready(
    root: Path,
    what: str,
    exit_code: Callable[[], int | None],
    log_tail: Callable[[], str],
    error: type[Exception],
    timeout: float,
) -> str:
    """The text of ``<root>/ready`` once the main under ``root`` wrote it; raises ``error``
    (with the log's tail) if the process exits first (``exit_code()`` not None) or ``timeout``
    passes."""
    deadline = time.monotonic() + timeout
    ready = root / "ready"
    while time.monotonic() < deadline:
        code = exit_code()
        if code is not None:
            raise error(f"the {what} exited with {code}: {log_tail()}")
        if ready.exists():
            return ready.read_text()
        time.sleep(0.1)
    raise error(f"the {what} did not serve in time: {log_tail()}")
