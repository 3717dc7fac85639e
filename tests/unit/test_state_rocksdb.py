"""What is particular to the RocksDB backend: byte layouts, its checkpoint files, rescaling
plans, memory, working directories. The shared state contract runs in the state test modules
parametrized over both backends (``state_backends``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import OperatorSubtaskState, RocksDBKeyedStateHandle
from cairn.checkpoint.inspection import verify
from cairn.checkpoint.metadata import (
    CheckpointMetadata,
    OperatorMetadata,
    decode_metadata,
    encode_metadata,
)
from cairn.checkpoint.storage import CheckpointStorage
from cairn.clock import ManualClock
from cairn.common.typeinfo import Types
from cairn.datastream.state import ValueStateDescriptor
from cairn.ids import CheckpointId, JobId, OperatorUid
from cairn.state import (
    CorruptStateError,
    HeapKeyedStateBackend,
    KeyGroupRange,
    KeyGroupRangeError,
    StateRestoreError,
    key_group_range_for_subtask,
)
from cairn.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory
from cairn.state.rocksdb.codecs import decode_key, encode_key, key_prefix
from cairn.state.rocksdb.rescale import plan_restore
from cairn.state.rocksdb.states import RocksKeyContext
from cairn.state.rocksdb.transfer import download, upload
from cairn.testing.simple_state_files import DirectoryStateFiles
from tests.unit import state_backends

MAX_P = 128
FULL = KeyGroupRange(0, MAX_P - 1)


# ------------------------------------------------------------------------------ codecs

KEYS = [
    None,
    0,
    -1,
    2**70,
    1.5,
    "ü-key",
    b"\x00\xff",
    ("a", 1, (None, 2.5)),
    frozenset({"x", "y", "z", "w"}),
    True,
]


def test_keys_round_trip_and_equal_numbers_are_one_key() -> None:
    for key in KEYS:
        assert decode_key(encode_key(key)) == key
    assert encode_key(1) == encode_key(1.0) == encode_key(True)
    assert encode_key(0) == encode_key(False) != encode_key(None)


def test_key_context_prefixes_are_the_codec_s_prefixes() -> None:
    """The key context encodes ``str`` keys itself (and caches prefixes of str and int keys):
    its bytes must be ``key_prefix``'s, or state written before would not be found."""
    ctx = RocksKeyContext(KeyGroupRange(0, 127))
    for key in [*KEYS, "", "키", "\udc80", "a" * 300, 2**70]:
        for _ in range(2):  # computed, then from the cache
            ctx.key, ctx.key_group = key, 5
            assert ctx.prefix("s") == key_prefix(5, key), key
        foreign = RocksKeyContext(KeyGroupRange(0, 127))
        foreign.key, foreign.key_group = key, 200
        with pytest.raises(KeyGroupRangeError, match="key group 200"):
            foreign.prefix("s")


