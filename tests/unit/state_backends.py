"""Keyed state backend factories for the backend-parametrized state tests.

Each state test module keeps its ``BACKENDS`` dict (heap) and adds the RocksDB entry from here,
so every contract test runs with the same assertions on both backends. RocksDB backends made
here work in one temporary directory per test and are disposed after it (``conftest.py``).
"""

from __future__ import annotations

import shutil
import tempfile

import pytest

from cairn.clock import Clock, ManualClock
from cairn.state import KeyGroupRange
from cairn.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory

__all__ = ["dispose_all", "heap_format_only", "rocksdb"]

_MEMORY = RocksDBMemory(block_cache_bytes=1 << 20, write_buffer_bytes=1 << 20)
_made: list[RocksDBKeyedStateBackend] = []
_dirs: list[str] = []


def rocksdb(
    key_group_range: KeyGroupRange = KeyGroupRange(0, 127),
    max_parallelism: int = 128,
    clock: Clock | None = None,
    file_prefix: str = "",
    incremental: bool = False,
) -> RocksDBKeyedStateBackend:
    """A RocksDB backend with small memory bounds in a temporary directory."""
    if not _dirs:
        _dirs.append(tempfile.mkdtemp(prefix="cairn-test-rocksdb-"))
    b = RocksDBKeyedStateBackend(
        key_group_range,
        max_parallelism,
        clock or ManualClock(),
        local_dir=_dirs[0],
        memory=_MEMORY,
        incremental=incremental,
        file_prefix=file_prefix,
    )
    _made.append(b)
    return b


def dispose_all() -> None:
    while _made:
        _made.pop().dispose()
    while _dirs:
        shutil.rmtree(_dirs.pop(), ignore_errors=True)


def heap_format_only(backend: object) -> None:
    """Skip a test of the heap snapshot file layout (sections per key group) for RocksDB,
    whose own layout is tested in ``test_state_rocksdb.py``."""
    if isinstance(backend, RocksDBKeyedStateBackend):
        pytest.skip("heap snapshot file layout; RocksDB files: test_state_rocksdb.py")
