"""The inlined per-record paths of the heap states fail exactly like the generic ones.

Every method that reads the current key itself (instead of through ``_current``) must
still refuse a missing key and a key of a key group this backend does not own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cairn.clock import ManualClock
from cairn.datastream.functions import AggregateFunction
from cairn.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from cairn.state import (
    HeapKeyedStateBackend,
    KeyGroupRange,
    KeyGroupRangeError,
    StateAccessError,
    assign_to_key_group,
)


class Count(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return a + b


def _calls(b: HeapKeyedStateBackend) -> list[Callable[[], object]]:
    v = b.get_partitioned_state(ValueStateDescriptor("v", None))
    lst = b.get_partitioned_state(ListStateDescriptor("l", None))
    m = b.get_partitioned_state(MapStateDescriptor("m", None, None))
    red = b.get_partitioned_state(ReducingStateDescriptor("r", lambda x, y: x + y, None))
    agg = b.get_partitioned_state(AggregatingStateDescriptor("a", Count(), None))
    return [
        v.value,
        lambda: v.update(1),
        lst.get,
        lambda: lst.add(1),
        lambda: m.put("u", 1),
        lambda: m.get("u"),
        lambda: m.contains("u"),
        m.items,
        m.keys,
        m.values,
        m.is_empty,
        red.get,
        lambda: red.add(1),
        agg.get,
        lambda: agg.add(1),
    ]


def test_every_inlined_access_needs_a_current_key() -> None:
    b = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, clock=ManualClock())
    for call in _calls(b):
        with pytest.raises(StateAccessError, match="outside a keyed context"):
            call()


def test_every_inlined_access_refuses_a_foreign_key_group() -> None:
    b = HeapKeyedStateBackend(KeyGroupRange(0, 63), 128, clock=ManualClock())
    calls = _calls(b)
    b.set_current_key(next(f"k{i}" for i in range(1000) if assign_to_key_group(f"k{i}", 128) > 63))
    for call in calls:
        with pytest.raises(KeyGroupRangeError, match="outside this subtask"):
            call()


def test_inlined_paths_read_and_write_the_current_keys_entry() -> None:
    b = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, clock=ManualClock())
    lst = b.get_partitioned_state(ListStateDescriptor("l", None))
    m = b.get_partitioned_state(MapStateDescriptor("m", None, None))
    red = b.get_partitioned_state(ReducingStateDescriptor("r", lambda x, y: x + y, None))
    agg = b.get_partitioned_state(AggregatingStateDescriptor("a", Count(), None))
    for key in ("a", "b"):
        b.set_current_key(key)
        for n in range(3 if key == "a" else 1):
            lst.add(n)
            m.put(n, key)
            red.add(10)
            agg.add("x")
    with pytest.raises(ValueError, match="None to a ReducingState"):
        red.add(None)
    b.set_current_key("a")
    assert (lst.get(), m.items(), red.get(), agg.get()) == (
        [0, 1, 2],
        [(0, "a"), (1, "a"), (2, "a")],
        30,
        3,
    )
    b.set_current_key("b")
    assert (lst.get(), m.get(0), m.contains(1), red.get(), agg.get()) == ([0], "b", False, 10, 1)
    b.set_current_key("c")
    assert (lst.get(), m.is_empty(), red.get(), agg.get()) == ([], True, None, None)
