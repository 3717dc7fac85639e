"""Heap keyed state with time-to-live (processing time).

Invariant: in a TTL table every user value (every list element, every map value) is stored
as ``(value, last_access_ms)``; a value is expired once ``last_access_ms + ttl <= now``.
Expired values are dropped when touched (returned that one last time only under
``ReturnExpiredIfNotCleanedUp``) and, with ``cleanup_full_snapshot``, left out of snapshots.
States without TTL never pay for any of this: they use ``keyed_states``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cairn.api.state import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    StateDescriptor,
    StateTtlConfig,
    ValueState,
)
from cairn.state.keyed_states import (
    AggregatingBase,
    Groups,
    HeapStateBase,
    KeyContext,
    NowMs,
    ReducingBase,
    check_list_element,
    list_elements,
    remove_map_entry,
)

__all__ = [
    "TtlAggregatingState",
    "TtlListState",
    "TtlMapState",
    "TtlReducingState",
    "TtlValueState",
    "drop_expired",
    "unwrap_ttl_table",
    "wrap_ttl_table",
]

_MISSING: Any = object()


class _TtlState(HeapStateBase):
    __slots__ = ("_clock", "_on_read", "_return_expired", "_ttl")

    def __init__(
        self, name: str, ctx: KeyContext, groups: Groups, desc: StateDescriptor, clock: NowMs
    ) -> None:
        cfg = desc.ttl_config
        assert cfg is not None, "TTL state built from a descriptor without TTL"
        super().__init__(name, ctx, groups, desc, clock)
        self._clock = clock
        self._ttl = cfg.ttl_ms
        self._on_read = cfg.update_on_read
        self._return_expired = cfg.return_expired

    def _read(self, missing: Any = _MISSING) -> Any:
        """The current key's unwrapped value under TTL rules, or ``missing``."""
        table, key = self._current()
        entry = table.get(key)
        if entry is None:
            return missing
        now = self._clock()
        if entry[1] + self._ttl <= now:
            del table[key]
            return entry[0] if self._return_expired else missing
        if self._on_read:
            table[key] = (entry[0], now)
        return entry[0]

    def _live(self, table: dict[Any, Any], key: Any) -> Any:
        """The unexpired value of ``key`` without refreshing it, or ``_MISSING`` (for add)."""
        entry = table.get(key)
        if entry is None or entry[1] + self._ttl <= self._clock():
            return _MISSING
        return entry[0]


class TtlValueState(_TtlState, ValueState[Any]):
    __slots__ = ()

    def value(self) -> Any:
        return self._read(None)

    def update(self, value: Any) -> None:
        table, key = self._current()
        if value is None:
            table.pop(key, None)
        else:
            table[key] = (value, self._clock())


class TtlReducingState(_TtlState, ReducingBase, ReducingState[Any]):
    __slots__ = ("_reduce",)

    def get(self) -> Any:
        return self._read(None)

    def add(self, value: Any) -> None:
        table, key = self._current()
        if value is None:
            raise ValueError("You cannot add None to a ReducingState.")
        current = self._live(table, key)  # an expired value never takes part in the reduction
        result = value if current is _MISSING else self._reduce(current, value)
        if result is None:
            table.pop(key, None)
        else:
            table[key] = (result, self._clock())


class TtlAggregatingState(_TtlState, AggregatingBase, AggregatingState[Any, Any]):
    __slots__ = ("_fn",)

    def get(self) -> Any:
        acc = self._read()
        return None if acc is _MISSING else self._fn.get_result(acc)

    def add(self, value: Any) -> None:
        table, key = self._current()
        acc = self._live(table, key)
        if acc is _MISSING:
            acc = self._fn.create_accumulator()
        table[key] = (self._fn.add(value, acc), self._clock())


class TtlListState(_TtlState, ListState[Any]):
    __slots__ = ()

    def get(self) -> list[Any]:
        table, key = self._current()
        lst = table.get(key)
        if not lst:
            return []
        now = self._clock()
        ttl = self._ttl
        live = [e for e in lst if e[1] + ttl > now]
        shown = lst if self._return_expired else live
        result = [e[0] for e in shown]
        if not live:
            del table[key]
        elif self._on_read:
            table[key] = [(e[0], now) for e in live]
        elif len(live) != len(lst):
            table[key] = live
        return result

    def add(self, value: Any) -> None:
        table, key = self._current()
        check_list_element(value)
        entry = (value, self._clock())
        lst = table.get(key)
        if lst is None:
            table[key] = [entry]
        else:
            lst.append(entry)

    def add_all(self, values: Iterable[Any] | None) -> None:
        table, key = self._current()
        vals = list_elements(values)
        if vals:
            now = self._clock()
            table.setdefault(key, []).extend((v, now) for v in vals)

    def update(self, values: Iterable[Any] | None) -> None:
        table, key = self._current()
        vals = list_elements(values)
        if vals:
            now = self._clock()
            table[key] = [(v, now) for v in vals]
        else:
            table.pop(key, None)


