"""``ConditionalStore`` on a local (or shared POSIX) filesystem, without locks.

Invariant: a record is a directory of generation files ``<gen>`` (zero-padded), each written
aside, fsynced and published with ``link()``, which fails if the name exists: a write of
generation g+1 succeeds for exactly one writer, who must have read generation g. The
current record is the highest generation. Generation 1 is never deleted (so a second
``create`` always conflicts); older generations are pruned, and a writer whose generation
turns out not to be the highest after its link (it read a generation pruned since) withdraws
its file and reports a conflict: a lost race may be reported as lost, never as won. No
process ever holds a lock, so a stopped process blocks nobody.

>>> import tempfile
>>> store = FileStore(tempfile.mkdtemp())
>>> v1 = store.create("lease", b"a")
>>> store.replace("lease", b"b", expected=v1.version).version
'2'
>>> store.create("lease", b"c")
Traceback (most recent call last):
...
cairn.checkpoint.ha.store.WriteConflict: record 'lease' exists
"""

from __future__ import annotations

import contextlib
import os
import uuid

from cairn.checkpoint import local_files
from cairn.checkpoint.ha.store import Versioned, WriteConflict

__all__ = ["FileStore"]

_KEEP = 3  # generations kept besides the first: readers listing just before a write
_WIDTH = 12


class FileStore:
    """Records under the directory ``root`` (created 0700)."""

    def __init__(self, root: str) -> None:
        self.root = root
        local_files.makedirs_private(root)

    @property
    def description(self) -> str:
        return "file://" + self.root

    def read(self, name: str) -> Versioned | None:
        for _ in range(10):  # a generation may be pruned between listing and reading it
            gens = self._generations(name)
            if not gens:
                return None
            try:
                with open(self._path(name, gens[-1]), "rb") as f:
                    return Versioned(f.read(), str(gens[-1]))
            except FileNotFoundError:
                continue
        raise OSError(f"record {name!r} in {self.root} keeps changing while read")

    def create(self, name: str, data: bytes) -> Versioned:
        local_files.makedirs_private(os.path.join(self.root, name))
        if not self._publish(name, 1, data):
            raise WriteConflict(f"record {name!r} exists")
        return Versioned(bytes(data), "1")

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        gen = int(expected) + 1
        if not self._publish(name, gen, data):
            raise WriteConflict(f"record {name!r} changed since version {expected} was read")
        if self._generations(name)[-1] != gen:  # we read a generation pruned since
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._path(name, gen))
            raise WriteConflict(f"record {name!r} changed since version {expected} was read")
        self._prune(name, gen)
        return Versioned(bytes(data), str(gen))

    def _publish(self, name: str, gen: int, data: bytes) -> bool:
        directory = os.path.join(self.root, name)
        tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
        local_files.write_private(tmp, data, sync=True)
        try:
            os.link(tmp, self._path(name, gen))
        except FileExistsError:
            return False
        finally:
            os.remove(tmp)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)  # the new name survives a crash of the machine
        finally:
            os.close(fd)
        return True

    def _prune(self, name: str, current: int) -> None:
        for gen in self._generations(name):
            if 1 < gen < current - _KEEP:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self._path(name, gen))

    def _generations(self, name: str) -> list[int]:
        try:
            names = os.listdir(os.path.join(self.root, name))
        except FileNotFoundError:
            return []
        return sorted(int(n) for n in names if n.isdigit())

    def _path(self, name: str, gen: int) -> str:
        return os.path.join(self.root, name, f"{gen:0{_WIDTH}d}")
