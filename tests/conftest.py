"""Shared fixtures and the test tiers: one local SparkSession per test session, executor
parametrization, and the ``spark`` marker kept honest.

Invariant: every test that starts Spark carries the ``spark`` marker, so ``-m "not spark"``
(the fast tier) never starts a JVM. Tests using the ``spark`` fixture, ``executor_conf[spark]``
or the ``cluster`` marker are marked automatically; any other test that starts Spark without
the marker fails. Unmarked tests run first (also in a full run), while no session exists, with
``SPARK_HOME`` pointing at a stand-in ``spark-submit`` that records the attempt and exits 1;
the check therefore covers Spark started in the test process and in its child processes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# gcsfs's experimental gRPC bucket probe cannot reach the GCS emulator (60 s per call); set
# before gcsfs is imported here, in Spark's Python workers and in job subprocesses.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

SPARK = "spark"
_LAUNCHES = "launches"
_REFUSE_SPARK_SUBMIT = """#!/bin/sh
# Stand-in spark-submit for tests not marked 'spark' (tests/conftest.py): record, refuse.
printf '%s\\n' "${PYTEST_CURRENT_TEST:-?}" >> "$(dirname "$0")/../launches"
echo "cairn tests: a test not marked 'spark' tried to start Spark; add @pytest.mark.spark" >&2
exit 1
"""
# A pytest-xdist worker inherits the controller's environment, stand-in included: the real
# SPARK_HOME (or its absence, "") travels under a key of its own.
_REAL_SPARK_HOME = "CAIRN_TESTS_REAL_SPARK_HOME"
_real_spark_home: str | None = (
    os.environ.get(_REAL_SPARK_HOME, os.environ.get("SPARK_HOME")) or None
)
_stand_in_home: Path | None = None
_session_tmp: str | None = None


def _starts_spark(item: pytest.Item) -> bool:
    uses_session = SPARK in getattr(item, "fixturenames", ())
    return uses_session or item.get_closest_marker("cluster") is not None


def pytest_configure(config: pytest.Config) -> None:
    global _stand_in_home, _session_tmp
    # One temporary directory per test session, inherited by every process the tests start
    # (Spark workers, CLI calls): the job registry, the job archive and default checkpoint
    # roots under <tmp> stay the session's own instead of the user's shared ones.
    _session_tmp = tempfile.mkdtemp(prefix="cairn-tests-")
    os.environ[_REAL_SPARK_HOME] = _real_spark_home or ""
    os.environ["TMPDIR"] = _session_tmp
    tempfile.tempdir = None  # re-read TMPDIR
    _stand_in_home = Path(tempfile.mkdtemp(prefix="cairn-no-spark-"))
    script = _stand_in_home / "bin" / "spark-submit"
    script.parent.mkdir()
    script.write_text(_REFUSE_SPARK_SUBMIT)
    script.chmod(0o755)
    os.environ["SPARK_HOME"] = str(_stand_in_home)


def pytest_unconfigure(config: pytest.Config) -> None:
    _use_spark_home(_real_spark_home)
    if _stand_in_home is not None:
        shutil.rmtree(_stand_in_home, ignore_errors=True)
    if _session_tmp is not None:
        shutil.rmtree(_session_tmp, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _starts_spark(item):
            item.add_marker(SPARK)
        if "kafka_broker" in getattr(item, "fixturenames", ()):
            # The broker starts in seconds: never in the fast tier.
            item.add_marker("kafka")
            item.add_marker("slow")
        if "hdfs" in getattr(item, "fixturenames", ()):
            item.add_marker("hdfs")  # the mini cluster starts in ~8 s: never in the fast tier
            item.add_marker("slow")
        if "yarn" in getattr(item, "fixturenames", ()):
            item.add_marker("yarn")  # ~6 s to start, and jobs on it start Spark: never fast
            item.add_marker("slow")
        if "iceberg_rest" in getattr(item, "fixturenames", ()):
            item.add_marker("iceberg_rest")  # a JVM, ~1.5 s to start: never in the fast tier
            item.add_marker("slow")
    # Stable: each tier keeps its order; no Spark session exists while unmarked tests run.
    # The tests on the session's standalone cluster run last and together, so that the
    # cluster (tests/integration/conftest.py) is up only while they run.
    items.sort(
        key=lambda item: (
            item.get_closest_marker(SPARK) is not None,
            item.get_closest_marker("cluster") is not None,
        )
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    marked = item.get_closest_marker(SPARK) is not None
    _use_spark_home(_real_spark_home if marked else str(_stand_in_home))
    try:
        return (yield)
    finally:
        _use_spark_home(str(_stand_in_home))


@pytest.fixture(autouse=True)
def _spark_only_when_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test not marked ``spark`` that tried to start Spark (here or in a child)."""
    yield
    if _stand_in_home is None or request.node.get_closest_marker(SPARK) is not None:
        return
    launches = _stand_in_home / _LAUNCHES
    if launches.exists():
        attempts = launches.read_text().split("\n")
        launches.unlink()
        pytest.fail(
            f"{request.node.nodeid} started Spark but is not marked 'spark' "
            f"(add @pytest.mark.spark or use the spark fixture): {attempts[0]}",
            pytrace=False,
        )