class TtlMapState(_TtlState, MapState[Any, Any]):
    __slots__ = ()

    def _entry(self, user_key: Any) -> Any:
        table, k = self._current()
        m = table.get(k)
        if not m:
            return _MISSING
        entry = m.get(user_key, _MISSING)
        if entry is _MISSING:
            return _MISSING
        now = self._clock()
        if entry[1] + self._ttl <= now:
            del m[user_key]
            if not m:
                del table[k]
            return entry[0] if self._return_expired else _MISSING
        if self._on_read:
            m[user_key] = (entry[0], now)
        return entry[0]

    def _all(self) -> list[tuple[Any, Any]]:
        """Visible ``(user_key, value)`` pairs; expired ones are removed."""
        table, k = self._current()
        m = table.get(k)
        if not m:
            return []
        now = self._clock()
        ttl = self._ttl
        shown: list[tuple[Any, Any]] = []
        expired: list[Any] = []
        for uk, (v, ts) in m.items():
            if ts + ttl <= now:
                expired.append(uk)
                if self._return_expired:
                    shown.append((uk, v))
            else:
                shown.append((uk, v))
                if self._on_read:
                    m[uk] = (v, now)  # replacing a value while iterating is allowed
        for uk in expired:
            del m[uk]
        if not m:
            del table[k]
        return shown

    def get(self, key: Any) -> Any:
        v = self._entry(key)
        return None if v is _MISSING else v

    def contains(self, key: Any) -> bool:
        return self._entry(key) is not _MISSING

    def put(self, key: Any, value: Any) -> None:
        table, k = self._current()
        table.setdefault(k, {})[key] = (value, self._clock())

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        table, k = self._current()
        if dict_value:
            now = self._clock()
            table.setdefault(k, {}).update((uk, (v, now)) for uk, v in dict_value.items())

    def remove(self, key: Any) -> None:
        table, k = self._current()
        remove_map_entry(table, k, key)

    def items(self) -> list[tuple[Any, Any]]:
        return self._all()

    def keys(self) -> list[Any]:
        return [uk for uk, _ in self._all()]

    def values(self) -> list[Any]:
        return [v for _, v in self._all()]

    def is_empty(self) -> bool:
        return not self._all()


# ------------------------------------------------------------------- whole-table helpers


def drop_expired(kind: str, table: Mapping[Any, Any], now: int, ttl_ms: int) -> dict[Any, Any]:
    """A copy of a TTL ``table`` without expired values (used by ``cleanup_full_snapshot``)."""
    out: dict[Any, Any] = {}
    if kind == "list":
        for key, lst in table.items():
            live = [e for e in lst if e[1] + ttl_ms > now]
            if live:
                out[key] = live
    elif kind == "map":
        for key, m in table.items():
            live_map = {uk: e for uk, e in m.items() if e[1] + ttl_ms > now}
            if live_map:
                out[key] = live_map
    else:
        for key, e in table.items():
            if e[1] + ttl_ms > now:
                out[key] = e
    return out


def wrap_ttl_table(kind: str, table: Mapping[Any, Any], now: int) -> dict[Any, Any]:
    """Restored values of a state that now has TTL: their TTL starts at ``now``."""
    if kind == "list":
        return {k: [(e, now) for e in lst] for k, lst in table.items()}
    if kind == "map":
        return {k: {uk: (v, now) for uk, v in m.items()} for k, m in table.items()}
    return {k: (v, now) for k, v in table.items()}


def unwrap_ttl_table(kind: str, table: Mapping[Any, Any]) -> dict[Any, Any]:
    """Restored TTL values of a state that no longer has TTL."""
    if kind == "list":
        return {k: [e[0] for e in lst] for k, lst in table.items()}
    if kind == "map":
        return {k: {uk: e[0] for uk, e in m.items()} for k, m in table.items()}
    return {k: e[0] for k, e in table.items()}


def same_ttl(a: StateTtlConfig | None, b: StateTtlConfig | None) -> bool:
    """Whether two (enabled-or-None) TTL configs give a state the same behaviour."""
    if a is None or b is None:
        return a is b
    return (a.ttl_ms, a.update_on_read, a.return_expired) == (
        b.ttl_ms,
        b.update_on_read,
        b.return_expired,
    )
