"""RocksDB's checkpoint taken on the backend's own thread after the synchronous part
(``cairn.state.rocksdb.native``): reads see the frozen write-cache entries while it is
pending, nothing written after the barrier reaches it (value, list, map state, timers, a full
write cache), and a failure of it fails both the checkpoint and the task's next write.

The checkpoint thread is held back by wrapping the real work (write the frozen entries, flush,
hard links) so that it waits for an event: the interleavings are forced, not hoped for."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.clock import ManualClock
from cairn.common.typeinfo import Types
from cairn.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from cairn.state import KeyGroupRange
from cairn.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory
from cairn.state.rocksdb import backend as backend_module
from cairn.state.rocksdb.db import StateDB
from cairn.state.rocksdb.native import NativeCheckpointError, NativeGate
from cairn.state.rocksdb.write_cache import WriteCache
from cairn.testing.simple_state_files import DirectoryStateFiles

FULL = KeyGroupRange(0, 127)
SMALL = RocksDBMemory(block_cache_bytes=1 << 20, write_buffer_bytes=1 << 20, write_cache_entries=4)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """While the yielded event is not set, every native checkpoint waits before its work."""
    release = threading.Event()
    real = backend_module.native_checkpoint

    def delayed(*args: Any) -> Callable[[], None]:
        work = real(*args)

        def run() -> None:
            assert release.wait(10)
            work()

        return run

    monkeypatch.setattr(backend_module, "native_checkpoint", delayed)
    yield release
    release.set()


def _backend(tmp_path: Path) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(
        FULL, 128, ManualClock(), local_dir=str(tmp_path / "local"), memory=SMALL
    )


def _states(b: RocksDBKeyedStateBackend) -> tuple[Any, Any, Any]:
    return (
        b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG())),
        b.get_partitioned_state(ListStateDescriptor("l", Types.STRING())),
        b.get_partitioned_state(MapStateDescriptor("m", Types.STRING(), Types.LONG())),
    )


def _later(event: threading.Event, seconds: float) -> None:
    timer = threading.Timer(seconds, event.set)
    timer.daemon = True
    timer.start()


def test_reads_see_frozen_entries_until_the_checkpoint_thread_has_written_them() -> None:
    db = StateDB.open(tempfile.mkdtemp() + "/db", RocksDBMemory(block_cache_bytes=1 << 20))
    gate = NativeGate()
    cache = WriteCache(db, "s:v", max_entries=3, gate=gate)
    cache.put(b"a", b"1")
    cache.put(b"b", None)  # a delete is frozen too
    frozen = cache.freeze()
    release = threading.Event()

    def work() -> None:
        assert release.wait(10)
        cache.write_frozen(frozen)

    gate.start(work)
    cf = db.column_family("s:v")
    assert cf.get(b"a") is None  # not in RocksDB yet...
    assert cache.get(b"a") == b"1" and cache.get(b"b") is None  # ...but read from the cache
    cache.put(b"a", b"2")  # after the barrier: newer than the frozen entry
    assert cache.get(b"a") == b"2" and cf.get(b"a") is None
    _later(release, 0.2)
    t0 = time.perf_counter()
    cache.put(b"c", b"3")
    cache.put(b"d", b"4")  # full: the flush waits for the checkpoint thread first
    assert time.perf_counter() - t0 >= 0.1 and gate.pending is None
    assert [cf.get(k) for k in (b"a", b"b", b"c", b"d")] == [b"2", None, b"3", b"4"]
    gate.close()
    db.close()


def test_checkpoint_holds_the_state_at_the_barrier_whatever_the_task_writes_meanwhile(
    tmp_path: Path, held: threading.Event
) -> None:
    b = _backend(tmp_path)
    value, lst, mp = _states(b)
    for i in range(10):
        b.set_current_key(f"k{i}")
        value.update(i)
        lst.add(f"e{i}")
        mp.put("x", i)
        b.register_event_time_timer(100 + i)
    write = b.snapshot(1)  # the barrier: the checkpoint thread waits for ``held``
    b.set_current_key("k3")
    assert value.value() == 3  # a frozen entry, read while the checkpoint is pending
    value.update(-3)  # after the barrier, into the write cache
    assert value.value() == -3
    _later(held, 0.3)
    t0 = time.perf_counter()
    lst.add("late")  # a direct write waits for the checkpoint
    assert time.perf_counter() - t0 >= 0.2
    mp.put("x", -3)
    b.register_event_time_timer(999)
    for i in range(10, 20):  # fills the write cache (4 entries) a few times
        b.set_current_key(f"k{i}")
        value.update(i)
    files = DirectoryStateFiles(tmp_path / "chk")
    handle = write(files)
    restored = _backend(tmp_path)
    restored.restore([handle], files)
    rv, rl, rm = _states(restored)
    restored.set_current_key("k3")
    assert (rv.value(), rl.get(), rm.get("x")) == (3, ["e3"], 3)
    restored.set_current_key("k15")
    assert rv.value() is None
    assert restored.num_timers() == 10 and restored.next_event_timer_ms() == 100
    b.set_current_key("k3")  # the live backend has everything
    assert (value.value(), lst.get(), mp.get("x")) == (-3, ["e3", "late"], -3)
    assert b.num_timers() == 11
    b.dispose()
    restored.dispose()


def test_a_failed_checkpoint_fails_the_snapshot_and_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> Callable[[], None]:
        def run() -> None:
            raise OSError("No space left on device")

        return run

    monkeypatch.setattr(backend_module, "native_checkpoint", broken)
    b = _backend(tmp_path)
    value, lst, _ = _states(b)
    b.set_current_key("a")
    value.update(1)
    write = b.snapshot(1)
    with pytest.raises(NativeCheckpointError, match="No space left on device"):
        write(DirectoryStateFiles(tmp_path / "chk"))
    with pytest.raises(NativeCheckpointError, match="No space left on device"):
        lst.add("x")  # the frozen entries may be missing from RocksDB: the task must fail
    b.dispose()


def test_the_next_snapshot_waits_for_a_pending_checkpoint(
    tmp_path: Path, held: threading.Event
) -> None:
    b = _backend(tmp_path)
    value, _, _ = _states(b)
    b.set_current_key("a")
    value.update(1)
    first = b.snapshot(1)
    value.update(2)
    _later(held, 0.2)
    t0 = time.perf_counter()
    second = b.snapshot(2)  # settles the first before freezing again
    assert time.perf_counter() - t0 >= 0.1
    files = DirectoryStateFiles(tmp_path / "chk")
    handles = [first(files), second(files)]
    for expected, handle in zip([1, 2], handles, strict=True):
        restored = _backend(tmp_path)
        restored.restore([handle], files)
        (rv, _, _) = _states(restored)
        restored.set_current_key("a")
        assert rv.value() == expected
        restored.dispose()
    b.dispose()


def test_a_snapshot_that_cannot_make_its_directory_loses_no_write(tmp_path: Path) -> None:
    b = _backend(tmp_path)
    value, _, _ = _states(b)
    b.set_current_key("a")
    value.update(1)
    snapshots = Path(b.working_directory, "snapshots")
    snapshots.write_text("a file where the local checkpoints go")
    with pytest.raises(OSError):
        b.snapshot(1)
    snapshots.unlink()
    files = DirectoryStateFiles(tmp_path / "chk")
    handle = b.snapshot(2)(files)  # the write is still in the cache, so in this checkpoint
    restored = _backend(tmp_path)
    restored.restore([handle], files)
    (rv, _, _) = _states(restored)
    restored.set_current_key("a")
    assert rv.value() == 1
    b.dispose()
    restored.dispose()
