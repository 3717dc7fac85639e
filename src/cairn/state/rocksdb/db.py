"""Opening one embedded RocksDB with bounded memory, and its column families.

Invariant: every database of a process is opened through ``open_db`` in raw (bytes) mode with
the write-ahead log disabled (a checkpoint, not the log, is what a restore starts from), its
block cache and memtables bounded by ``RocksDBMemory``: one LRU block cache of
``block_cache_bytes`` per database and a write-buffer manager that caps all its column
families' memtables together at ``write_buffer_bytes * write_buffer_count``; with universal
compaction (an incremental checkpoint adds about what changed) and a bloom filter on the
memtable too (a point read of a key not in the memtable skips it).

>>> import tempfile
>>> db = StateDB.open(tempfile.mkdtemp() + "/db", RocksDBMemory(block_cache_bytes=1 << 20))
>>> cf = db.column_family("s:count")
>>> cf[b"k"] = b"v"; db.column_family("s:count")[b"k"], db.state_column_families()
(b'v', ['s:count'])
>>> db.close()
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import rocksdict

__all__ = [
    "DEFAULT_BLOCK_CACHE_BYTES",
    "DEFAULT_WRITE_BUFFER_BYTES",
    "DEFAULT_WRITE_BUFFER_COUNT",
    "DEFAULT_WRITE_CACHE_ENTRIES",
    "STATE_CF_PREFIX",
    "TIMERS_CF",
    "Column",
    "RocksDBMemory",
    "StateDB",
]

log = logging.getLogger(__name__)

# Flink's defaults for .writebuffer.size and .count. Its 8 MB block cache default applies only
# when RocksDB does not share the slot's managed memory (hundreds of MB by default); 8 MB does
# not hold the index, filter and data blocks of a subtask's ~500k keys, and a random point
# read then costs 4.9 us instead of 2.8 (bench/RESULTS.md, "block cache").
DEFAULT_BLOCK_CACHE_BYTES = 64 << 20
DEFAULT_WRITE_BUFFER_BYTES = 64 << 20
DEFAULT_WRITE_BUFFER_COUNT = 2
DEFAULT_WRITE_CACHE_ENTRIES = 16_384  # per value-like state (``write_cache``): ~30 ms to flush

UNIVERSAL_MERGE_TRIGGER = 8  # sorted runs; RocksDB's default is 4
MEMTABLE_BLOOM_RATIO = 0.02  # of the write buffer size: ~10 bits per entry of 50 bytes

Column = Any
"""A raw-mode column family (``rocksdict.Rdict``): bytes keys and values only. rocksdict's
stubs type keys as any scalar, so the backend's code types them itself."""

STATE_CF_PREFIX = "s:"  # one column family per state: "s:<state name>"
TIMERS_CF = "_timers"  # keyed timers, written through (see ``timers``)


@dataclass(frozen=True)
class RocksDBMemory:
    """Memory bounds of one database (Flink's ``state.backend.rocksdb.*`` sizes), and of the
    write-back cache in front of it (entries per value-like state)."""

    block_cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES
    write_buffer_bytes: int = DEFAULT_WRITE_BUFFER_BYTES
    write_buffer_count: int = DEFAULT_WRITE_BUFFER_COUNT
    write_cache_entries: int = DEFAULT_WRITE_CACHE_ENTRIES

    def __post_init__(self) -> None:
        for name in (
            "block_cache_bytes",
            "write_buffer_bytes",
            "write_buffer_count",
            "write_cache_entries",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    def options(self) -> rocksdict.Options:
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        opts.set_write_buffer_size(self.write_buffer_bytes)
        opts.set_max_write_buffer_number(self.write_buffer_count)
        opts.set_keep_log_file_num(1)
        # A whole-key bloom filter on the memtable: most state reads are of keys not written
        # since the last flush (every checkpoint flushes), and without it each one searches
        # the memtable's skiplist before the SST files (-6..12 % CPU per record at 1M keys).
        opts.set_memtable_whole_key_filtering(True)
        opts.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO)
        # Universal compaction: merging the small recent sorted runs (which hold the keys the
        # job updates) leaves the large old run alone until it is outgrown, so an incremental
        # checkpoint uploads about the changed data. Leveled compaction (Flink's default)
        # rewrote the whole of L1 - with uniform keys, nearly the whole state - on every
        # L0->L1 compaction: every fourth checkpoint uploaded ~100 % (bench/RESULTS.md).
        opts.set_compaction_style(rocksdict.DBCompactionStyle.universal())
        # Merge once 8 sorted runs exist, not 4: each merge rewrites the run holding the hot
        # keys, so merging half as often halves what checkpoints upload again (5M keys per
        # subtask, 1 % hot: mean 3.8 % -> 1.8 % of the full size per checkpoint).
        opts.set_level_zero_file_num_compaction_trigger(UNIVERSAL_MERGE_TRIGGER)
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(rocksdict.Cache(self.block_cache_bytes))
        table.set_bloom_filter(10, False)
        opts.set_block_based_table_factory(table)
        manager = rocksdict.WriteBufferManager(
            self.write_buffer_bytes * self.write_buffer_count, False
        )
        opts.set_write_buffer_manager(manager)
        return opts


class StateDB:
    """One open database and its column families (created on first use)."""

    def __init__(self, db: Column, path: str, opts: rocksdict.Options) -> None:
        self.db = db
        self.path = path
        self._opts = opts
        self._cfs: dict[str, Column] = {}
        write = rocksdict.WriteOptions()
        setattr(write, "disable_wal", True)  # noqa: B010 - a property; the stubs say method
        self.write_options = write
        db.set_write_options(write)

    @classmethod
    def open(cls, path: str, memory: RocksDBMemory, *, read_only: bool = False) -> StateDB:
        """Open (or create) the database at ``path`` with all its column families;
        ``read_only``: an existing database, opened without writing a byte to it (no
        compaction, no new column family: ``column_family`` of a missing one fails)."""
        opts = memory.options()
        exists = read_only or os.path.exists(os.path.join(path, "CURRENT"))
        names = rocksdict.Rdict.list_cf(path, opts) if exists else ["default"]
        families = {n: memory.options() for n in names if n != "default"}
        access = (
            rocksdict.AccessType.read_only() if read_only else rocksdict.AccessType.read_write()
        )
        db = rocksdict.Rdict(path, opts, column_families=families, access_type=access)
        state = cls(db, path, opts)
        for name in families:
            state._cfs[name] = state._configure(db.get_column_family(name))
        return state

    def _configure(self, cf: Column) -> Column:
        cf.set_write_options(self.write_options)
        return cf

    def column_family(self, name: str) -> Column:
        cf = self._cfs.get(name)
        if cf is None:
            cf = self._cfs[name] = self._configure(self.db.create_column_family(name, self._opts))
        return cf

    def has_column_family(self, name: str) -> bool:
        return name in self._cfs

    def handle(self, name: str) -> Any:
        """The ``ColumnFamily`` of ``name`` for a ``WriteBatch``."""
        self.column_family(name)
        return self.db.get_column_family_handle(name)

    def state_column_families(self) -> list[str]:
        return sorted(n for n in self._cfs if n.startswith(STATE_CF_PREFIX))

    def close(self) -> None:
        for cf in self._cfs.values():
            cf.close()
        self._cfs.clear()
        self.db.close()
