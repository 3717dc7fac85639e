"""Moving RocksDB checkpoints between the worker's disk and the checkpoint storage, a few
files at a time (Flink's ``state.backend.rocksdb.checkpoint.transfer.thread.num``, 4).

Invariant: ``upload`` reads only the files of a finished local RocksDB checkpoint (hard links
the task thread never writes again), so it runs on a snapshot thread while processing goes
on; ``download`` checks every file's size and CRC-32 before RocksDB opens it, so a corrupt or
missing file fails the restore with its name, never a half-opened database. The handle lists
the files in name order whatever order the transfers finish in.
"""

from __future__ import annotations

import logging
import os
import shutil
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from cairn.checkpoint.handles import (
    RocksDBKeyedStateHandle,
    RocksDBStateFile,
    StateFileReader,
    StateFileWriter,
)
from cairn.ids import CheckpointId
from cairn.state.errors import CorruptStateError
from cairn.state.key_groups import KeyGroupRange

__all__ = ["DEFAULT_TRANSFER_THREADS", "download", "upload"]

log = logging.getLogger(__name__)

_CHUNK = 64 << 20  # bytes read from storage at once when downloading a file
DEFAULT_TRANSFER_THREADS = 4  # Flink's state.backend.rocksdb.checkpoint.transfer.thread.num

_T = TypeVar("_T")
_R = TypeVar("_R")


def _each(function: Callable[[_T], _R], items: Iterable[_T], threads: int) -> list[_R]:
    """``function`` of every item, on up to ``threads`` threads, results in item order; the
    first failure (in item order) is raised once every call has ended."""
    todo = list(items)
    if threads <= 1 or len(todo) <= 1:
        return [function(item) for item in todo]
    with ThreadPoolExecutor(min(threads, len(todo)), thread_name_prefix="rocksdb-transfer") as pool:
        futures = [pool.submit(function, item) for item in todo]
    return [f.result() for f in futures]


def upload(
    local_dir: str,
    writer: StateFileWriter,
    name_prefix: str,
    key_range: KeyGroupRange,
    *,
    reuse: Mapping[str, RocksDBStateFile] | None = None,
    backend_id: str = "",
    base_checkpoint_id: CheckpointId | None = None,
    threads: int = DEFAULT_TRANSFER_THREADS,
) -> RocksDBKeyedStateHandle:
    """Write the files of the local checkpoint ``local_dir``; the handle lists them.

    Incremental (``reuse`` given, and a writer with a shared directory): SST files go to the
    shared directory, and those already uploaded (``reuse``: the SST files of the completed
    checkpoint ``base_checkpoint_id``, by name; RocksDB never rewrites an SST file) are only
    referenced. The other files (MANIFEST, CURRENT, OPTIONS...) are small and private.
    """
    shared = writer if reuse is not None and hasattr(writer, "write_shared_file") else None
    base = reuse or {}

    def send(name: str) -> tuple[RocksDBStateFile, int]:
        """The file's entry and the bytes written for it (0: referenced)."""
        local = os.path.join(local_dir, name)
        if shared is not None and name.endswith(".sst"):
            previous = base.get(name)
            if previous is not None and previous.size == os.path.getsize(local):
                return previous, 0
        with open(local, "rb") as f:
            data = f.read()
        if shared is not None and name.endswith(".sst"):
            path = shared.write_shared_file(f"{name_prefix}{name}", data)
        else:
            path = writer.write_state_file(f"{name_prefix}{name}", data)
        is_shared = shared is not None and name.endswith(".sst")
        return RocksDBStateFile(name, path, len(data), zlib.crc32(data), shared=is_shared), len(
            data
        )

    sent = _each(send, sorted(os.listdir(local_dir)), threads)
    files = [entry for entry, _ in sent]
    persisted = sum(n for _, n in sent)
    return RocksDBKeyedStateHandle(
        key_range.start,
        key_range.end,
        tuple(files),
        sum(f.size for f in files),
        persisted_size=persisted,
        backend_id=backend_id,
        base_checkpoint_id=base_checkpoint_id if shared is not None else None,
    )


def download(
    handle: RocksDBKeyedStateHandle,
    reader: StateFileReader,
    target_dir: str,
    threads: int = DEFAULT_TRANSFER_THREADS,
) -> None:
    """Recreate the checkpoint of ``handle`` in ``target_dir`` (which must not exist)."""
    for f in handle.files:
        if os.sep in f.name or f.name in ("", ".", ".."):
            raise CorruptStateError(f"state file {f.path!r}: bad RocksDB file name {f.name!r}")
    os.makedirs(target_dir)

    def fetch(f: RocksDBStateFile) -> None:
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
            raise CorruptStateError(f"state file {f.path!r} (RocksDB {f.name}): CRC-32 mismatch")

    try:
        _each(fetch, handle.files, threads)
    except BaseException:
        shutil.rmtree(target_dir, ignore_errors=True)
        raise