def _use_spark_home(value: str | None) -> None:
    if value is None:
        os.environ.pop("SPARK_HOME", None)
    else:
        os.environ["SPARK_HOME"] = value


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from cairn.deploy.spark_session import get_or_create_spark

    session = get_or_create_spark(None, 4, {})
    yield session
    session.stop()


@pytest.fixture(params=["inprocess", pytest.param(SPARK, marks=pytest.mark.spark)])
def executor_conf(request: pytest.FixtureRequest) -> dict[str, str]:
    """Configuration selecting each executor; the Spark one runs on real local Spark."""
    if request.param == SPARK:
        request.getfixturevalue(SPARK)
    return {"cairn.executor": request.param}


@pytest.fixture
def inprocess_conf() -> dict[str, str]:
    return {"cairn.executor": "inprocess"}


@pytest.fixture(scope="session")
def seaweed() -> Iterator[Any]:
    """A real SeaweedFS S3 server on 127.0.0.1 with bucket ``cairn``, started once."""
    from cairn.testing.seaweedfs import SeaweedS3

    with SeaweedS3(bucket="cairn") as server:
        yield server


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[Any]:
    """A real GCS emulator (fake-gcs-server) on 127.0.0.1 with bucket ``cairn``, started once."""
    from cairn.testing.gcs import FakeGcs

    with FakeGcs(bucket="cairn") as server:
        yield server


@pytest.fixture(scope="session")
def azurite() -> Iterator[Any]:
    """A real Azure Blob emulator (Azurite) on 127.0.0.1 with container ``cairn``, started
    once."""
    from cairn.testing.azurite import Azurite

    with Azurite(container="cairn") as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real PostgreSQL server on 127.0.0.1 (Debian's binaries), started once. Without
    PostgreSQL installed the test is skipped, except under CI (``.ci/run`` installs it)."""
    from cairn.testing.postgres import PostgresServer, postgres_bindir

    try:
        postgres_bindir()
    except FileNotFoundError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Any]:
    """A real Apache Kafka broker (KRaft, one node) on 127.0.0.1, started once; its jars come
    from Maven Central (kafka/pom.xml, cached). Without Maven or the jars the test is skipped,
    except under CI (``.ci/run`` prepares them)."""
    from cairn.testing.kafka import KafkaBroker, KafkaPrepareError, kafka_libs

    try:
        kafka_libs()
    except KafkaPrepareError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    with KafkaBroker(quick_jvm=True) as broker:
        yield broker


@pytest.fixture(scope="session")
def hdfs() -> Iterator[Any]:
    """A real HDFS (Hadoop's MiniDFSCluster: a NameNode and two DataNodes, files replicated
    twice) on 127.0.0.1, started once; its jars come from Maven Central (hadoop/pom.xml,
    cached). Without Maven, the jars or the hdfs-native client the test is skipped, except
    under CI (``.ci/run`` prepares them)."""
    from cairn.testing.hdfs import HdfsCluster, MavenPrepareError, hadoop_classpath

    try:
        import hdfs_native  # noqa: F401

        hadoop_classpath()
    except (MavenPrepareError, ImportError) as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    with HdfsCluster(datanodes=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def iceberg_rest() -> Iterator[Any]:
    """A real Apache Iceberg REST catalog (Iceberg's own RESTCatalogServer over a SQLite JDBC
    catalog, warehouse on local files) on 127.0.0.1, started once; its jars come from Maven
    Central (iceberg-rest/pom.xml, cached). Without Maven or the jars the test is skipped,
    except under CI (``.ci/run`` prepares them)."""
    from cairn.testing.iceberg_rest import IcebergRestCatalog, MavenPrepareError, rest_libs

    try:
        rest_libs()
    except MavenPrepareError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    with IcebergRestCatalog() as catalog:
        yield catalog


@pytest.fixture(scope="session")
def yarn() -> Iterator[Any]:
    """A real YARN (Hadoop's MiniYARNCluster: a ResourceManager and two NodeManagers) on this
    machine, started once, from the same cached Hadoop jars as the ``hdfs`` fixture. Without
    Maven or the jars the test is skipped, except under CI (``.ci/run`` prepares them)."""
    from cairn.testing.hadoop_minicluster import MavenPrepareError, hadoop_classpath
    from cairn.testing.yarn import YarnCluster

    try:
        hadoop_classpath()
    except MavenPrepareError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    with YarnCluster(nodemanagers=2) as cluster:
        yield cluster
