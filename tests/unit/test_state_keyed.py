"""Keyed state semantics (PyFlink's), parametrized over every keyed state backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cairn.clock import ManualClock
from cairn.common.time import Time
from cairn.datastream.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)
from cairn.state import (
    HeapKeyedStateBackend,
    KeyGroupRange,
    StateAccessError,
    assign_to_key_group,
)
from cairn.state.api import KeyedStateBackend
from cairn.state.errors import StateMigrationError
from tests.unit import state_backends

BackendFactory = Callable[[], KeyedStateBackend]

BACKENDS: dict[str, BackendFactory] = {
    "heap": lambda: HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, clock=ManualClock(1_000)),
    "rocksdb": lambda: state_backends.rocksdb(clock=ManualClock(1_000)),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> KeyedStateBackend:
    return BACKENDS[request.param]()


def value_state(b: KeyedStateBackend, name: str = "v") -> ValueState[Any]:
    s = b.get_partitioned_state(ValueStateDescriptor(name, None))
    assert isinstance(s, ValueState)
    return s


def list_state(b: KeyedStateBackend, name: str = "l") -> ListState[Any]:
    s = b.get_partitioned_state(ListStateDescriptor(name, None))
    assert isinstance(s, ListState)
    return s


def map_state(b: KeyedStateBackend, name: str = "m") -> MapState[Any, Any]:
    s = b.get_partitioned_state(MapStateDescriptor(name, None, None))
    assert isinstance(s, MapState)
    return s


def reducing_state(b: KeyedStateBackend, name: str, fn: Any) -> ReducingState[Any]:
    s = b.get_partitioned_state(ReducingStateDescriptor(name, fn, None))
    assert isinstance(s, ReducingState)
    return s


def aggregating_state(b: KeyedStateBackend, name: str, fn: Any) -> AggregatingState[Any, Any]:
    s = b.get_partitioned_state(AggregatingStateDescriptor(name, fn, None))
    assert isinstance(s, AggregatingState)
    return s


class Average:
    """A PyFlink-style AggregateFunction: accumulator (sum, count)."""

    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, acc: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc: tuple[int, int]) -> float:
        return acc[0] / acc[1]

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


def test_value_state(backend: KeyedStateBackend) -> None:
    s = value_state(backend)
    backend.set_current_key("a")
    assert s.value() is None
    s.update(1)
    backend.set_current_key("b")
    assert s.value() is None
    s.update(2)
    backend.set_current_key("a")
    assert s.value() == 1 and backend.get_current_key() == "a"
    s.update(None)  # PyFlink: updating with None removes the value
    assert s.value() is None
    assert backend.keys("v") == ["b"]
    backend.set_current_key("b")
    s.clear()
    assert s.value() is None and backend.keys("v") == []


def test_list_state(backend: KeyedStateBackend) -> None:
    s = list_state(backend)
    backend.set_current_key(1)
    assert s.get() == [] and list(s) == []
    s.add("x")
    s.add_all(["y", "z"])
    assert s.get() == ["x", "y", "z"] and list(s) == ["x", "y", "z"]
    got = list(s.get())
    got.append("not-in-state")  # get() returns a copy
    assert s.get() == ["x", "y", "z"]
    for item in s.get():  # adding while iterating a get() result is safe
        s.add(item + "!")
    assert s.get() == ["x", "y", "z", "x!", "y!", "z!"]
    s.update(["only"])
    assert s.get() == ["only"]
    s.add_all([])
    s.add_all(None)  # type: ignore[arg-type]
    assert s.get() == ["only"]
    with pytest.raises(ValueError, match="None"):
        s.add(None)
    with pytest.raises(ValueError, match="None"):
        s.add_all(["ok", None])
    assert s.get() == ["only"]
    backend.set_current_key(2)
    assert s.get() == []
    backend.set_current_key(1)
    s.update([])  # an empty update clears
    assert s.get() == [] and backend.keys("l") == []


def test_map_state(backend: KeyedStateBackend) -> None:
    s = map_state(backend)
    backend.set_current_key("k")
    assert s.is_empty() and s.get("a") is None and not s.contains("a")
    s.put("a", 1)
    s["b"] = 2
    s.put_all({"c": 3, "d": None})
    assert s.get("a") == 1 and s["b"] == 2 and s.get("d") is None
    assert s.contains("d") and "c" in s and "zz" not in s  # a None value is still present
    assert sorted(s.keys()) == ["a", "b", "c", "d"] and sorted(s) == ["a", "b", "c", "d"]
    assert sorted(s.items(), key=lambda kv: kv[0]) == [("a", 1), ("b", 2), ("c", 3), ("d", None)]
    assert sorted(v for v in s.values() if v is not None) == [1, 2, 3]
    for k in s.keys():  # noqa: SIM118 - removing while iterating keys() is safe
        if k != "a":
            s.remove(k)
    del s["zz"]  # removing a missing key is a no-op
    assert s.items() == [("a", 1)] and not s.is_empty()
    backend.set_current_key("other")
    assert s.is_empty() and s.items() == []
    backend.set_current_key("k")
    del s["a"]
    assert s.is_empty() and backend.keys("m") == []  # no empty map is left behind


def test_reducing_state_with_function_object_and_callable(backend: KeyedStateBackend) -> None:
    class Max:
        def reduce(self, a: int, b: int) -> int:
            return max(a, b)

    mx = reducing_state(backend, "max", Max())
    total = reducing_state(backend, "sum", lambda a, b: a + b)
    backend.set_current_key("a")
    assert mx.get() is None and total.get() is None
    for v in (3, 9, 4):
        mx.add(v)
        total.add(v)
    assert mx.get() == 9 and total.get() == 16
    with pytest.raises(ValueError, match="None"):
        total.add(None)
    backend.set_current_key("b")
    assert total.get() is None
    backend.set_current_key("a")
    total.clear()
    assert total.get() is None


def test_aggregating_state(backend: KeyedStateBackend) -> None:
    s = aggregating_state(backend, "avg", Average())
    backend.set_current_key("a")
    assert s.get() is None
    for v in (1, 2, 6):
        s.add(v)
    assert s.get() == 3.0
    s.clear()
    assert s.get() is None


def test_same_name_gives_same_object_and_conflicts_fail(backend: KeyedStateBackend) -> None:
    s = value_state(backend, "x")
    assert value_state(backend, "x") is s
    with pytest.raises(StateMigrationError, match="'x'"):
        list_state(backend, "x")
    ttl = ValueStateDescriptor("x", None)
    ttl.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())
    with pytest.raises(StateMigrationError):
        backend.get_partitioned_state(ttl)
    with pytest.raises(TypeError, match="unsupported"):
        backend.get_partitioned_state(object())  # type: ignore[call-overload]


def test_state_access_without_a_key_fails_clearly(backend: KeyedStateBackend) -> None:
    v, lst, m = value_state(backend), list_state(backend), map_state(backend)
    red = reducing_state(backend, "r", lambda a, b: a + b)
    agg = aggregating_state(backend, "g", Average())
    calls: list[Callable[[], object]] = [
        v.value,
        lambda: v.update(1),
        v.clear,
        lst.get,
        lambda: lst.add(1),
        lambda: m.put(1, 1),
        lambda: m.get(1),
        m.items,
        lambda: red.add(1),
        lambda: agg.add(1),
        backend.get_current_key,
        lambda: backend.register_processing_time_timer(5),
        lambda: backend.register_event_time_timer(5),
    ]
    for call in calls:
        with pytest.raises(StateAccessError, match="outside a keyed context"):
            call()


def test_mixed_key_types_and_equal_keys_share_state(backend: KeyedStateBackend) -> None:
    s = value_state(backend)
    for key in ("1", 1, (1, "a"), None, b"1"):
        backend.set_current_key(key)
        s.update(repr(key))
    backend.set_current_key(1.0)  # == 1: same key, same key group
    assert s.value() == "1"
    assert backend.current_key_group == assign_to_key_group(1, 128)
    backend.set_current_key(None)
    assert s.value() == "None"
    with pytest.raises(TypeError, match="hashable"):
        backend.set_current_key(["a", "list"])
    with pytest.raises(TypeError, match="__cairn_key__"):
        backend.set_current_key(object())
