"""Each store's server, started for one test (a test that stops or pauses it must not share
the session's): the same face for all, ``url(...)``, ``flink_config()``, ``kill()``,
``restart()`` (same port, same data), ``pause()``/``resume()``; with ``data_disk``, its data
(HDFS: the DataNodes' blocks) on a small disk of its own to fill."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.testing.small_disk import SmallDisk

__all__ = ["STORES", "data_dir", "start_store"]

STORES = ("hdfs", "gcs", "azure", "s3")


def _missing(exc: Exception) -> None:
    """A store that cannot be prepared here skips the test, except under CI."""
    if os.environ.get("CI"):
        raise exc
    pytest.skip(str(exc))


def _root(name: str, tmp_path: Path) -> Path:
    return tmp_path / f"{name}-server"


def data_dir(name: str, tmp_path: Path) -> Path:
    """Where ``start_store(name, tmp_path)``'s server keeps its data (the object stores'
    objects, HDFS's DataNodes' blocks; a ``data_disk`` goes there)."""
    return _root(name, tmp_path) / "data"


@contextlib.contextmanager
def start_store(
    name: str,
    tmp_path: Path,
    *,
    hadoop_conf: Mapping[str, str] | None = None,
    data_disk: SmallDisk | None = None,
) -> Iterator[Any]:
    """``name``'s server under ``tmp_path``; ``data_disk``: a small disk on its
    :func:`data_dir`, opened here and closed after the server stopped."""
    root = _root(name, tmp_path)
    root.mkdir()
    with contextlib.ExitStack() as stack:
        if data_disk is not None:
            assert data_disk.path == data_dir(name, tmp_path), data_disk.path
            stack.enter_context(data_disk)
        own = data_disk is not None
        yield stack.enter_context(_server(name, root, hadoop_conf, own, tmp_path))


def _server(
    name: str, root: Path, hadoop_conf: Mapping[str, str] | None, own_data: bool, tmp: Path
) -> Any:
    server: Any
    if name == "hdfs":
        from cairn.testing.hdfs import HdfsCluster, MavenPrepareError, hadoop_classpath

        try:
            import hdfs_native  # noqa: F401

            hadoop_classpath()
        except (ImportError, MavenPrepareError) as exc:
            _missing(exc)
        blocks = str(data_dir(name, tmp)) if own_data else None
        server = HdfsCluster(datanodes=2, root=str(root), hadoop_conf=hadoop_conf, data_dir=blocks)
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
    return server
