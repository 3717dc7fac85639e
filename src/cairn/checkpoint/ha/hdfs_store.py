"""``ConditionalStore`` on HDFS: generation files published by a rename the NameNode refuses
onto a taken name.

Invariant: a record is a directory of generation files ``<gen>`` (zero-padded), each written
whole under a unique name (a create with overwrite off, 0600) and renamed to its generation
without overwrite: the NameNode applies the rename atomically and only if the name is free,
so a write of generation g+1 succeeds for exactly one writer, who must have read generation
g, and no reader ever sees a generation half written (a file created in place would be
visible, and held under a writer's lease, while it is written). The current record is the
highest generation. Generation 1 is never deleted (so a second ``create`` always conflicts,
and a ``replace`` of a record without it does too);
older generations are pruned, and a writer whose generation turns out not to be the highest
after its rename (it read a generation pruned since) withdraws it and reports a conflict, as
``FileStore`` does on a local disk. ``check_conditional`` proves at start that the server
refuses both (an HDFS-compatible gateway might not): high availability is refused otherwise.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from typing import Any

from cairn.checkpoint import hdfs_files
from cairn.checkpoint.ha.store import Versioned, WriteConflict

__all__ = ["HdfsStore", "UnsupportedConditionalRename"]

_KEEP = 3  # generations kept besides the first: readers listing just before a write
_WIDTH = 12


class UnsupportedConditionalRename(RuntimeError):
    """The server renamed onto a taken name though told not to overwrite."""


class HdfsStore:
    """Records under the directory ``root`` (created 0700) of an hdfs-native filesystem."""

    def __init__(self, fs: Any, root: str) -> None:
        self._fs = fs
        self.root = root.rstrip("/") or "/"
        hdfs_files.makedirs_private(fs, self.root)

    @property
    def description(self) -> str:
        return str(self._fs.unstrip_protocol(self.root))

    def read(self, name: str) -> Versioned | None:
        for _ in range(10):  # a generation may be pruned between listing and reading it
            gens = self._generations(name)
            if not gens:
                return None
            try:
                return Versioned(self._fs.cat_file(self._path(name, gens[-1])), str(gens[-1]))
            except FileNotFoundError:
                continue
        raise OSError(f"record {name!r} in {self.description} keeps changing while read")

    def create(self, name: str, data: bytes) -> Versioned:
        if not self._publish(name, 1, data):
            raise WriteConflict(f"record {name!r} exists")
        return Versioned(bytes(data), "1")

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        gen = int(expected) + 1
        conflict = f"record {name!r} changed since version {expected} was read"
        # Generation 1 is never deleted: without it the record is absent, whatever was read.
        if not self._fs.exists(self._path(name, 1)) or not self._publish(name, gen, data):
            raise WriteConflict(conflict)
        if self._generations(name)[-1] != gen:  # we read a generation pruned since
            with contextlib.suppress(FileNotFoundError):
                self._fs.rm_file(self._path(name, gen))
            raise WriteConflict(conflict)
        self._prune(name, gen)
        return Versioned(bytes(data), str(gen))

    def check_conditional(self) -> None:
        """Raise ``UnsupportedConditionalRename`` unless the server refuses a second create
        and a replace naming a stale version (probed on a throw-away record)."""
        probe = f".cairn-ha-probe-{uuid.uuid4().hex}"
        try:
            first = self.create(probe, b"1")
            self.replace(probe, b"2", first.version)
            for stale in (None, first.version):  # a second create, a replace of a stale one
                try:
                    if stale is None:
                        self.create(probe, b"3")
                    else:
                        self.replace(probe, b"4", stale)
                except WriteConflict:
                    continue
                raise UnsupportedConditionalRename(
                    f"the HDFS at {self.description} renamed onto a taken name though told not "
                    "to overwrite; high availability needs that refusal"
                )
        finally:
            with contextlib.suppress(OSError):
                self._fs.rm(posixpath.join(self.root, probe), recursive=True)

    def _publish(self, name: str, gen: int, data: bytes) -> bool:
        try:
            hdfs_files.publish(self._fs, self._path(name, gen), data, exclusive=True)
        except FileExistsError:
            return False
        return True

    def _prune(self, name: str, current: int) -> None:
        for gen in self._generations(name):
            if 1 < gen < current - _KEEP:
                with contextlib.suppress(FileNotFoundError):
                    self._fs.rm_file(self._path(name, gen))

    def _generations(self, name: str) -> list[int]:
        try:
            names = self._fs.ls(posixpath.join(self.root, name), detail=False)
        except FileNotFoundError:
            return []
        return sorted(int(b) for b in map(posixpath.basename, names) if b.isdigit())

    def _path(self, name: str, gen: int) -> str:
        return posixpath.join(self.root, name, f"{gen:0{_WIDTH}d}")
