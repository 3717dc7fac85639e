"""Jars of a test server, copied from Maven Central by the repository's poms into the per-user
cache of :mod:`cairn.testing.tool_cache`.

Invariant: a jar directory is complete or absent (the cache's rule); the Kafka broker
(``kafka/pom.xml``) and Hadoop's mini clusters (``hadoop/pom.xml``) fetch theirs here, and
without Maven or the network a ``MavenPrepareError`` says how to prepare them.

>>> pom_property(_repo_file("kafka", "pom.xml"), "kafka.version").count(".")
2
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from cairn.testing.tool_cache import ToolPrepareError, cached_build

__all__ = [
    "MavenPrepareError",
    "cached_directory",
    "copy_dependencies",
    "pom_jars",
    "pom_property",
]

log = logging.getLogger(__name__)

_MVN_TIMEOUT_S = 900.0


class MavenPrepareError(ToolPrepareError):
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


def cached_directory(name: str, build: Callable[[Path], None], *, fetch: bool, hint: str) -> Path:
    """``cache_root()/name`` of :mod:`cairn.testing.tool_cache`, built by ``build(staging)``
    on first use unless ``fetch`` is False (then ``MavenPrepareError`` naming ``hint``)."""
    return cached_build(name, build, fetch=fetch, hint=hint, error=MavenPrepareError)


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


def pom_jars(
    pom: Path,
    *,
    stem: str,
    version_property: str,
    libs_env: str,
    marker: str,
    fetch: bool,
    hint: str,
) -> Path:
    """The runtime jars of ``pom``: the directory the variable ``libs_env`` names (it must
    hold a jar matching the glob ``marker``), else ``<stem>-<version>-<pom digest>`` in the
    cache, copied by Maven on first use unless ``fetch`` is False (then ``hint`` says how)."""
    named = os.environ.get(libs_env)
    if named:
        libs = Path(named)
        if not any(libs.glob(marker)):
            raise MavenPrepareError(f"{libs_env}={named} holds no {marker}")
        return libs

    def build(staging: Path) -> None:
        copy_dependencies(pom, staging, libs_env=libs_env)

    version = pom_property(pom, version_property)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:8]
    return cached_directory(f"{stem}-{version}-{digest}", build, fetch=fetch, hint=hint)
