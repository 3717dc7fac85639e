"""Heap keyed state objects without TTL: views of one state's per-key-group dicts.

Invariant: a state object never owns data; it reads and writes
``groups[ctx.key_group][ctx.key]`` of the table the backend handed it, so an access is a few
attribute reads and one or two dict operations, and a key with no value has no entry
(empty lists/maps are removed). Slots of key groups owned by other subtasks hold a
``ForeignKeyGroup`` that fails loudly on any access.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from cairn.api.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    MapState,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueState,
)
from cairn.state.errors import KeyGroupRangeError, StateAccessError

__all__ = [
    "NO_KEY",
    "AggregatingBase",
    "ForeignKeyGroup",
    "Groups",
    "HeapAggregatingState",
    "HeapListState",
    "HeapMapState",
    "HeapReducingState",
    "HeapStateBase",
    "HeapValueState",
    "KeyContext",
    "NowMs",
    "ReducingBase",
    "check_list_element",
    "list_elements",
    "raise_no_key",
    "remove_map_entry",
]

NowMs = Callable[[], int]
"""A bound ``cairn.clock.Clock.now_ms``: read on every access to a state with TTL (a bound
method costs what a plain function does)."""
Groups = list[dict[Any, Any]]


class _NoKey:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_KEY"


NO_KEY: Any = _NoKey()
_MISSING: Any = object()


class KeyContext:
    """The current key and its key group, shared by a backend and all its state objects."""

    __slots__ = ("key", "key_group")

    def __init__(self) -> None:
        self.key: Any = NO_KEY
        self.key_group = 0


def raise_no_key(state_name: str) -> NoReturn:
    raise StateAccessError(
        f"keyed state accessed outside a keyed context (state {state_name!r}): no current key "
        "is set; keyed state and timers are only available while processing an element or "
        "timer of a keyed stream"
    )


def check_list_element(value: Any) -> None:
    if value is None:
        raise ValueError("You cannot add None to a ListState.")


def list_elements(values: Iterable[Any] | None) -> list[Any]:
    """``values`` as a new list (``None``: empty), checked like ``ListState.add_all`` must."""
    vals = list(values) if values is not None else []
    for v in vals:
        check_list_element(v)
    return vals


def remove_map_entry(table: dict[Any, Any], key: Any, user_key: Any) -> None:
    """``MapState.remove``: drop ``user_key`` from ``key``'s map, and the map once empty."""
    m = table.get(key)
    if m is not None:
        m.pop(user_key, None)
        if not m:
            del table[key]