def test_key_bytes_are_the_same_in_every_process() -> None:
    """frozenset iteration order depends on the per-process string hash seed; the bytes
    must not (a key must find its state after a restore in another worker)."""
    code = (
        "from cairn.state.rocksdb.codecs import encode_key;"
        "print(encode_key((frozenset('abcdefgh'), 'k', 7)).hex())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(outputs) == 1


# ---------------------------------------------------------------------------- rescaling


@pytest.mark.parametrize(("old_p", "new_p"), [(2, 3), (3, 2), (1, 4), (4, 1), (3, 3)])
def test_restore_plans_cover_every_key_group_exactly_once(old_p: int, new_p: int) -> None:
    old = [key_group_range_for_subtask(MAX_P, old_p, i) for i in range(old_p)]
    seen: list[int] = []
    for i in range(new_p):
        own = key_group_range_for_subtask(MAX_P, new_p, i)
        plan = plan_restore(own, old)
        assert plan.base is not None
        base = old[plan.base]
        kept = [kg for kg in base if kg in own]  # the base minus what is trimmed
        trimmed = [kg for r in plan.trim for kg in r]
        assert sorted(kept + trimmed) == list(base)
        copied = [kg for _, r in plan.copies for kg in r]
        assert all(kg in old[j] for j, r in plan.copies for kg in r)
        assert sorted(kept + copied) == list(own)
        seen.extend(kept + copied)
    assert sorted(seen) == list(FULL)


def test_restore_plan_refuses_overlapping_old_ranges() -> None:
    with pytest.raises(StateRestoreError, match="key group 10 is present in two"):
        plan_restore(FULL, [KeyGroupRange(0, 10), KeyGroupRange(10, 127)])
    assert plan_restore(KeyGroupRange(0, 9), [KeyGroupRange(64, 127)]).base is None


# ------------------------------------------------------------------------- snapshots


def _filled(key_range: KeyGroupRange = FULL, keys: int = 200) -> RocksDBKeyedStateBackend:
    b = state_backends.rocksdb(key_range, MAX_P, file_prefix="op-")
    s = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    for i in range(keys):
        k = f"k{i}"
        b.set_current_key(k)
        if b.current_key_group in key_range:
            s.update(i)
    return b


def test_local_checkpoint_hard_links_and_upload_lists_every_file(tmp_path: Path) -> None:
    b = _filled()
    write = b.snapshot(1)  # synchronous part: freeze the write cache; then a local checkpoint
    b._gate.settle()  # the checkpoint thread's part (``native``), awaited to look at it
    snaps = Path(b.working_directory, "snapshots")
    (local,) = snaps.iterdir()
    db = Path(b.working_directory, "db")
    ssts = sorted(p.name for p in local.iterdir() if p.suffix == ".sst")
    assert ssts and all(
        (local / n).stat().st_ino == (db / n).stat().st_ino for n in ssts
    )  # hard links: no state was copied
    handle = write(DirectoryStateFiles(tmp_path))
    assert isinstance(handle, RocksDBKeyedStateHandle)
    assert {f.name for f in handle.files} == {
        p.name for p in local.parent.parent.glob("db/*") if p.name in {f.name for f in handle.files}
    }
    assert {f.name for f in handle.files} >= set(ssts) | {"CURRENT"}
    assert handle.size == sum(f.size for f in handle.files)
    assert all((tmp_path / f.path).stat().st_size == f.size for f in handle.files)
    assert not any(snaps.iterdir())  # the local checkpoint is gone once uploaded


def test_corrupt_file_fails_restore_naming_it(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    handle = _filled().snapshot(1)(files)
    assert isinstance(handle, RocksDBKeyedStateHandle)
    sst = next(f for f in handle.files if f.name.endswith(".sst"))
    data = bytearray((tmp_path / sst.path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / sst.path).write_bytes(bytes(data))
    with pytest.raises(CorruptStateError, match=re.escape(sst.path) + ".*CRC-32"):
        state_backends.rocksdb(FULL, MAX_P).restore([handle], files)


@pytest.mark.parametrize("threads", [1, 4])
def test_transfers_on_several_threads_keep_name_order_and_name_a_corrupt_file(
    tmp_path: Path, threads: int
) -> None:
    """Files go up and come down a few at a time; the handle lists them by name, a download
    recreates every byte, and a corrupt file among others fails it naming that file and
    leaves no half-written directory."""
    local = tmp_path / "local"
    local.mkdir()
    for i in range(9):
        (local / f"{i:06d}.sst").write_bytes(bytes([i]) * (1000 + 997 * i))
    (local / "CURRENT").write_bytes(b"MANIFEST-000001\n")
    files = DirectoryStateFiles(tmp_path / "storage")
    handle = upload(str(local), files, "p-", FULL, threads=threads)
    assert [f.name for f in handle.files] == sorted(p.name for p in local.iterdir())
    assert handle.persisted_size == sum(p.stat().st_size for p in local.iterdir())
    target = tmp_path / "restored"
    download(handle, files, str(target), threads)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {
        p.name: p.read_bytes() for p in local.iterdir()
    }
    bad = handle.files[4]
    (tmp_path / "storage" / bad.path).write_bytes(b"x" * bad.size)
    with pytest.raises(CorruptStateError, match=re.escape(bad.path) + ".*CRC-32"):
        download(handle, files, str(tmp_path / "again"), threads)
    assert not (tmp_path / "again").exists()


def test_rescale_downloads_only_overlapping_old_subtasks(tmp_path: Path) -> None:
    class Recording(DirectoryStateFiles):
        read: set[str] = set()

        def read_state_range(self, path: str, offset: int, length: int) -> bytes:
            self.read.add(path)
            return super().read_state_range(path, offset, length)

    files = Recording(tmp_path)
    old = [key_group_range_for_subtask(MAX_P, 4, i) for i in range(4)]
    handles = [_filled(r).snapshot(1)(files) for r in old]
    assert all(isinstance(h, RocksDBKeyedStateHandle) for h in handles)
    new = state_backends.rocksdb(key_group_range_for_subtask(MAX_P, 2, 0), MAX_P)
    new.restore([h for h in handles if h is not None], files)
    expected = {f.path for h in handles[:2] if h is not None for f in h.files if f.size}
    assert files.read == expected
    assert len(new.keys("count")) == sum(
        1 for i in range(200) if new.key_group_range.start <= _kg(f"k{i}") <= 63
    )


def _kg(key: object) -> int:
    from cairn.state import assign_to_key_group

    return assign_to_key_group(key, MAX_P)


def test_heap_files_restore_and_native_rocksdb_files_are_refused_by_the_heap(
    tmp_path: Path,
) -> None:
    files = DirectoryStateFiles(tmp_path)
    heap = HeapKeyedStateBackend(FULL, MAX_P, clock=ManualClock())
    heap.get_partitioned_state(ValueStateDescriptor("v", None))
    heap.set_current_key("a")
    heap.get_partitioned_state(ValueStateDescriptor("v", None)).update(1)
    heap_handle = heap.snapshot(1)(files)
    rocks_handle = _filled().snapshot(1)(files)
    assert heap_handle is not None and rocks_handle is not None
    rocks = state_backends.rocksdb()
    rocks.restore([heap_handle], files)  # the heap's format is the canonical one
    rocks.set_current_key("a")
    assert rocks.get_partitioned_state(ValueStateDescriptor("v", None)).value() == 1
    with pytest.raises(StateRestoreError, match="written by the RocksDB"):
        HeapKeyedStateBackend(FULL, MAX_P).restore([rocks_handle], files)


def test_metadata_keeps_rocksdb_handles_and_verify_checks_their_files(tmp_path: Path) -> None:
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    handle = _filled().snapshot(3)(storage.writer(CheckpointId(3)))
    assert isinstance(handle, RocksDBKeyedStateHandle)
    op = OperatorMetadata(OperatorUid("sum"), 1, MAX_P, {0: OperatorSubtaskState(keyed=(handle,))})
    md = CheckpointMetadata(JobId("job"), CheckpointId(3), 1, 2, MAX_P, {op.uid: op})
    completed = storage.write_metadata(md)
    assert decode_metadata(encode_metadata(md)) == md
    assert set(md.referenced_files()) == {f.path for f in handle.files}
    assert md.state_size == handle.size
    verify(md, completed.directory)
    manifest = tmp_path / "job" / "chk-3" / handle.path
    manifest.write_bytes(b"x" * manifest.stat().st_size)
    with pytest.raises(Exception, match="CRC-32 mismatch") as err:
        verify(md, completed.directory)
    assert handle.path in str(err.value)


# ------------------------------------------------------------------ memory, directories


def test_python_memory_is_bounded_by_the_caches_not_by_the_number_of_keys() -> None:
    b = state_backends.rocksdb()
    s = b.get_partitioned_state(ValueStateDescriptor("v", None))
    n = 120_000
    groups = [_kg(i) for i in range(n)]  # the process-wide key-group cache aside
    tracemalloc.start()
    try:
        for i in range(n):
            b.set_current_key(i, groups[i])
            s.update("x" * 100 + str(i))  # as Python objects: > 18 MB
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert used < 8_000_000, used  # the write cache and the key prefix cache, both bounded


def test_working_directory_is_fresh_per_backend_and_removed_on_dispose(tmp_path: Path) -> None:
    a = RocksDBKeyedStateBackend(FULL, MAX_P, local_dir=str(tmp_path), memory=RocksDBMemory())
    b = RocksDBKeyedStateBackend(FULL, MAX_P, local_dir=str(tmp_path))
    assert a.working_directory != b.working_directory
    a.get_partitioned_state(ValueStateDescriptor("v", None))
    assert os.path.isdir(a.working_directory)
    a.dispose()
    b.dispose()
    assert list(tmp_path.iterdir()) == []


def test_unusable_local_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError, match=r"state\.backend\.rocksdb\.localdir"):
        RocksDBKeyedStateBackend(FULL, MAX_P, local_dir=str(blocker / "sub"))


def test_memory_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="write_buffer_count must be positive"):
        RocksDBMemory(write_buffer_count=0)


def test_factory_builds_the_configured_backend_and_cleans_earlier_attempts(
    tmp_path: Path,
) -> None:
    from cairn.settings import RocksDBSettings, StateBackendKind, StateSettings
    from cairn.state.factory import clean_local_state, create_keyed_backend, rocksdb_attempt_dir

    settings = StateSettings(
        backend=StateBackendKind.ROCKSDB, rocksdb=RocksDBSettings(local_dir=str(tmp_path))
    )
    stale = Path(rocksdb_attempt_dir(settings, "job", 0), "op-rocksdb-x")
    stale.mkdir(parents=True)
    (stale / "000001.sst").write_bytes(b"left by a killed worker")
    clean_local_state(settings, "job", 1, ending=False)
    assert not stale.parent.exists()
    b = create_keyed_backend(settings, FULL, MAX_P, job_id="job", attempt=1, name="op/1-")
    assert isinstance(b, RocksDBKeyedStateBackend)
    assert Path(b.working_directory).parent == Path(rocksdb_attempt_dir(settings, "job", 1))
    b.dispose()
    clean_local_state(settings, "job", 1, ending=True)
    assert list(tmp_path.iterdir()) == []
    heap = create_keyed_backend(StateSettings(), FULL, MAX_P, job_id="j", attempt=0, name="")
    assert isinstance(heap, HeapKeyedStateBackend)


@pytest.mark.parametrize(("seed", "cache"), [(0, 2), (1, 2), (2, 1000), (3, 1000)])
def test_random_operations_match_the_heap_backend_through_snapshots(
    tmp_path: Path, seed: int, cache: int
) -> None:
    """A model check of the write-back cache (2 entries: flushed all the time; 1000: only by
    snapshots and key listings) and the restore path: the same random operations on the
    heap and on RocksDB read the same."""
    import random

    from cairn.datastream.state import ListStateDescriptor, MapStateDescriptor

    rng = random.Random(seed)
    memory = RocksDBMemory(block_cache_bytes=1 << 20, write_cache_entries=cache)
    files = DirectoryStateFiles(tmp_path)

    def make(kind: str) -> Any:
        if kind == "heap":
            return HeapKeyedStateBackend(FULL, MAX_P, clock=ManualClock())
        return RocksDBKeyedStateBackend(
            FULL, MAX_P, ManualClock(), local_dir=str(tmp_path), memory=memory
        )

    backends = {k: make(k) for k in ("heap", "rocksdb")}

    def states(b: Any) -> tuple[Any, Any, Any]:
        return (
            b.get_partitioned_state(ValueStateDescriptor("v", Types.INT())),
            b.get_partitioned_state(ListStateDescriptor("l", None)),
            b.get_partitioned_state(MapStateDescriptor("m", None, None)),
        )

    for step in range(600):
        key = rng.choice(["a", "b", "c", 1, 2, (3, "x")])
        op = rng.randrange(8)
        arg = rng.randrange(5)
        seen = []
        for b in backends.values():
            v, lst, m = states(b)
            b.set_current_key(key)
            if op == 0:
                v.update(arg if arg else None)
            elif op == 1:
                lst.add(arg)
            elif op == 2:
                m.put(arg, step)
            elif op == 3:
                m.remove(arg)
            elif op in (4, 5):
                (v if op == 4 else lst).clear()
            listed = sorted(map(repr, b.keys("v"))) if op == 6 else None
            seen.append((v.value(), lst.get(), sorted(m.items()), m.contains(arg), listed))
        assert seen[0] == seen[1], (step, key, op, arg)
        if step % 150 == 149:  # snapshot both, restore into fresh ones
            handles = {k: b.snapshot(step)(files) for k, b in backends.items()}
            for k in backends:
                backends[k].dispose()
                backends[k] = make(k)
                h = handles[k]
                backends[k].restore([h] if h is not None else [], files)
    for b in backends.values():
        b.dispose()


def test_a_database_that_cannot_be_opened_is_a_clear_error(tmp_path: Path) -> None:
    b = RocksDBKeyedStateBackend(FULL, MAX_P, local_dir=str(tmp_path))
    Path(b.working_directory, "db").write_text("a file where the database should be")
    with pytest.raises(OSError, match=r"cannot open RocksDB in .*state\.backend\.rocksdb"):
        b.get_partitioned_state(ValueStateDescriptor("v", None))
    b.dispose()


def test_values_kept_after_a_snapshot_never_hide_what_a_restore_writes(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    old = _filled()  # k{i} -> i
    handle = old.snapshot(1)(files)
    b = _filled()
    s = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    for i in range(200):
        b.set_current_key(f"k{i}")
        s.update(-i)
    b.snapshot(2)  # flushed, and kept readable without RocksDB
    (cache,) = b._caches  # the point of the test is what the cache holds
    assert len(cache.clean) == 200 and not cache.entries
    b.set_current_key("k7")
    assert s.value() == -7  # read from the kept entries
    b.restore([handle], files)  # the database is in use: copied into it, around the cache
    assert not cache.clean
    assert [(b.set_current_key(f"k{i}"), s.value())[1] for i in range(200)] == list(range(200))
