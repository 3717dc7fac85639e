"""Each store's server, started for one test (a test that stops or pauses it must not share
the session's): the same face for all, ``url(...)``, ``flink_config()``, ``kill()``,
``restart()`` (same port, same data), ``pause()``/``resume()``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

__all__ = ["STORES", "start_store"]

STORES = ("hdfs", "gcs", "azure", "s3")


def _missing(exc: Exception) -> None:
    """A store that cannot be prepared here skips the test, except under CI."""
    if os.environ.get("CI"):
        raise exc
    pytest.skip(str(exc))


@contextlib.contextmanager
def start_store(
    name: str, tmp_path: Path, *, hadoop_conf: Mapping[str, str] | None = None
) -> Iterator[Any]:
    root = tmp_path / f"{name}-server"
    root.mkdir()
    server: Any
    if name == "hdfs":
        from cairn.testing.hdfs import HdfsCluster, MavenPrepareError, hadoop_classpath

        try:
            import hdfs_native  # noqa: F401

            hadoop_classpath()
        except (ImportError, MavenPrepareError) as exc:
            _missing(exc)
        server = HdfsCluster(datanodes=2, root=str(root), hadoop_conf=hadoop_conf)
    elif name == "gcs":
        from cairn.testing.gcs import FakeGcs

        server = FakeGcs(root=str(root))
    elif name == "azure":
        from cairn.testing.azurite import Azurite

        server = Azurite(container="cairn", root=str(root))
    elif name == "s3":
        from cairn.testing.seaweedfs import SeaweedS3

        server = SeaweedS3(bucket="faults", root=str(root))
    else:
        raise ValueError(f"unknown store {name!r}")
    with server:
        yield server