class ForeignKeyGroup(dict[Any, Any]):
    """Stands for a key group another subtask owns; any access raises ``KeyGroupRangeError``."""

    __slots__ = ("key_group", "owned")

    def __init__(self, key_group: int, owned: str) -> None:
        super().__init__()
        self.key_group, self.owned = key_group, owned

    def _fail(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise KeyGroupRangeError(
            f"the current key belongs to key group {self.key_group}, outside this subtask's "
            f"key groups {self.owned}: the key selector must be deterministic and keyed state "
            "may only be used on the keyed stream it was partitioned by"
        )

    get = __getitem__ = __setitem__ = __delitem__ = __contains__ = _fail
    pop = setdefault = update = _fail


class HeapStateBase:
    """Common fields and the constructor every heap state class (with or without TTL) has;
    subclasses inline ``_current`` on their hottest paths."""

    __slots__ = ("_ctx", "_groups", "name")

    def __init__(
        self, name: str, ctx: KeyContext, groups: Groups, desc: StateDescriptor, clock: NowMs
    ) -> None:
        self.name, self._ctx, self._groups = name, ctx, groups

    def _current(self) -> tuple[dict[Any, Any], Any]:
        """The current key's key-group dict and the key."""
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        return self._groups[ctx.key_group], key

    def clear(self) -> None:
        table, key = self._current()
        table.pop(key, None)


class ReducingBase(HeapStateBase):
    """Binds the descriptor's reduce function, for reducing state with and without TTL.
    Slot-less so that it combines with the TTL base; a concrete class declares ``_reduce``."""

    __slots__ = ()
    _reduce: Callable[[Any, Any], Any]

    def __init__(
        self, name: str, ctx: KeyContext, groups: Groups, desc: StateDescriptor, clock: NowMs
    ) -> None:
        assert isinstance(desc, ReducingStateDescriptor)
        super().__init__(name, ctx, groups, desc, clock)
        self._reduce = desc.reduce


class AggregatingBase(HeapStateBase):
    """Binds the descriptor's ``AggregateFunction``, for aggregating state with and without
    TTL. Slot-less like ``ReducingBase``; a concrete class declares ``_fn``."""

    __slots__ = ()
    _fn: Any

    def __init__(
        self, name: str, ctx: KeyContext, groups: Groups, desc: StateDescriptor, clock: NowMs
    ) -> None:
        assert isinstance(desc, AggregatingStateDescriptor)
        super().__init__(name, ctx, groups, desc, clock)
        self._fn = desc.get_agg_function()


class HeapValueState(HeapStateBase, ValueState[Any]):
    __slots__ = ()

    def value(self) -> Any:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        return self._groups[ctx.key_group].get(key)

    def update(self, value: Any) -> None:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        if value is None:
            self._groups[ctx.key_group].pop(key, None)
        else:
            self._groups[ctx.key_group][key] = value


class HeapListState(HeapStateBase, ListState[Any]):
    __slots__ = ()

    def get(self) -> list[Any]:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        lst = self._groups[ctx.key_group].get(key)
        return list(lst) if lst else []

    def add(self, value: Any) -> None:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        if value is None:
            check_list_element(value)
        table = self._groups[ctx.key_group]
        lst = table.get(key)
        if lst is None:
            table[key] = [value]
        else:
            lst.append(value)

    def add_all(self, values: Iterable[Any] | None) -> None:
        table, key = self._current()
        vals = list_elements(values)
        if vals:
            lst = table.get(key)
            if lst is None:
                table[key] = vals
            else:
                lst.extend(vals)

    def update(self, values: Iterable[Any] | None) -> None:
        table, key = self._current()
        vals = list_elements(values)
        if vals:
            table[key] = vals
        else:
            table.pop(key, None)


class HeapMapState(HeapStateBase, MapState[Any, Any]):
    __slots__ = ()

    def _map(self) -> dict[Any, Any] | None:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        m: dict[Any, Any] | None = self._groups[ctx.key_group].get(key)
        return m

    def get(self, key: Any) -> Any:
        m = self._map()
        return None if m is None else m.get(key)

    def put(self, key: Any, value: Any) -> None:
        ctx = self._ctx
        k = ctx.key
        if k is NO_KEY:
            raise_no_key(self.name)
        table = self._groups[ctx.key_group]
        m = table.get(k)
        if m is None:
            table[k] = {key: value}
        else:
            m[key] = value

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        table, k = self._current()
        if not dict_value:
            return
        m = table.get(k)
        if m is None:
            table[k] = dict(dict_value)
        else:
            m.update(dict_value)

    def remove(self, key: Any) -> None:
        table, k = self._current()
        remove_map_entry(table, k, key)

    def contains(self, key: Any) -> bool:
        m = self._map()
        return m is not None and key in m

    def items(self) -> list[tuple[Any, Any]]:
        m = self._map()
        return list(m.items()) if m else []

    def keys(self) -> list[Any]:
        m = self._map()
        return list(m) if m else []

    def values(self) -> list[Any]:
        m = self._map()
        return list(m.values()) if m else []

    def is_empty(self) -> bool:
        return not self._map()


class HeapReducingState(ReducingBase, ReducingState[Any]):
    __slots__ = ("_reduce",)

    def get(self) -> Any:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        return self._groups[ctx.key_group].get(key)

    def add(self, value: Any) -> None:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        if value is None:
            raise ValueError("You cannot add None to a ReducingState.")
        table = self._groups[ctx.key_group]
        current = table.get(key)
        result = value if current is None else self._reduce(current, value)
        if result is None:
            table.pop(key, None)
        else:
            table[key] = result


class HeapAggregatingState(AggregatingBase, AggregatingState[Any, Any]):
    __slots__ = ("_fn",)

    def get(self) -> Any:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        acc = self._groups[ctx.key_group].get(key, _MISSING)
        return None if acc is _MISSING else self._fn.get_result(acc)

    def add(self, value: Any) -> None:
        ctx = self._ctx
        key = ctx.key
        if key is NO_KEY:
            raise_no_key(self.name)
        table = self._groups[ctx.key_group]
        acc = table.get(key, _MISSING)
        if acc is _MISSING:
            acc = self._fn.create_accumulator()
        table[key] = self._fn.add(value, acc)
