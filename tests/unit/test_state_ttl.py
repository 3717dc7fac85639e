"""State TTL (processing time) with an injected clock, parametrized over keyed backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairn.clock import ManualClock
from cairn.common.time import Duration, Time
from cairn.datastream.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)
from cairn.state import KeyGroupRange
from cairn.state.api import KeyedStateBackend
from cairn.testing.simple_state_files import DirectoryStateFiles

from ._backends import KeyedBackendFactory

TTL_MS = 100


@pytest.fixture
def make_backend(
    keyed_backend_factory: KeyedBackendFactory,
) -> Callable[[ManualClock], KeyedStateBackend]:
    return lambda clock: keyed_backend_factory(KeyGroupRange(0, 127), 128, clock)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000)


@pytest.fixture
def backend(
    make_backend: Callable[[ManualClock], KeyedStateBackend], clock: ManualClock
) -> KeyedStateBackend:
    b = make_backend(clock)
    b.set_current_key("k")
    return b


def with_ttl(
    desc: StateDescriptor,
    *,
    on_read: bool = False,
    return_expired: bool = False,
    cleanup_snapshot: bool = False,
) -> StateDescriptor:
    builder = StateTtlConfig.new_builder(Time.milliseconds(TTL_MS))
    if on_read:
        builder.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
    if return_expired:
        builder.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
    if cleanup_snapshot:
        builder.cleanup_full_snapshot()
    desc.enable_time_to_live(builder.build())
    return desc


def ttl_value(b: KeyedStateBackend, name: str = "v", **kw: bool) -> ValueState[Any]:
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor(name, None), **kw))
    assert isinstance(s, ValueState)
    return s


def test_value_expires_exactly_ttl_after_write(
    backend: KeyedStateBackend, clock: ManualClock
) -> None:
    s = ttl_value(backend)
    s.update("x")
    clock.advance(TTL_MS - 1)
    assert s.value() == "x"  # reading does not extend under OnCreateAndWrite
    clock.advance(1)
    assert s.value() is None
    assert backend.keys("v") == []  # dropped on access


def test_write_extends_ttl(backend: KeyedStateBackend, clock: ManualClock) -> None:
    s = ttl_value(backend)
    s.update(1)
    clock.advance(60)
    s.update(2)
    clock.advance(60)
    assert s.value() == 2


def test_on_read_and_write_extends_on_read(backend: KeyedStateBackend, clock: ManualClock) -> None:
    s = ttl_value(backend, on_read=True)
    s.update("x")
    for _ in range(5):
        clock.advance(TTL_MS - 1)
        assert s.value() == "x"
    clock.advance(TTL_MS)
    assert s.value() is None


def test_return_expired_if_not_cleaned_up_returns_it_once(
    backend: KeyedStateBackend, clock: ManualClock
) -> None:
    s = ttl_value(backend, return_expired=True)
    s.update("old")
    clock.advance(TTL_MS)
    assert s.value() == "old"
    assert s.value() is None


def test_list_elements_expire_individually(backend: KeyedStateBackend, clock: ManualClock) -> None:
    s = backend.get_partitioned_state(with_ttl(ListStateDescriptor("l", None)))
    assert isinstance(s, ListState)
    s.add("a")
    clock.advance(50)
    s.add_all(["b", "c"])
    clock.advance(50)
    assert s.get() == ["b", "c"]
    clock.advance(50)
    assert s.get() == []
    assert backend.keys("l") == []
    s.update(["z"])
    assert list(s) == ["z"]


def test_list_return_expired_and_on_read(backend: KeyedStateBackend, clock: ManualClock) -> None:
    seen = backend.get_partitioned_state(
        with_ttl(ListStateDescriptor("seen", None), return_expired=True)
    )
    hot = backend.get_partitioned_state(with_ttl(ListStateDescriptor("hot", None), on_read=True))
    assert isinstance(seen, ListState) and isinstance(hot, ListState)
    seen.add("a")
    hot.add("h")
    clock.advance(50)
    seen.add("b")
    assert hot.get() == ["h"]  # reading at +50 refreshes "h"
    clock.advance(50)
    assert seen.get() == ["a", "b"]  # "a" expired but not cleaned up yet: returned once
    assert seen.get() == ["b"]
    assert hot.get() == ["h"]  # +100 after the write, but only +50 after the last read
    clock.advance(99)
    assert hot.get() == ["h"]
    clock.advance(100)
    assert hot.get() == []


def test_map_entries_expire_individually(backend: KeyedStateBackend, clock: ManualClock) -> None:
    s = backend.get_partitioned_state(with_ttl(MapStateDescriptor("m", None, None)))
    assert isinstance(s, MapState)
    s.put("a", 1)
    clock.advance(50)
    s.put_all({"b": 2})
    assert sorted(s.items()) == [("a", 1), ("b", 2)]
    clock.advance(50)
    assert not s.contains("a") and s.get("a") is None
    assert s.keys() == ["b"] and s.values() == [2] and not s.is_empty()
    clock.advance(50)
    assert s.is_empty() and backend.keys("m") == []


def test_map_return_expired_and_on_read(backend: KeyedStateBackend, clock: ManualClock) -> None:
    s = backend.get_partitioned_state(
        with_ttl(MapStateDescriptor("m", None, None), return_expired=True, on_read=True)
    )
    assert isinstance(s, MapState)
    s.put("a", 1)
    s.put("b", 2)
    clock.advance(99)
    assert s.get("b") == 2  # refreshes "b" only
    clock.advance(1)
    assert s.contains("a")  # expired, returned once
    assert not s.contains("a")
    assert s.items() == [("b", 2)]


def test_reducing_ignores_expired_accumulation(
    backend: KeyedStateBackend, clock: ManualClock
) -> None:
    s = backend.get_partitioned_state(
        with_ttl(ReducingStateDescriptor("sum", lambda a, b: a + b, None), return_expired=True)
    )
    assert isinstance(s, ReducingState)
    s.add(1)
    s.add(2)
    clock.advance(TTL_MS)
    s.add(10)  # the expired 3 does not take part, even with ReturnExpiredIfNotCleanedUp
    assert s.get() == 10


def test_aggregating_restarts_after_expiry(backend: KeyedStateBackend, clock: ManualClock) -> None:
    class Count:
        def create_accumulator(self) -> int:
            return 0

        def add(self, value: Any, acc: int) -> int:
            return acc + 1

        def get_result(self, acc: int) -> int:
            return acc

    s = backend.get_partitioned_state(with_ttl(AggregatingStateDescriptor("c", Count(), None)))
    assert isinstance(s, AggregatingState)
    s.add("x")
    s.add("y")
    assert s.get() == 2
    clock.advance(TTL_MS)
    assert s.get() is None
    s.add("z")
    assert s.get() == 1


def test_duration_ttl_and_disabled_ttl(backend: KeyedStateBackend, clock: ManualClock) -> None:
    d = ValueStateDescriptor("d", None)
    d.enable_time_to_live(StateTtlConfig.new_builder(Duration.of_millis(TTL_MS)).build())
    s = backend.get_partitioned_state(d)
    assert isinstance(s, ValueState)
    s.update(1)
    clock.advance(TTL_MS)
    assert s.value() is None
    off = ValueStateDescriptor("off", None)
    off.enable_time_to_live(
        StateTtlConfig.new_builder(Time.milliseconds(1))
        .set_update_type(StateTtlConfig.UpdateType.Disabled)
        .build()
    )
    plain = backend.get_partitioned_state(off)
    assert isinstance(plain, ValueState)
    plain.update(1)
    clock.advance(10_000)
    assert plain.value() == 1


def _round_trip(
    source: KeyedStateBackend,
    target: KeyedStateBackend,
    tmp_path: Path,
) -> None:
    files = DirectoryStateFiles(tmp_path)
    handle = source.snapshot(1)(files)
    target.restore([handle] if handle is not None else [], files)


@pytest.mark.parametrize("cleanup", [True, False])
def test_cleanup_full_snapshot_leaves_expired_values_out(
    make_backend: Callable[[ManualClock], KeyedStateBackend],
    clock: ManualClock,
    tmp_path: Path,
    cleanup: bool,
) -> None:
    source = make_backend(clock)
    v = ttl_value(source, cleanup_snapshot=cleanup)
    lst = source.get_partitioned_state(
        with_ttl(ListStateDescriptor("l", None), cleanup_snapshot=cleanup)
    )
    m = source.get_partitioned_state(
        with_ttl(MapStateDescriptor("m", None, None), cleanup_snapshot=cleanup)
    )
    assert isinstance(lst, ListState) and isinstance(m, MapState)
    for key in ("old", "new"):
        source.set_current_key(key)
        v.update(key)
        lst.add(key)
        m.put(key, 1)
        clock.advance(60)
    # now: "old" was written 120 ms ago (expired), "new" 60 ms ago.
    target = make_backend(clock)
    _round_trip(source, target, tmp_path)
    expected = ["new"] if cleanup else ["new", "old"]
    for name in ("v", "l", "m"):
        assert sorted(target.keys(name)) == expected
    # Restored values keep their timestamps: "new" expires 40 ms later.
    tv = ttl_value(target)
    target.set_current_key("new")
    assert tv.value() == "new"
    clock.advance(40)
    assert tv.value() is None


def test_ttl_is_added_or_dropped_on_restore(
    make_backend: Callable[[ManualClock], KeyedStateBackend],
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    plain_src = make_backend(clock)
    s = plain_src.get_partitioned_state(ValueStateDescriptor("v", None))
    assert isinstance(s, ValueState)
    plain_src.set_current_key("k")
    s.update("x")
    with_ttl_target = make_backend(clock)
    _round_trip(plain_src, with_ttl_target, tmp_path / "a")
    t = ttl_value(with_ttl_target)
    with_ttl_target.set_current_key("k")
    clock.advance(TTL_MS - 1)
    assert t.value() == "x"  # TTL counts from the restore
    clock.advance(1)
    assert t.value() is None

    ttl_src = make_backend(clock)
    u = ttl_value(ttl_src)
    ttl_src.set_current_key("k")
    u.update("y")
    plain_target = make_backend(clock)
    _round_trip(ttl_src, plain_target, tmp_path / "b")
    p = plain_target.get_partitioned_state(ValueStateDescriptor("v", None))
    assert isinstance(p, ValueState)
    plain_target.set_current_key("k")
    clock.advance(10 * TTL_MS)
    assert p.value() == "y"
