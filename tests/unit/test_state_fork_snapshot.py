"""Snapshots serialized by a forked child: same files as the thread path, isolation, failures.

The keyed-snapshot suite of ``test_state_snapshot`` runs on backends that fork for every
snapshot too (``fork_threshold=0``, its ``make`` fixture), so every guarantee it checks holds
for both paths.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from cairn.clock import ManualClock
from cairn.common.time import Time
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)
from cairn.state import HeapKeyedStateBackend, KeyGroupRange
from cairn.state.fork_snapshot import ForkedSerializer, SnapshotChildError, fork_supported
from cairn.state.snapshot_format import KEYED_MAGIC, dumps_unshared, loads
from cairn.testing.simple_state_files import DirectoryStateFiles, MemoryStateFiles

pytestmark = pytest.mark.skipif(not fork_supported(), reason="needs os.fork")

MAX_P = 128
FULL = KeyGroupRange(0, MAX_P - 1)


def forking(r: KeyGroupRange) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(r, MAX_P, clock=ManualClock(), file_prefix="op-", fork_threshold=0)


def threaded(r: KeyGroupRange) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(
        r, MAX_P, clock=ManualClock(), file_prefix="op-", fork_threshold=None
    )


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children()}


def _every_kind(b: HeapKeyedStateBackend) -> dict[str, Any]:
    ttl_desc = ValueStateDescriptor("ttl", None)
    ttl_desc.enable_time_to_live(
        StateTtlConfig.new_builder(Time.milliseconds(1_000)).cleanup_full_snapshot().build()
    )
    return {
        "count": b.get_partitioned_state(ValueStateDescriptor("count", None)),
        "list": b.get_partitioned_state(ListStateDescriptor("list", None)),
        "map": b.get_partitioned_state(MapStateDescriptor("map", None, None)),
        "sum": b.get_partitioned_state(ReducingStateDescriptor("sum", lambda x, y: x + y, None)),
        "ttl": b.get_partitioned_state(ttl_desc),
    }


def _key(i: int) -> Any:
    return f"user-{i}" if i % 3 else (i, "t")


def _fill_every_kind(b: HeapKeyedStateBackend, keys: int, clock: ManualClock) -> None:
    s = _every_kind(b)
    for i in range(keys):
        if i == keys // 2:
            clock.advance_to(600)  # the first half of the TTL values expires at 1000
        b.set_current_key(_key(i))
        s["count"].update(i)
        if i % 2:
            s["list"].add_all([i, str(i)])
            s["map"].put("x", {"nested": [i]})
        s["sum"].add(i)
        s["ttl"].update(f"e{i}")
        if i % 5 == 0:
            b.register_processing_time_timer(i)
            b.register_event_time_timer(10 * i)


def _read_every_kind(b: HeapKeyedStateBackend, keys: int) -> list[Any]:
    s = _every_kind(b)
    seen: list[Any] = [sorted(map(repr, b.keys("ttl")))]
    for i in range(keys):
        b.set_current_key(_key(i))
        seen.append(
            (
                s["count"].value(),
                s["list"].get(),
                s["map"].items(),
                s["sum"].get(),
                s["ttl"].value(),
            )
        )
    seen.append(sorted(map(repr, b.pop_due_timers(10**9))))
    seen.append(sorted(map(repr, b.pop_due_event_timers(10**9))))
    return seen


def _snapshot_bytes(b: HeapKeyedStateBackend, directory: Path) -> tuple[Any, bytes]:
    handle = b.snapshot(3)(DirectoryStateFiles(directory))
    assert handle is not None
    return handle, (directory / handle.path).read_bytes()


def test_forked_snapshot_of_atoms_is_byte_identical_to_the_threaded_one(tmp_path: Path) -> None:
    forked, threaded_ = forking(FULL), threaded(FULL)
    for b in (forked, threaded_):
        count = b.get_partitioned_state(ValueStateDescriptor("count", None))
        total = b.get_partitioned_state(ReducingStateDescriptor("sum", lambda x, y: x + y, None))
        for i in range(3_000):
            b.set_current_key(_key(i))
            count.update(i if i % 2 else f"s{i}")
            total.add(i / 2)
            if i % 5 == 0:
                b.register_processing_time_timer(i)
    assert _snapshot_bytes(forked, tmp_path / "f") == _snapshot_bytes(threaded_, tmp_path / "t")


def test_forked_and_threaded_snapshots_restore_the_same_state(tmp_path: Path) -> None:
    # The child pickles tables of containers inline, the thread nested in their section:
    # other bytes, same state (expired TTL values left out by both).
    restored = []
    for threshold in (0, None):
        clock = ManualClock()
        b = HeapKeyedStateBackend(FULL, MAX_P, clock=clock, fork_threshold=threshold)
        _fill_every_kind(b, 2_000, clock)
        clock.advance_to(1_200)
        files = MemoryStateFiles()
        handle = b.snapshot(3)(files)
        assert handle is not None
        target = HeapKeyedStateBackend(FULL, MAX_P, clock=clock)
        target.restore([handle], files)
        restored.append(_read_every_kind(target, 2_000))
    assert restored[0] == restored[1]
    assert len(restored[0][0]) == 1_000  # live TTL values: the second half only
    assert restored[0][2] == (1, [1, "1"], [("x", {"nested": [1]})], 1, None)


def test_child_serializes_the_state_as_of_the_synchronous_part() -> None:
    b = forking(FULL)
    v = b.get_partitioned_state(ValueStateDescriptor("v", None))
    assert isinstance(v, ValueState)
    for i in range(1_000):
        b.set_current_key(i)
        v.update([i])
    write = b.snapshot(1)
    for i in range(1_000):  # the child has its own copy-on-write image
        b.set_current_key(i)
        v.value().append("late")
        v.update(None if i % 2 else [-1])
    files = MemoryStateFiles()
    handle = write(files)
    assert handle is not None
    restored = threaded(FULL)
    restored.restore([handle], files)
    w = restored.get_partitioned_state(ValueStateDescriptor("v", None))
    for i in range(1_000):
        restored.set_current_key(i)
        assert w.value() == [i]


def test_threshold_decides_between_thread_and_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def snapshot_forks(b: HeapKeyedStateBackend) -> bool:
        before = _children()
        write = b.snapshot(1)
        forked = bool(_children() - before)
        write(MemoryStateFiles())
        return forked

    b = HeapKeyedStateBackend(FULL, MAX_P, clock=ManualClock(), fork_threshold=3)
    v = b.get_partitioned_state(ValueStateDescriptor("v", None))
    for i in range(3):
        assert b.num_entries() == i
        assert not snapshot_forks(b)
        b.set_current_key(i)
        v.update(i)
    assert snapshot_forks(b)
    monkeypatch.setenv("CAIRN_STATE_FORK_THRESHOLD", "off")
    assert not snapshot_forks(_copy_of(b))
    monkeypatch.setenv("CAIRN_STATE_FORK_THRESHOLD", "2")
    assert snapshot_forks(_copy_of(b))


def test_a_map_with_many_entries_under_one_key_counts_them_all() -> None:
    """A join keeps every row of a key in one map: its entries, not its keys, are what a
    synchronous copy would pickle, so they decide the fork."""
    b = HeapKeyedStateBackend(FULL, MAX_P, clock=ManualClock(), fork_threshold=50)
    rows = b.get_partitioned_state(MapStateDescriptor("rows", None, None))
    b.set_current_key("auction-1")
    for i in range(49):
        rows.put(("bid", i), 1)
    assert b.num_entries() == 49
    before = _children()
    b.snapshot(1)(MemoryStateFiles())
    assert not _children() - before
    rows.put(("bid", 49), 1)
    assert b.num_entries() == 50
    write = b.snapshot(2)
    assert _children() - before  # forked for one key holding 50 rows
    write(MemoryStateFiles())


def _copy_of(b: HeapKeyedStateBackend) -> HeapKeyedStateBackend:
    """A restored copy of ``b`` configured as a job's worker would configure it now: with the
    state settings the API reads (environment overrides included) when it prepares a job."""
    files = MemoryStateFiles()
    handle = b.snapshot(1)(files)
    assert handle is not None
    env = StreamExecutionEnvironment()
    env.from_collection([1]).print()
    state = env.prepare_job().settings.state
    copy = HeapKeyedStateBackend(
        FULL,
        MAX_P,
        clock=ManualClock(),
        fork_threshold=state.fork_threshold,
        fork_niceness=state.fork_niceness,
    )
    copy.restore([handle], files)
    return copy


def test_serialization_error_in_the_child_fails_the_asynchronous_part() -> None:
    b = forking(FULL)
    v = b.get_partitioned_state(ValueStateDescriptor("v", None))
    b.set_current_key("a")
    v.update(lambda: None)  # a value only cloudpickle can write: works
    b.set_current_key("b")
    v.update(threading.Lock())  # not picklable at all
    write = b.snapshot(1)
    with pytest.raises(SnapshotChildError, match=r"(?s)snapshot child.*lock"):
        write(MemoryStateFiles())


def test_killed_child_is_reported_with_its_signal() -> None:
    def slow() -> Iterator[tuple[int, bytes]]:
        yield 0, b"x"
        time.sleep(30)
        yield 1, b"y"

    before = _children()
    child = ForkedSerializer.start(slow, KEYED_MAGIC, niceness=0)
    (pid,) = _children() - before
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(SnapshotChildError, match="killed by signal 9"):
        child.result()
    assert pid not in _children()  # reaped


def test_a_silent_child_is_killed_after_the_stall_timeout() -> None:
    def stuck() -> Iterator[tuple[int, bytes]]:
        time.sleep(30)
        yield 0, b""

    before = _children()
    child = ForkedSerializer.start(stuck, KEYED_MAGIC, niceness=0, stall_timeout_s=0.2)
    with pytest.raises(SnapshotChildError, match=r"sent nothing for 0.2 s"):
        child.result()
    assert not _children() - before


def test_an_abandoned_snapshot_kills_its_child() -> None:
    def endless() -> Iterator[tuple[int, bytes]]:
        while True:
            yield 0, b"x" * 65536  # blocks once the pipe is full: nobody reads

    before = _children()
    child = ForkedSerializer.start(endless, KEYED_MAGIC, niceness=0)
    assert _children() - before
    del child  # never consumed (e.g. the task failed before the asynchronous part)
    assert not _children() - before


def test_the_child_holds_no_inherited_connection_open() -> None:
    # A worker's peers detect its death by EOF on its sockets: a snapshot child must not
    # keep them open.
    ours, peer = socket.socketpair()
    peer.settimeout(5)

    def slow() -> Iterator[tuple[int, bytes]]:
        time.sleep(0.5)
        yield 0, b"x"

    child = ForkedSerializer.start(slow, KEYED_MAGIC, niceness=0)
    ours.close()
    started = time.monotonic()
    assert peer.recv(1) == b""  # EOF although the child (forked with ``ours``) still runs
    assert time.monotonic() - started < 0.3
    assert child.result()[0] == KEYED_MAGIC + b"x"
    peer.close()


def test_sections_and_ranges_come_back_in_order() -> None:
    sections = [(5, b"five"), (2, b""), (9, b"nine!" * 100_000)]
    data, ranges = ForkedSerializer.start(lambda: sections, b"MAGIC").result()
    assert data == b"MAGIC" + b"".join(s for _, s in sections)
    assert list(ranges) == [5, 2, 9]
    for kg, payload in sections:
        r = ranges[kg]
        assert data[r.offset : r.offset + r.length] == payload


def test_unshared_pickles_load_equal_and_fall_back_for_cycles() -> None:
    shared = ["s"]
    table = {f"k{i}": (i, shared) for i in range(100)}
    copy = loads(dumps_unshared(table))
    assert copy == table
    assert copy["k1"][1] is not copy["k2"][1]  # written twice, like per-entry serialization
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    back = loads(dumps_unshared({"c": cyclic}))
    assert back["c"][1] is back["c"]
