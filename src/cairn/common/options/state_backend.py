"""State backend options: the backend's type and the embedded RocksDB's tuning.

Invariant: every key here is registered on import; memory sizes are bytes once parsed.
"""

from __future__ import annotations

from cairn.common.options.define import at_least, define, non_empty, spellings

STATE_BACKEND = define(
    "state.backend.type",
    "enum",
    "hashmap",
    "hashmap (state as Python objects in worker memory) or rocksdb (embedded RocksDB on "
    "local disk).",
    "state.backend",
    choices=spellings(("hashmap", "jobmanager", "filesystem"), ("rocksdb",)),
)
ROCKSDB_LOCALDIR = define(
    "state.backend.rocksdb.localdir",
    "str",
    None,
    "Local directory of the RocksDB backend's working files (default: the temp dir).",
    "state.backend.rocksdb.local-dir",
    check=non_empty,
)
ROCKSDB_BLOCK_CACHE = define(
    "state.backend.rocksdb.block.cache-size",
    "memory",
    64 << 20,
    "RocksDB block cache per subtask and operator (Flink's own 8 MB default applies only "
    "without managed memory; 64 MB holds the index, filters and hot blocks of ~1M keys).",
    check=at_least(1, "block cache size", " bytes"),
)
ROCKSDB_TRANSFER_THREADS = define(
    "state.backend.rocksdb.checkpoint.transfer.thread.num",
    "int",
    4,
    "Threads that upload (asynchronous part) and download (restore) one subtask's RocksDB "
    "files at once.",
    check=at_least(1, "transfer threads"),
)
ROCKSDB_WRITE_BUFFER_SIZE = define(
    "state.backend.rocksdb.writebuffer.size",
    "memory",
    64 << 20,
    "RocksDB memtable size; all memtables of a database together are capped at size x count.",
    check=at_least(1, "write buffer size", " bytes"),
)
ROCKSDB_WRITE_BUFFER_COUNT = define(
    "state.backend.rocksdb.writebuffer.count",
    "int",
    2,
    "RocksDB memtables per column family (and the cap's multiplier).",
    check=at_least(1, "write buffer count"),
)
LOCAL_RECOVERY = define(
    "state.backend.local-recovery",
    "bool",
    False,
    "Keep a copy of each checkpoint's state files on the worker's local disk and restore from "
    "it when a worker of the job restarts on the same host (the checkpoint storage is the "
    "fallback).",
    "execution.state-recovery.from-local",
)
LOCAL_RECOVERY_ROOT = define(
    "taskmanager.state.local.root-dirs",
    "str",
    None,
    "Directory of local recovery's copies (default: cairn-local-recovery-<uid> in the temp dir).",
    check=non_empty,
)
