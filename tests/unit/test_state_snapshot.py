"""Keyed snapshots: isolation, round trip through real files, rescaling, corruption; on each
keyed backend, and on the heap backend serializing in a forked child."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import KeyedStateHandle
from cairn.clock import ManualClock
from cairn.datastream.state import (
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from cairn.state import (
    CorruptStateError,
    HeapKeyedStateBackend,
    KeyGroupRange,
    KeyGroupRangeError,
    StateMigrationError,
    StateRestoreError,
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from cairn.state.api import KeyedStateBackend
from cairn.state.fork_snapshot import fork_supported
from cairn.state.snapshot_format import KEYED_MAGIC
from cairn.testing.simple_state_files import DirectoryStateFiles, MemoryStateFiles
from tests.unit import state_backends

from ._backends import KeyedBackendFactory

MAX_P = 128
BackendFactory = Callable[[KeyGroupRange], KeyedStateBackend]


@pytest.fixture(
    params=[
        "default",
        pytest.param("forked", marks=pytest.mark.skipif(not fork_supported(), reason="os.fork")),
    ]
)
def make(
    request: pytest.FixtureRequest, keyed_backend_factory: KeyedBackendFactory
) -> BackendFactory:
    """Each keyed backend as configured by default, then the heap backend serializing every
    snapshot in a forked child (``fork_threshold=0``): each guarantee holds on both paths."""
    if request.param == "forked":
        if keyed_backend_factory is not HeapKeyedStateBackend:
            pytest.skip("only the heap backend forks")
        return lambda r: HeapKeyedStateBackend(
            r, MAX_P, clock=ManualClock(), file_prefix="op-", fork_threshold=0
        )
    return lambda r: keyed_backend_factory(r, MAX_P, ManualClock(), file_prefix="op-")


FULL = KeyGroupRange(0, MAX_P - 1)


class States:
    """Typed handles on one state of each kind in a backend."""

    def __init__(self, b: KeyedStateBackend) -> None:
        self.b = b
        v = b.get_partitioned_state(ValueStateDescriptor("value", None))
        lst = b.get_partitioned_state(ListStateDescriptor("list", None))
        m = b.get_partitioned_state(MapStateDescriptor("map", None, None))
        r = b.get_partitioned_state(ReducingStateDescriptor("sum", lambda x, y: x + y, None))
        assert isinstance(v, ValueState) and isinstance(lst, ListState)
        assert isinstance(m, MapState) and isinstance(r, ReducingState)
        self.value, self.list, self.map, self.sum = v, lst, m, r

    def fill(self, key: Any) -> None:
        self.b.set_current_key(key)
        self.value.update({"key": key, "n": 1})  # a mutable value
        self.list.add_all([str(key), "second"])
        self.map.put("k1", [1, 2])
        self.map.put("k2", key)
        self.sum.add(3)
        self.sum.add(4)
        self.b.register_processing_time_timer(len(str(key)))
        self.b.register_event_time_timer(100)

    def read(self, key: Any) -> tuple[Any, ...]:
        self.b.set_current_key(key)
        return (self.value.value(), self.list.get(), sorted(self.map.items()), self.sum.get())

    @staticmethod
    def expected(key: Any) -> tuple[Any, ...]:
        return ({"key": key, "n": 1}, [str(key), "second"], [("k1", [1, 2]), ("k2", key)], 7)


KEYS: list[Any] = [f"user-{i}" for i in range(120)] + [7, ("t", 2), None]


def snapshot_to(b: KeyedStateBackend, files: DirectoryStateFiles) -> KeyedStateHandle:
    handle = b.snapshot(1)(files)
    assert handle is not None
    return handle


def test_round_trip_restores_every_kind_and_timers(make: BackendFactory, tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    src = States(make(FULL))
    for key in KEYS:
        src.fill(key)
    handle = snapshot_to(src.b, files)
    assert handle.path.startswith("op-keyed")
    dst = States(make(FULL))
    dst.b.restore([handle], files)
    for key in KEYS:
        assert dst.read(key) == States.expected(key)
    proc = dst.b.pop_due_timers(10**9)
    assert sorted(proc, key=repr) == sorted(((len(str(k)), k) for k in KEYS), key=repr)
    assert sorted(dst.b.pop_due_event_timers(100), key=repr) == sorted(
        ((100, k) for k in KEYS), key=repr
    )


def test_file_layout_and_handle(make: BackendFactory, tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    src = States(make(FULL))
    state_backends.heap_format_only(src.b)
    for key in KEYS:
        src.fill(key)
    handle = snapshot_to(src.b, files)
    data = (tmp_path / handle.path).read_bytes()
    assert data.startswith(KEYED_MAGIC) and handle.size == len(data)
    assert (handle.key_group_start, handle.key_group_end) == (0, MAX_P - 1)
    assert set(handle.sections) == {assign_to_key_group(k, MAX_P) for k in KEYS}
    end = len(KEYED_MAGIC)
    for kg in sorted(handle.sections):
        r = handle.sections[kg]
        assert r.offset == end  # sections are contiguous, in key-group order
        assert zlib.crc32(data[r.offset : r.offset + r.length]) == r.crc32
        end = r.offset + r.length
    assert end == len(data)


def test_empty_backend_writes_nothing(make: BackendFactory, tmp_path: Path) -> None:
    b = make(FULL)
    States(b)  # registered but empty states
    assert b.snapshot(1)(DirectoryStateFiles(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []


def test_mutations_after_the_synchronous_part_do_not_leak(
    make: BackendFactory, tmp_path: Path
) -> None:
    src = States(make(FULL))
    for key in ("a", "b"):
        src.fill(key)
    write = src.b.snapshot(7)  # synchronous part
    src.b.set_current_key("a")
    src.value.value()["n"] = 999  # in-place mutation of the stored object, no update()
    src.list.add("late")
    src.map.get("k1").append(3)
    src.map.put("k3", "late")
    src.sum.add(100)
    src.b.register_processing_time_timer(5_000)
    src.b.delete_event_time_timer(100)
    src.b.set_current_key("b")
    src.value.clear()
    src.list.clear()
    src.map.clear()
    src.b.set_current_key("c")
    src.fill("c")
    files = DirectoryStateFiles(tmp_path)
    handle = write(files)  # asynchronous part, after all of the above
    assert handle is not None
    dst = States(make(FULL))
    dst.b.restore([handle], files)
    assert dst.read("a") == States.expected("a") and dst.read("b") == States.expected("b")
    assert dst.read("c") == (None, [], [], None)
    assert sorted(dst.b.pop_due_timers(10**9)) == [(1, "a"), (1, "b")]
    assert sorted(dst.b.pop_due_event_timers(10**9)) == [(100, "a"), (100, "b")]


def test_asynchronous_part_runs_on_another_thread_while_processing(
    make: BackendFactory, tmp_path: Path
) -> None:
    src = States(make(FULL))
    for key in KEYS:
        src.fill(key)
    write = src.b.snapshot(1)
    result: list[KeyedStateHandle | None] = []
    files = DirectoryStateFiles(tmp_path)
    worker = threading.Thread(target=lambda: result.append(write(files)))
    worker.start()
    for round_ in range(20):  # keep processing (mutating every key) concurrently
        for key in KEYS:
            src.b.set_current_key(key)
            src.sum.add(round_)
            src.list.add(round_)
            src.value.update({"key": key, "n": round_})
    worker.join()
    assert result[0] is not None
    dst = States(make(FULL))
    dst.b.restore([result[0]], files)
    for key in KEYS:
        assert dst.read(key) == States.expected(key)


def _old_subtasks(
    make: BackendFactory, parallelism: int, files: DirectoryStateFiles
) -> list[KeyedStateHandle]:
    olds = [
        States(make(key_group_range_for_subtask(MAX_P, parallelism, i))) for i in range(parallelism)
    ]
    for key in KEYS:
        owner = subtask_for_key_group(MAX_P, parallelism, assign_to_key_group(key, MAX_P))
        olds[owner].fill(key)
    return [snapshot_to(s.b, files) for s in olds]


@pytest.mark.parametrize(("old_p", "new_p"), [(2, 3), (3, 1), (1, 4), (3, 3)])
def test_rescale_gives_every_key_and_timer_to_exactly_one_new_subtask(
    make: BackendFactory, tmp_path: Path, old_p: int, new_p: int
) -> None:
    files = DirectoryStateFiles(tmp_path)
    handles = _old_subtasks(make, old_p, files)
    seen_keys: list[Any] = []
    seen_timers: list[tuple[int, Any]] = []
    for i in range(new_p):
        key_range = key_group_range_for_subtask(MAX_P, new_p, i)
        new = States(make(key_range))
        new.b.restore(handles, files)
        keys = new.b.keys("value")
        assert all(assign_to_key_group(k, MAX_P) in key_range for k in keys)
        for name in ("list", "map", "sum"):
            assert sorted(map(repr, new.b.keys(name))) == sorted(map(repr, keys))
        for key in keys:
            assert new.read(key) == States.expected(key)
        timers = new.b.pop_due_timers(10**9)
        assert {k for _, k in timers} <= set(keys)
        seen_keys.extend(keys)
        seen_timers.extend(timers)
    assert sorted(map(repr, seen_keys)) == sorted(map(repr, KEYS))
    assert sorted(map(repr, seen_timers)) == sorted(repr((len(str(k)), k)) for k in KEYS)


class RecordingReader:
    def __init__(self, inner: DirectoryStateFiles) -> None:
        self.inner = inner
        self.reads: list[tuple[str, int, int]] = []

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        self.reads.append((path, offset, length))
        return self.inner.read_state_range(path, offset, length)


def test_restore_reads_only_owned_sections_in_one_read_per_file(
    make: BackendFactory, tmp_path: Path
) -> None:
    state_backends.heap_format_only(make(FULL))
    files = DirectoryStateFiles(tmp_path)
    handles = _old_subtasks(make, 2, files)
    reader = RecordingReader(files)
    new_range = key_group_range_for_subtask(MAX_P, 3, 1)  # overlaps both old subtasks
    make(new_range).restore(handles, reader)
    assert len(reader.reads) == 2
    for (path, offset, length), handle in zip(reader.reads, handles, strict=True):
        owned = [r for kg, r in handle.sections.items() if kg in new_range]
        assert path == handle.path
        assert offset == min(r.offset for r in owned)
        assert length == sum(r.length for r in owned)


def test_crc_mismatch_names_file_and_key_group(make: BackendFactory, tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    src = States(make(FULL))
    state_backends.heap_format_only(src.b)
    for key in KEYS:
        src.fill(key)
    handle = snapshot_to(src.b, files)
    kg = sorted(handle.sections)[len(handle.sections) // 2]
    r = handle.sections[kg]
    path = tmp_path / handle.path
    data = bytearray(path.read_bytes())
    data[r.offset + r.length // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStateError) as err:
        make(FULL).restore([handle], files)
    assert handle.path in str(err.value) and f"key group {kg} " in str(err.value)


def test_truncated_file_is_detected(make: BackendFactory, tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    src = States(make(FULL))
    src.fill("a")
    handle = snapshot_to(src.b, files)
    path = tmp_path / handle.path
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CorruptStateError, match="truncated"):
        make(FULL).restore([handle], files)


def test_same_key_group_in_two_handles_is_rejected(make: BackendFactory, tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    src = States(make(FULL))
    src.fill("a")
    handle = snapshot_to(src.b, files)
    with pytest.raises(StateRestoreError, match="two state files"):
        make(FULL).restore([handle, handle], files)


def test_key_outside_the_range_fails_on_access(make: BackendFactory) -> None:
    b = make(KeyGroupRange(0, 63))
    stray = next(f"k{i}" for i in range(1000) if assign_to_key_group(f"k{i}", MAX_P) >= 64)
    s = States(b)
    b.set_current_key(stray)
    for call in (
        s.value.value,
        lambda: s.list.add(1),
        lambda: s.map.put(1, 1),
        lambda: b.register_processing_time_timer(1),
    ):
        with pytest.raises(KeyGroupRangeError, match=r"outside this subtask.s key groups 0\.\.63"):
            call()
    assert b.snapshot(1)(MemoryStateFiles()) is None


def test_restored_state_keeps_its_kind_and_survives_another_checkpoint(
    make: BackendFactory, tmp_path: Path
) -> None:
    files = DirectoryStateFiles(tmp_path)
    src = States(make(FULL))
    src.fill("a")
    middle = make(FULL)
    middle.restore([snapshot_to(src.b, files)], files)
    with pytest.raises(StateMigrationError, match="'value'"):
        middle.get_partitioned_state(ListStateDescriptor("value", None))
    # Never accessed after the restore, still part of the next checkpoint.
    last = States(make(FULL))
    last.b.restore([snapshot_to(middle, files)], files)
    assert last.read("a") == States.expected("a")


def test_values_of_locally_defined_classes_round_trip(make: BackendFactory) -> None:
    class Local:  # not importable by name: plain pickle fails, cloudpickle is used
        def __init__(self, n: int) -> None:
            self.n = n

    files = MemoryStateFiles()
    src = make(FULL)
    v = src.get_partitioned_state(ValueStateDescriptor("obj", None))
    assert isinstance(v, ValueState)
    src.set_current_key("a")
    v.update(Local(5))
    handle = src.snapshot(1)(files)
    assert handle is not None
    v.value().n = 6  # the snapshot copy was taken before this in-place change
    dst = make(FULL)
    dst.restore([handle], files)
    w = dst.get_partitioned_state(ValueStateDescriptor("obj", None))
    assert isinstance(w, ValueState)
    dst.set_current_key("a")
    assert w.value().n == 5
