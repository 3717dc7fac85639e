"""Minimal ``StateFileWriter``/``StateFileReader`` implementations for tests and tools.

Invariant: a written file is never overwritten (a clashing name gets a numeric suffix) and
returned paths are relative to the store's root, like paths in real checkpoint handles.

>>> files = MemoryStateFiles()
>>> path = files.write_state_file("a.state", b"hello")
>>> files.read_state_range(path, 1, 3)
b'ell'
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cairn.ids import CheckpointId

__all__ = ["DirectoryStateFiles", "MemoryStateFiles"]


class DirectoryStateFiles:
    """State files in one local directory (a checkpoint directory)."""

    def __init__(
        self, directory: str | os.PathLike[str], checkpoint_id: CheckpointId = CheckpointId(1)
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._checkpoint_id = checkpoint_id

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self._checkpoint_id

    def write_state_file(self, name: str, data: bytes) -> str:
        stem, dot, ext = name.rpartition(".")
        if not dot:
            stem, ext = name, ""
        for n in range(1_000_000):
            candidate = name if n == 0 else f"{stem}-{n}{dot}{ext}"
            try:
                # Exclusive create: concurrent asynchronous snapshots never clobber each other.
                with open(self.directory / candidate, "xb") as f:
                    f.write(data)
                return candidate
            except FileExistsError:
                continue
        raise FileExistsError(f"no free file name for {name!r} in {self.directory}")

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        with open(self.directory / path, "rb") as f:
            f.seek(offset)
            return f.read(length)


class MemoryStateFiles:
    """State files in a dict (thread-safe); ``files`` may be edited to simulate corruption."""

    def __init__(self, checkpoint_id: CheckpointId = CheckpointId(1)) -> None:
        self.files: dict[str, bytes] = {}
        self._checkpoint_id = checkpoint_id
        self._lock = threading.Lock()

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self._checkpoint_id

    def write_state_file(self, name: str, data: bytes) -> str:
        with self._lock:
            candidate, n = name, 0
            while candidate in self.files:
                n += 1
                candidate = f"{name}-{n}"
            self.files[candidate] = bytes(data)
            return candidate

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        with self._lock:
            return self.files[path][offset : offset + length]
