"""Checkpoint files on HDFS are private to the job's user and appear whole or not at all.

Invariant: every directory Cairn creates on HDFS is 0700 and every file 0600 (the mode is sent
with the create, never widened afterwards; the NameNode enforces it); a file that must appear
whole is written under a unique name beside its target and renamed into place, which the
NameNode applies atomically, and an exclusive publish renames only onto a free name
(``FileExistsError`` otherwise, decided by the NameNode, so two writers never both win).

The client is ``hdfs-native`` (``pip install 'cairn[hdfs]'``): HDFS's RPC spoken from Rust,
registered by its package as fsspec's ``hdfs://`` and ``viewfs://`` implementation, no JVM
in the workers. A forked child never drops a client (see ``_hold_clients_for_the_child``):
dropping one there would wait forever for threads the child does not have.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import uuid
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def open_private(fs: Any, path: str, *, overwrite: bool = True) -> Iterator[Any]:
    """A writer of a new 0600 file at ``path`` (parents created 0700), closed once on exit;
    ``overwrite=False``: ``FileExistsError`` if the name is taken."""
    from hdfs_native import WriteOptions

    options = WriteOptions(permission=FILE_MODE, overwrite=overwrite, create_parent=True)
    writer = fs.client.create(path, write_options=options)
    try:
        with writer:  # its close completes the file on the NameNode
            yield writer
    finally:
        # hdfs-native's close() leaves io.IOBase's closed flag unset, so the garbage collector
        # closes the writer again; after a close that failed (a DataNode lost mid-write) that
        # second close waits on the NameNode for minutes, in whichever thread drops it last.
        io.RawIOBase.close(writer)


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


_HELD_FOR_THE_CHILD: list[Any] = []


def _hold_clients_for_the_child() -> None:
    """Before a fork: hold every filesystem in hdfs-native's fsspec instance caches.

    fsspec clears its instance caches in a forked child (an at-fork hook); a client whose last
    reference goes there shuts its tokio runtime down, which waits for runtime threads that
    only the parent has: the child hangs before it can exec. PySpark starts its gateway JVM
    with a ``preexec_fn`` (which runs these hooks), after the pre-flight check made a client:
    ``SparkContext`` never came up. Held here, the child's copies are never dropped (a
    forked child execs or exits soon), and the parent lets go right after the fork.
    """
    module = sys.modules.get("hdfs_native.fsspec")  # no import inside a fork hook
    if module is None:
        return
    for fs_class in (module.HdfsFileSystem, module.ViewfsFileSystem):
        _HELD_FOR_THE_CHILD.extend(fs_class._cache.values())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_hold_clients_for_the_child, after_in_parent=_HELD_FOR_THE_CHILD.clear
    )
