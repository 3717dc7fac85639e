"""What one Spark task does with RocksDB state: the heap-format sections of its key groups.

Invariant: a task reads only copies: it downloads each database of its slice (the handle's
files, private and ``../shared/``, size and CRC-32 checked by the backend's own ``download``)
into a temporary directory of its own, opens it read-only and exports its key groups with
the backend's own ``export_sections``, so the sections it yields are exactly what the heap
backend (and a canonical savepoint of the RocksDB backend) holds for the same state; the
directory is removed when the task is done, whether it finished or failed. Key groups
outside the task's range are never exported.

>>> # for kg, section in rocksdb_sections(piece, reader, "keyed-sum", now_ms, {"sum"}): ...
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection, Iterator
from typing import Any

from cairn.checkpoint.errors import CorruptCheckpointError
from cairn.checkpoint.handles import StateFileReader
from cairn.state.errors import CorruptStateError
from cairn.state.key_groups import KeyGroupRange
from cairn.state.rocksdb.canonical import export_sections, read_meta
from cairn.state.rocksdb.db import RocksDBMemory, StateDB
from cairn.state.rocksdb.rescale import overlap
from cairn.state.rocksdb.transfer import download
from cairn.state_processor.errors import StateProcessorError
from cairn.state_processor.key_group_slices import RocksDBSlice

__all__ = ["rocksdb_sections", "rocksdb_state_kinds"]

# A reading task's database: a small block cache (each block is read about once) and no
# memtable to speak of (nothing is written).
_READ_MEMORY = RocksDBMemory(block_cache_bytes=8 << 20, write_buffer_bytes=1 << 20)


def _open_copies(
    piece: RocksDBSlice, reader: StateFileReader, uid: str
) -> Iterator[tuple[KeyGroupRange, StateDB]]:
    """Each database of ``piece``, downloaded and open read-only, with the key groups of it
    the task owns; each is closed and deleted before the next is downloaded."""
    for handle in piece.handles:
        own = overlap(piece.key_groups, KeyGroupRange(handle.key_group_start, handle.key_group_end))
        if not len(own):
            continue
        tmp = tempfile.mkdtemp(prefix="cairn-state-read-")
        try:
            target = os.path.join(tmp, "db")
            try:
                download(handle, reader, target)
                db = StateDB.open(target, _READ_MEMORY, read_only=True)
            except (CorruptStateError, CorruptCheckpointError, OSError) as exc:
                raise StateProcessorError(
                    f"operator uid {uid!r}: RocksDB state {handle.path!r}: {exc}"
                ) from exc
            try:
                yield own, db
            finally:
                db.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def rocksdb_sections(
    piece: RocksDBSlice,
    reader: StateFileReader,
    uid: str,
    now_ms: int,
    names: Collection[str] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The heap-format sections of ``piece``'s key groups (of states ``names``, else of
    all), database by database; ``now_ms``: values a full-snapshot TTL cleanup would drop
    by then are left out, as the heap backend's snapshot at that time leaves them out."""
    for own, db in _open_copies(piece, reader, uid):
        yield from export_sections(db, own, now_ms, names)


def rocksdb_state_kinds(piece: RocksDBSlice, reader: StateFileReader, uid: str) -> dict[str, str]:
    """Name -> kind of every state the databases of ``piece`` record (without decoding any
    value: the registrations in their default column family)."""
    kinds: dict[str, str] = {}
    for _own, db in _open_copies(piece, reader, uid):
        for name, meta in read_meta(db).items():
            kinds.setdefault(name, meta.kind)
    return kinds
