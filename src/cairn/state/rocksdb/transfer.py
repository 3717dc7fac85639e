"""Moving RocksDB checkpoints between the worker's disk and the checkpoint storage.

Invariant: ``upload`` reads only the files of a finished local RocksDB checkpoint (hard links
the task thread never writes again), so it runs on a snapshot thread while processing goes
on; ``download`` checks every file's size and CRC-32 before RocksDB opens it, so a corrupt or
missing file fails the restore with its name, never a half-opened database.
"""

from __future__ import annotations

import logging
import os
import shutil
import zlib

from cairn.checkpoint.handles import (
    RocksDBKeyedStateHandle,
    RocksDBStateFile,
    StateFileReader,
    StateFileWriter,
)
from cairn.state.errors import CorruptStateError
from cairn.state.key_groups import KeyGroupRange

__all__ = ["download", "upload"]

log = logging.getLogger(__name__)

_CHUNK = 64 << 20  # bytes read from storage at once when downloading a file


def upload(
    local_dir: str, writer: StateFileWriter, name_prefix: str, key_range: KeyGroupRange
) -> RocksDBKeyedStateHandle:
    """Write every file of the local checkpoint ``local_dir``; the handle lists them."""
    files: list[RocksDBStateFile] = []
    for name in sorted(os.listdir(local_dir)):
        with open(os.path.join(local_dir, name), "rb") as f:
            data = f.read()
        path = writer.write_state_file(f"{name_prefix}{name}", data)
        files.append(RocksDBStateFile(name, path, len(data), zlib.crc32(data)))
    return RocksDBKeyedStateHandle(
        key_range.start, key_range.end, tuple(files), sum(f.size for f in files)
    )


def download(handle: RocksDBKeyedStateHandle, reader: StateFileReader, target_dir: str) -> None:
    """Recreate the checkpoint of ``handle`` in ``target_dir`` (which must not exist)."""
    os.makedirs(target_dir)
    try:
        for f in handle.files:
            if os.sep in f.name or f.name in ("", ".", ".."):
                raise CorruptStateError(f"state file {f.path!r}: bad RocksDB file name {f.name!r}")
            crc = 0
            with open(os.path.join(target_dir, f.name), "wb") as out:
                for offset in range(0, f.size, _CHUNK):
                    chunk = reader.read_state_range(f.path, offset, min(_CHUNK, f.size - offset))
                    if len(chunk) != min(_CHUNK, f.size - offset):
                        raise CorruptStateError(
                            f"state file {f.path!r} is truncated: needed {f.size} bytes"
                        )
                    crc = zlib.crc32(chunk, crc)
                    out.write(chunk)
            if crc != f.crc32:
                raise CorruptStateError(
                    f"state file {f.path!r} (RocksDB {f.name}): CRC-32 mismatch"
                )
    except BaseException:
        shutil.rmtree(target_dir, ignore_errors=True)
        raise
