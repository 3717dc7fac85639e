"""Jars of a test server, copied from Maven Central into a per-user cache, and the cache's rule.

Invariant: a cache directory (``~/.cache/cairn/<name>``) is complete or absent: it is built
in a fresh staging directory beside it, marked complete (``.complete``) and renamed into
place, so concurrent first uses never see half of one and a failed build leaves nothing.
The Kafka broker (``kafka/pom.xml``) and the HDFS mini cluster (``hadoop/pom.xml``) share it.

>>> pom_property(_repo_file("kafka", "pom.xml"), "kafka.version").count(".")
2
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "MavenPrepareError",
    "cache_root",
    "cached_directory",
    "copy_dependencies",
    "pom_property",
]

log = logging.getLogger(__name__)

_MVN_TIMEOUT_S = 900.0
COMPLETE = ".complete"


class MavenPrepareError(RuntimeError):
    """A server's jars could not be fetched (no Maven, no network to Maven Central)."""


def _repo_file(*parts: str) -> Path:
    # src/cairn/testing/maven_jars.py -> <repo>/<parts>
    return Path(__file__).resolve().parents[3].joinpath(*parts)


def repo_file(env: str, *parts: str) -> Path:
    """``<repo>/<parts>`` (e.g. ``kafka/pom.xml``), or the path the variable ``env`` names."""
    named = os.environ.get(env)
    return Path(named) if named else _repo_file(*parts)


def pom_property(pom: Path, name: str) -> str:
    """The value of ``<name>`` in the pom's properties (a version it pins)."""
    found = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    if found is None:
        raise MavenPrepareError(f"no <{name}> in {pom}")
    return found.group(1).strip()


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cairn"


def cached_directory(name: str, build: Callable[[Path], None], *, fetch: bool, hint: str) -> Path:
    """``cache_root()/name``, built by ``build(staging)`` on first use unless ``fetch`` is
    False (then ``MavenPrepareError`` naming ``hint``, the command that prepares it)."""
    target = cache_root() / name
    if (target / COMPLETE).exists():
        return target
    if not fetch:
        raise MavenPrepareError(f"{target} is not prepared; run: {hint}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=target.parent))
    try:
        started = time.monotonic()
        build(staging)
        (staging / COMPLETE).write_text(name + "\n")
        try:
            staging.rename(target)
        except OSError:
            if not (target / COMPLETE).exists():  # not another process's complete copy
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
        log.info("prepared %s (%.0f s)", target, time.monotonic() - started)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def copy_dependencies(pom: Path, into: Path, *, libs_env: str) -> None:
    """``mvn dependency:copy-dependencies`` of ``pom`` (runtime scope) into ``into``;
    ``libs_env``: the variable that names a directory of jars instead (for the message)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenPrepareError(
            "Maven (mvn) is not on PATH: it fetches the server's jars from Maven Central "
            f"(apt-get install maven), or set {libs_env} to a directory of the jars"
        )
    done = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={into}",
            "-DincludeScope=runtime",
        ],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=_MVN_TIMEOUT_S,
    )
    if done.returncode != 0 or not any(into.glob("*.jar")):
        raise MavenPrepareError(
            f"mvn dependency:copy-dependencies failed ({done.returncode}) for {pom}:\n"
            f"{(done.stdout + done.stderr)[-3000:]}"
        )
