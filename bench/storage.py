"""Where a benchmark job's checkpoints go: ``file://`` under the run's work directory, or
``s3://`` on a SeaweedFS server the benchmark starts for the run.

Invariant: an S3 server started here lives exactly as long as the ``with`` block of
:func:`bench_storage` — it is stopped (SIGTERM, then SIGKILL) when the block ends, by an
exception too — binds only to 127.0.0.1 and keeps its data under the run's work directory;
jobs reach it only through the ``s3.*`` configuration keys Flink names
(``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``, ``s3.path.style.access``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cairn.common.storage_options import storage_options_for

__all__ = ["STORAGES", "StorageTarget", "bench_storage", "checkpoint_url", "fs_options"]

STORAGES = ("file", "s3")
BUCKET = "bench"


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
    if kind != "s3":
        raise ValueError(f"unknown storage {kind!r}; expected one of {', '.join(STORAGES)}")
    from cairn.testing.seaweedfs import SeaweedS3

    with SeaweedS3(bucket=BUCKET, root=os.path.join(work_dir, "seaweedfs")) as server:
        yield StorageTarget(server.url(), tuple(server.flink_config().items()))
