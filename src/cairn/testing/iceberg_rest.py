"""A throw-away Apache Iceberg REST catalog for tests and local runs.

Invariant: the catalog is one JVM in its own process group that ``stop()`` ends (SIGTERM,
then SIGKILL), serving the Iceberg REST protocol at ``uri`` (127.0.0.1, an ephemeral port
kept across ``restart()``); its backing catalog is a JDBC catalog in a SQLite file and its
warehouse a directory, both under one temporary directory that ``stop()`` removes, so
``kill()`` then ``restart()`` brings the same tables back.

The server is Apache Iceberg's own REST fixture, ``org.apache.iceberg.rest.RESTCatalogServer``
(``org.apache.iceberg:iceberg-open-api``, classifier ``test-fixtures``; the main the
``apache/iceberg-rest-fixture`` image runs), configured as that image is, by ``CATALOG_*``
variables. Its jars come from Maven Central over the repository's ``iceberg-rest/pom.xml``
into ``~/.cache/cairn/iceberg-rest-<version>-<pom digest>/`` (``python -m
cairn.testing.iceberg_rest prepare``, which ``.ci/run`` calls); ``CAIRN_ICEBERG_REST_LIBS``
may name another directory of those jars.

Example::

    with IcebergRestCatalog() as rest:
        catalog = pyiceberg.catalog.load_catalog("rest", **rest.catalog_properties())
        catalog.create_namespace("db")

>>> IcebergRestCatalog.environment(8181, "/tmp/c")["CATALOG_REST_PORT"]
'8181'
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from cairn.testing.hadoop_minicluster import java_tool
from cairn.testing.managed_server import ManagedServer, die_with_parent, retry_on_port_clash
from cairn.testing.maven_jars import (
    MavenPrepareError,
    pom_jars,
    repo_file,
)
from cairn.testing.spark_cluster import free_port

__all__ = ["IcebergRestCatalog", "IcebergRestStartError", "MavenPrepareError", "rest_libs"]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"
_LIBS_ENV = "CAIRN_ICEBERG_REST_LIBS"
_POM_ENV = "CAIRN_ICEBERG_REST_POM"
_MAIN = "org.apache.iceberg.rest.RESTCatalogServer"
_START_TIMEOUT_S = 60.0
# Sized for a 2-core test machine; C1 only: about half the start-up CPU.
_JVM_OPTS = ("-Xms32m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class IcebergRestStartError(RuntimeError):
    """The catalog did not serve in time; the message carries its log's tail."""


def _prepare_hint() -> str:
    return f"{sys.executable} -m cairn.testing.iceberg_rest prepare"


def rest_libs(*, fetch: bool = True) -> Path:
    """The directory of the REST fixture's jars; fetched with Maven on first use (``fetch``)."""
    return pom_jars(
        repo_file(_POM_ENV, "iceberg-rest", "pom.xml"),
        stem="iceberg-rest",
        version_property="iceberg.version",
        libs_env=_LIBS_ENV,
        marker="iceberg-open-api-*-test-fixtures.jar",
        fetch=fetch,
        hint=_prepare_hint(),
    )


class IcebergRestCatalog(ManagedServer):
    """Iceberg's REST fixture server on 127.0.0.1 (``port``: default an ephemeral one);
    ``root``: where the SQLite catalog and the warehouse live (default: a temporary
    directory that ``stop()`` removes)."""

    def __init__(self, *, port: int | None = None, root: str | None = None) -> None:
        super().__init__(
            Path(root or tempfile.mkdtemp(prefix="cairn-iceberg-rest-")), own_root=root is None
        )
        self.port = port or free_port()
        self._fixed_port = port is not None
        self.start_seconds: float | None = None

    # -- what tests use ------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """``http://127.0.0.1:<port>``, the catalog's REST endpoint."""
        return f"http://{_HOST}:{self.port}"

    @property
    def warehouse(self) -> str:
        """``file:<root>/warehouse``: where the tables' data and metadata files go (in the
        ``file:/path`` form Iceberg's Java catalogs give locations, as Spark's would)."""
        return _file_location(self.root / "warehouse")

    def catalog_properties(self) -> dict[str, str]:
        """pyiceberg's ``load_catalog`` properties of this catalog (IcebergSink's
        ``catalog`` argument): ``type=rest``, ``uri``, ``warehouse``."""
        return {"type": "rest", "uri": self.uri, "warehouse": self.warehouse}

    @staticmethod
    def environment(port: int, root: str) -> dict[str, str]:
        """The ``CATALOG_*`` variables of the server (``CATALOG_A_B`` is the backing
        catalog's property ``a.b``, ``CATALOG_A__B`` is ``a-b``; ``rest.port`` is the port)."""
        return {
            "CATALOG_REST_PORT": str(port),
            "CATALOG_URI": f"jdbc:sqlite:{root}/catalog.db",
            "CATALOG_JDBC_USER": "cairn",
            "CATALOG_JDBC_PASSWORD": "cairn",
            "CATALOG_WAREHOUSE": _file_location(Path(root, "warehouse")),
        }

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> IcebergRestCatalog:
        """Start the JVM and wait until ``GET /v1/config`` answers (on new ports when the
        chosen one was taken meanwhile, unless the port was given)."""
        if self._fixed_port:
            return self._start_once()
        return retry_on_port_clash(self._start_once, self._new_port)

    def _new_port(self) -> None:
        self.port = free_port()

    def _start_once(self) -> IcebergRestCatalog:
        classpath = f"{rest_libs()}{os.sep}*"
        (self.root / "warehouse").mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        variables = self.environment(self.port, str(self.root))
        args = [
            "env",  # the server reads its catalog's properties from the environment only
            *(f"{k}={v}" for k, v in variables.items()),
            java_tool("java"),
            *_JVM_OPTS,
            "-cp",
            classpath,
            _MAIN,
        ]
        self._spawn(args, "iceberg-rest.log", preexec_fn=die_with_parent)
        self._guard_start(self._await_ready)
        self.start_seconds = time.monotonic() - started
        log.info("Iceberg REST catalog at %s served after %.1f s", self.uri, self.start_seconds)
        return self

    def _await_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_tail()
                raise IcebergRestStartError(f"the REST catalog exited with {code}: {tail}")
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as answer,
            ):
                if "defaults" in json.loads(answer.read()):
                    return
            time.sleep(0.1)
        raise IcebergRestStartError(f"the REST catalog did not serve in time: {self.log_tail()}")

    def restart(self) -> IcebergRestCatalog:
        """Stop (SIGTERM) if running, then start again on the same port and files."""
        self._end_process(self.stop_signal)
        self._fixed_port = True
        return self.start()


def _file_location(path: Path) -> str:
    """``file:/abs/path``, Hadoop's form of a local location."""
    return f"file:{path.resolve()}"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cairn.testing.iceberg_rest prepare``: fetch the jars (``.ci/run``);
    ``python -m cairn.testing.iceberg_rest run``: a catalog until Ctrl-C."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "prepare"
    if command == "prepare":
        try:
            print(rest_libs())
        except MavenPrepareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if command == "run":
        with IcebergRestCatalog() as rest:
            print(f"Iceberg REST catalog at {rest.uri} ({rest.start_seconds:.1f} s)")
            print(json.dumps(rest.catalog_properties()))
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    print("usage: python -m cairn.testing.iceberg_rest [prepare|run]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
