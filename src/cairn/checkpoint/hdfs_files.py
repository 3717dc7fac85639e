"""Checkpoint files on HDFS are private to the job's user and appear whole or not at all.

Invariant: every directory Cairn creates on HDFS is 0700 and every file 0600 (the mode is sent
with the create, never widened afterwards; the NameNode enforces it); a file that must appear
whole is written under a unique name beside its target and renamed into place, which the
NameNode applies atomically, and an exclusive publish renames only onto a free name
(``FileExistsError`` otherwise, decided by the NameNode, so two writers never both win).

The client is ``hdfs-native`` (``pip install 'cairn[hdfs]'``): HDFS's RPC spoken from Rust,
registered by its package as fsspec's ``hdfs://`` and ``viewfs://`` implementation, no JVM
in the workers.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from cairn.checkpoint.local_files import DIR_MODE, FILE_MODE

__all__ = ["is_hdfs", "makedirs_private", "open_private", "publish", "write_private"]


def is_hdfs(fs: Any) -> bool:
    """Whether ``fs`` is hdfs-native's fsspec filesystem (``hdfs://`` or ``viewfs://``).

    >>> from fsspec.implementations.memory import MemoryFileSystem
    >>> is_hdfs(MemoryFileSystem())
    False
    """
    return type(fs).__module__.split(".")[0] == "hdfs_native"


def makedirs_private(fs: Any, path: str) -> None:
    """Create ``path`` and missing parents 0700 (the NameNode gives parents it creates the
    same mode); an existing directory is left as it is."""
    fs.mkdir(path, create_parents=True, permission=DIR_MODE)


def open_private(fs: Any, path: str, *, overwrite: bool = True) -> Any:
    """A writer of a new 0600 file at ``path`` (parents created 0700); ``overwrite=False``:
    ``FileExistsError`` if the name is taken."""
    from hdfs_native import WriteOptions

    options = WriteOptions(permission=FILE_MODE, overwrite=overwrite, create_parent=True)
    return fs.client.create(path, write_options=options)


def write_private(fs: Any, path: str, data: bytes, *, overwrite: bool = True) -> None:
    """Write ``data`` as a 0600 file at ``path``."""
    with open_private(fs, path, overwrite=overwrite) as writer:
        writer.write(data)


def publish(
    fs: Any,
    path: str,
    data: bytes,
    *,
    exclusive: bool,
    before_publish: Callable[[], None] | None = None,
) -> None:
    """Write ``data`` aside, then rename it to ``path`` (onto a free name only if
    ``exclusive``, else replacing what is there); readers see all of it or nothing."""
    tmp = f"{path}.inprogress-{uuid.uuid4().hex}"
    try:
        write_private(fs, tmp, data, overwrite=False)
        if before_publish is not None:
            before_publish()
        try:
            fs.client.rename(tmp, path, not exclusive)
        except FileExistsError:
            raise FileExistsError(f"{path} exists") from None
    finally:
        with contextlib.suppress(OSError):
            fs.client.delete(tmp, False)
