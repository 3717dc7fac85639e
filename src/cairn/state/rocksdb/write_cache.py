"""A bounded write-back cache of the value-like states' newest bytes, in front of RocksDB.

Invariant: for every key in a state's ``entries`` the cache holds that key's current encoded
value (``None``: deleted), newer than RocksDB's; ``flush`` writes them all in one
``WriteBatch`` and empties ``entries``. Every key in ``clean`` holds exactly RocksDB's value
(``None``: absent), or a frozen entry's: entries written by a flush that kept them
(``flush(keep=True)``, on the per-record path), at most ``max_entries`` of them, and the
entries ``freeze`` took out at a snapshot's barrier, which the checkpoint thread writes to
RocksDB (``write_frozen``, see ``native``) before anything clears ``clean`` or writes RocksDB
again (``flush`` settles the ``NativeGate`` first). A state's cache is flushed when it reaches
``max_entries``, and every cache before anything reads RocksDB directly (iterating keys);
anything that writes RocksDB around the cache (converting values, restoring) flushes with
``keep=False`` first, which empties ``clean`` too. So RocksDB plus the frozen entries plus the
cache is always the state, and a key written in the last ``max_entries`` writes is read from
the cache, not from RocksDB (a get from an SST file costs 2-10 us from Python, a dict hit
~0.1). It keeps bytes, never the user's objects: a value read twice is decoded twice, as
without the cache. It writes in batches because one ``put`` through rocksdict costs ~3 us
from Python, a batched one ~1.7.

>>> import tempfile
>>> from cairn.state.rocksdb.db import RocksDBMemory, StateDB
>>> db = StateDB.open(tempfile.mkdtemp(), RocksDBMemory(block_cache_bytes=1 << 20))
>>> cache = WriteCache(db, "s:v", max_entries=2)
>>> cache.put(b"a", b"1"); cache.get(b"a"), db.column_family("s:v").get(b"a")
(b'1', None)
>>> cache.put(b"b", b"2"); db.column_family("s:v").get(b"a")  # full: flushed
b'1'
>>> cache.entries, cache.clean, cache.get(b"b")  # flushed, kept as RocksDB's values
({}, {b'a': b'1', b'b': b'2'}, b'2')
>>> db.close()
"""

from __future__ import annotations

from typing import Any

import rocksdict

from cairn.state.rocksdb.db import DEFAULT_WRITE_CACHE_ENTRIES, StateDB
from cairn.state.rocksdb.native import NativeGate

__all__ = ["WriteCache"]

_ABSENT: Any = object()


class WriteCache:
    """The cache of one column family (see the module docstring)."""

    __slots__ = ("_db", "_gate", "_handle", "_max", "clean", "column_family", "entries")

    def __init__(
        self,
        db: StateDB,
        name: str,
        max_entries: int = DEFAULT_WRITE_CACHE_ENTRIES,
        gate: NativeGate | None = None,
    ):
        if max_entries < 1:
            raise ValueError(f"max_entries must be positive, got {max_entries}")
        self._db = db
        self._gate = gate or NativeGate()
        self.column_family = db.column_family(name)
        self._handle = db.handle(name)
        self._max = max_entries
        self.entries: dict[bytes, bytes | None] = {}
        self.clean: dict[bytes, bytes | None] = {}  # RocksDB's values; the same dict object

    def get(self, key: bytes) -> bytes | None:
        raw = self.entries.get(key, _ABSENT)
        if raw is _ABSENT:
            raw = self.clean.get(key, _ABSENT)
            if raw is _ABSENT:
                got: bytes | None = self.column_family.get(key)
                return got
        return raw  # type: ignore[no-any-return]

    def put(self, key: bytes, value: bytes | None) -> None:
        """Set (``None``: delete) ``key``'s value."""
        entries = self.entries
        entries[key] = value
        if len(entries) >= self._max:
            self.flush(keep=True)

    def flush(self, keep: bool = False) -> None:
        """Write ``entries`` to RocksDB; ``keep``: remember them in ``clean`` (else forget
        ``clean`` too: the caller is about to change RocksDB around the cache)."""
        self._gate.settle()  # frozen entries of a pending checkpoint are in RocksDB now
        entries = self.entries
        clean = self.clean
        if not keep:
            clean.clear()
        if not entries:
            return
        self._write(entries)
        if keep:
            if len(clean) + len(entries) > self._max:
                clean.clear()
            clean.update(entries)
        entries.clear()

    def freeze(self) -> dict[bytes, bytes | None]:
        """At a barrier (the gate settled): the dirty entries, taken out of ``entries`` and
        kept readable in ``clean`` until ``write_frozen`` has written them."""
        entries = self.entries
        frozen = dict(entries)
        self.clean.update(frozen)
        entries.clear()
        return frozen

    def write_frozen(self, frozen: dict[bytes, bytes | None]) -> None:
        """Checkpoint thread: write what ``freeze`` returned (one ``WriteBatch``)."""
        if frozen:
            self._write(frozen)

    def _write(self, entries: dict[bytes, bytes | None]) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        handle = self._handle
        for k, v in entries.items():
            if v is None:
                batch.delete(k, handle)
            else:
                batch.put(k, v, handle)
        self._db.db.write(batch, self._db.write_options)
