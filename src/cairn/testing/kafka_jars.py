"""The Kafka broker's jars: Apache Kafka's own ``org.apache.kafka:kafka_2.13`` and its runtime
dependencies, copied from Maven Central by ``mvn dependency:copy-dependencies`` over the
repository's ``kafka/pom.xml`` into ``~/.cache/cairn/kafka-<version>/``.

Invariant: a cache directory is complete or absent: fetching copies into a fresh directory,
marks it complete and renames it into place, so concurrent first uses never see half of one.
``CAIRN_KAFKA_LIBS`` may name another directory of jars (a Kafka distribution's ``libs/``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["KafkaPrepareError", "kafka_libs", "kafka_version", "prepare_hint"]

log = logging.getLogger(__name__)

_MVN_TIMEOUT_S = 900.0
_LIBS_ENV = "CAIRN_KAFKA_LIBS"
_POM_ENV = "CAIRN_KAFKA_POM"
_COMPLETE = ".complete"


class KafkaPrepareError(RuntimeError):
    """The broker's jars could not be fetched (no Maven, no network to Maven Central)."""


def _repo_pom() -> Path:
    env = os.environ.get(_POM_ENV)
    if env:
        return Path(env)
    # src/cairn/testing/kafka_jars.py -> <repo>/kafka/pom.xml
    return Path(__file__).resolve().parents[3] / "kafka" / "pom.xml"


def kafka_version(pom: Path | None = None) -> str:
    """The Kafka version the repository's pom pins (``<kafka.version>``).

    >>> re.fullmatch(r"4\\.\\d+\\.\\d+", kafka_version()) is not None
    True
    """
    text = (pom or _repo_pom()).read_text()
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", text)
    if found is None:
        raise KafkaPrepareError(f"no <kafka.version> in {pom or _repo_pom()}")
    return found.group(1).strip()


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cairn"


def kafka_libs(*, fetch: bool = True) -> Path:
    """The directory of the broker's jars; fetched with Maven on first use (``fetch``).

    Fetching copies into a fresh directory and renames it into place, so concurrent first
    uses never see half a directory; a complete one holds a ``.complete`` marker.
    """
    env = os.environ.get(_LIBS_ENV)
    if env:
        libs = Path(env)
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise KafkaPrepareError(f"{_LIBS_ENV}={env} holds no kafka_2.13-*.jar")
        return libs
    pom = _repo_pom()
    if not pom.exists():
        raise KafkaPrepareError(
            f"the Kafka pom {pom} is missing; set {_POM_ENV} (a copy of the repository's "
            f"kafka/pom.xml) or {_LIBS_ENV} (a directory of Kafka's jars)"
        )
    target = _cache_root() / f"kafka-{kafka_version(pom)}"
    if (target / _COMPLETE).exists():
        return target
    if not fetch:
        raise KafkaPrepareError(f"Kafka's jars are not in {target}; run: {prepare_hint()}")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaPrepareError(
            "Maven (mvn) is not on PATH: it fetches the Kafka broker's jars from Maven "
            f"Central (apt-get install maven), or set {_LIBS_ENV} to a directory of Kafka's jars"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
    try:
        started = time.monotonic()
        done = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            timeout=_MVN_TIMEOUT_S,
        )
        if done.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
            raise KafkaPrepareError(
                f"mvn dependency:copy-dependencies failed ({done.returncode}) for {pom}:\n"
                f"{(done.stdout + done.stderr)[-3000:]}"
            )
        (staging / _COMPLETE).write_text(kafka_version(pom) + "\n")
        try:
            staging.rename(target)
        except OSError:
            if not (target / _COMPLETE).exists():  # not another process's complete copy
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
        log.info("Kafka jars in %s (%.0f s)", target, time.monotonic() - started)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def prepare_hint() -> str:
    return f"{sys.executable} -m cairn.testing.kafka prepare"
