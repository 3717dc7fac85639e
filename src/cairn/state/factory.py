"""Building the keyed state backend a job's settings choose (``state.backend.type``).

Invariant: the worker builds every keyed backend here, from the validated ``StateSettings``
only, so heap and RocksDB subtasks of one job never differ in anything but their key groups.
RocksDB working directories go under ``<localdir>/cairn-rocksdb-<job>/attempt-<n>/``.
"""

from __future__ import annotations

import os
import tempfile

from cairn.settings import StateBackendKind, StateSettings
from cairn.state.api import KeyedStateBackend
from cairn.state.heap_backend import HeapKeyedStateBackend
from cairn.state.key_groups import KeyGroupRange
from cairn.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory

__all__ = ["create_keyed_backend", "rocksdb_attempt_dir"]


def rocksdb_attempt_dir(settings: StateSettings, job_id: str, attempt: int) -> str:
    """Where the RocksDB backends of one attempt of a job keep their working directories.

    >>> rocksdb_attempt_dir(StateSettings(), "j1", 2).endswith("cairn-rocksdb-j1/attempt-2")
    True
    """
    root = settings.rocksdb.local_dir or tempfile.gettempdir()
    return os.path.join(root, f"cairn-rocksdb-{job_id}", f"attempt-{attempt}")


def create_keyed_backend(
    settings: StateSettings,
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    *,
    job_id: str,
    attempt: int,
    name: str,
) -> KeyedStateBackend:
    """The keyed backend of one subtask of one operator (``name`` prefixes its files)."""
    if settings.backend is StateBackendKind.ROCKSDB:
        r = settings.rocksdb
        return RocksDBKeyedStateBackend(
            key_group_range,
            max_parallelism,
            local_dir=rocksdb_attempt_dir(settings, job_id, attempt),
            memory=RocksDBMemory(r.block_cache_bytes, r.write_buffer_bytes, r.write_buffer_count),
            file_prefix=name,
        )
    return HeapKeyedStateBackend(
        key_group_range,
        max_parallelism,
        fork_threshold=settings.fork_threshold,
        fork_niceness=settings.fork_niceness,
    )
