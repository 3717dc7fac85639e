"""The Kafka broker's jars: Apache Kafka's own ``org.apache.kafka:kafka_2.13`` and its runtime
dependencies, copied from Maven Central by ``mvn dependency:copy-dependencies`` over the
repository's ``kafka/pom.xml`` into ``~/.cache/cairn/kafka-<version>/``.

Invariant: a cache directory is complete or absent (``cairn.testing.maven_jars``).
``CAIRN_KAFKA_LIBS`` may name another directory of jars (a Kafka distribution's ``libs/``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cairn.testing.maven_jars import (
    MavenPrepareError,
    cached_directory,
    copy_dependencies,
    pom_property,
    repo_file,
)

__all__ = ["KafkaPrepareError", "kafka_libs", "kafka_version", "prepare_hint"]

_LIBS_ENV = "CAIRN_KAFKA_LIBS"
_POM_ENV = "CAIRN_KAFKA_POM"

#: The broker's jars could not be fetched (no Maven, no network to Maven Central).
KafkaPrepareError = MavenPrepareError


def _repo_pom() -> Path:
    return repo_file(_POM_ENV, "kafka", "pom.xml")


def kafka_version(pom: Path | None = None) -> str:
    """The Kafka version the repository's pom pins (``<kafka.version>``).

    >>> import re
    >>> re.fullmatch(r"4\\.\\d+\\.\\d+", kafka_version()) is not None
    True
    """
    return pom_property(pom or _repo_pom(), "kafka.version")


def kafka_libs(*, fetch: bool = True) -> Path:
    """The directory of the broker's jars; fetched with Maven on first use (``fetch``)."""
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

    def build(staging: Path) -> None:
        copy_dependencies(pom, staging, libs_env=_LIBS_ENV)
        if not any(staging.glob("kafka_2.13-*.jar")):
            raise KafkaPrepareError(f"Maven copied no kafka_2.13-*.jar from {pom}")

    return cached_directory(f"kafka-{kafka_version(pom)}", build, fetch=fetch, hint=prepare_hint())


def prepare_hint() -> str:
    return f"{sys.executable} -m cairn.testing.kafka prepare"
