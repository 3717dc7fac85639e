"""Where a benchmark job's checkpoints go: ``file://`` under the run's work directory, or a
store the benchmark starts for the run from the repository's own test servers: ``s3://`` on
SeaweedFS, ``hdfs://`` on Hadoop's MiniDFSCluster, ``gs://`` on fake-gcs-server, ``abfs://``
on Azurite.

Invariant: a server started here lives exactly as long as the ``with`` block of
:func:`bench_storage` — it is stopped (SIGTERM, then SIGKILL) when the block ends, by an
exception too — binds only to 127.0.0.1 and keeps its data under the run's work directory;
jobs reach it only through the configuration keys Flink names (``s3.*``, ``flink.hadoop.*``,
``gs.*``, ``fs.azure.*``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cairn.common.storage_options import storage_options_for

__all__ = ["STORAGES", "StorageTarget", "bench_storage", "checkpoint_url", "fs_options"]

STORAGES = ("file", "s3", "hdfs", "gcs", "azure")
BUCKET = "bench"
# Each server's data directory under the run's work directory (kept with --keep-dir).
_SERVER_DIRS = {"s3": "seaweedfs", "hdfs": "hdfs", "gcs": "fake-gcs", "azure": "azurite"}


@dataclass(frozen=True)
class StorageTarget:
    """The checkpoint root of a run: ``None`` for local directories, else an S3 URL, plus
    the configuration keys (``s3.*``) a job needs to reach it."""

    root: str | None
    config: tuple[tuple[str, str], ...] = ()


def checkpoint_url(root: str | None, local_dir: str) -> str:
    """The checkpoint storage URL for a job whose local checkpoint directory would be
    ``local_dir``: that directory, or the same absolute path under the S3 ``root`` (unique
    per run, since the work directory is).

    >>> checkpoint_url(None, "/tmp/run-1/checkpoints")
    'file:///tmp/run-1/checkpoints'
    >>> checkpoint_url("s3://bench", "/tmp/run-1/checkpoints")
    's3://bench/tmp/run-1/checkpoints'
    """
    if root is None:
        return "file://" + os.path.abspath(local_dir)
    return root.rstrip("/") + "/" + os.path.abspath(local_dir).lstrip("/")


def fs_options(url: str, config: Mapping[str, str]) -> dict[str, Any]:
    """fsspec storage options for ``url`` from the ``s3.*`` keys of ``config`` (strings, as
    in a configuration file); ``{}`` for local URLs.

    >>> opts = fs_options("s3://b/x", {"s3.endpoint": "http://127.0.0.1:9",
    ...                                "s3.path.style.access": "false"})
    >>> opts["client_kwargs"]["endpoint_url"], "s3" in opts["config_kwargs"]
    ('http://127.0.0.1:9', False)
    >>> fs_options("file:///tmp/x", {"s3.access-key": "k"})
    {}
    """
    resolved: dict[str, Any] = dict(config)
    style = resolved.get("s3.path.style.access")
    if style is not None:
        resolved["s3.path.style.access"] = str(style).strip().lower() == "true"
    return storage_options_for(url, resolved)


@contextmanager
def bench_storage(kind: str, work_dir: str) -> Iterator[StorageTarget]:
    """The checkpoint storage of one benchmark run; ``"s3"`` starts SeaweedFS (bucket
    ``bench``) with its data in ``work_dir/seaweedfs`` and stops it on leaving.

    >>> with bench_storage("file", "/tmp/x") as target:
    ...     target
    StorageTarget(root=None, config=())
    """
    if kind == "file":
        yield StorageTarget(None)
        return
    if kind not in STORAGES:
        raise ValueError(f"unknown storage {kind!r}; expected one of {', '.join(STORAGES)}")
    root = os.path.join(work_dir, _SERVER_DIRS[kind])
    os.makedirs(root, exist_ok=True)
    server: Any
    if kind == "s3":
        from cairn.testing.seaweedfs import SeaweedS3

        server = SeaweedS3(bucket=BUCKET, root=root)
    elif kind == "hdfs":
        from cairn.testing.hdfs import HdfsCluster

        server = HdfsCluster(datanodes=1, root=root)
    elif kind == "gcs":
        from cairn.testing.gcs import FakeGcs

        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # docs/storage.md
        server = FakeGcs(bucket=BUCKET, root=root)
    else:
        from cairn.testing.azurite import Azurite

        server = Azurite(container=BUCKET, root=root)
    with server:
        yield StorageTarget(server.url(), tuple(server.flink_config().items()))
