"""Per-window state and timers for the window operator, on the keyed state backend.

Invariant: every per-window value lives in a map state of the current key whose map key is the
window's *namespace* (``_cairn_win/<name>``), and every trigger timer is one keyed timer plus
an entry in ``_cairn_win/timers`` mapping ``(event time?, timestamp)`` to the namespaces of
the windows that set it; so window contents, trigger state and timers are ordinary keyed
state: checkpointed, restored and redistributed by key group like any other, on the heap and
the RocksDB backend alike. A keyed timer exists exactly while some window of its key is
listed for it.

A ``TimeWindow``'s namespace is the plain tuple ``(start, end)`` (as Flink stores a window as
two longs, not as an object): hashed, compared and pickled in C, several times faster than
the window object in every lookup and in every checkpoint of the heap and RocksDB backends;
other windows (``GlobalWindow``, ``CountWindow``, custom ones) are their own namespace.
Window objects exist only where user code or triggers see them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cairn.api.runtime_context import KeyedStateStore, RuntimeContext
from cairn.api.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from cairn.datastream.window import TimeWindow

__all__ = [
    "LEGACY_PREFIX",
    "PREFIX",
    "SessionWindows",
    "WindowMap",
    "WindowScope",
    "WindowStateFormatError",
    "WindowTimers",
    "namespace",
    "window_of",
]

PREFIX = "_cairn_win/"
#: Window state of Cairn before namespaces (map keys were ``TimeWindow`` objects).
LEGACY_PREFIX = "_cairn_w/"


class WindowStateFormatError(RuntimeError):
    """A snapshot's window state is in a format this build does not read."""


def namespace(window: Any) -> Any:
    """The map key ``window``'s state is stored under (see the module's invariant).

    >>> namespace(TimeWindow(0, 1000)), window_of((0, 1000))
    ((0, 1000), TimeWindow(start=0, end=1000))
    """
    return (window.start, window.end) if type(window) is TimeWindow else window


def window_of(ns: Any) -> Any:
    """The window whose namespace is ``ns`` (inverse of :func:`namespace`)."""
    return TimeWindow(ns[0], ns[1]) if type(ns) is tuple else ns


class WindowMap:
    """A map state of the current key seen with windows as keys (namespaces underneath);
    ``raw`` is the map state itself, keyed by namespace, for the batch path."""

    __slots__ = ("raw",)

    def __init__(self, raw: MapState[Any, Any]) -> None:
        self.raw = raw

    def get(self, window: Any) -> Any:
        return self.raw.get(namespace(window))

    def put(self, window: Any, value: Any) -> None:
        self.raw.put(namespace(window), value)

    def remove(self, window: Any) -> None:
        self.raw.remove(namespace(window))

    def contains(self, window: Any) -> bool:
        return self.raw.contains(namespace(window))

    def keys(self) -> list[Any]:
        return [window_of(ns) for ns in self.raw.keys()]  # noqa: SIM118 (a MapState)


class SessionWindows(WindowMap):
    """The current key's session windows (merging windows): the map state ``raw`` plus a
    write-through copy of its namespaces in memory, for at most ``max_keys`` keys.

    Every element of a session window reads all sessions of its key, and every element that
    extends a session removes its old map key: on RocksDB that ``keys()`` seeks through one
    tombstone per element before, until a compaction (a window job with 40,000 records ran
    6x slower on RocksDB than on the heap). The copy is read instead: it holds a key's
    namespaces exactly, because all writes to the map state go through here, and it starts
    empty when the operator opens (after any restore); a key not in it is read from the
    state once. The oldest key is dropped from it first.
    """

    __slots__ = ("_copies", "_key", "_max_keys")

    def __init__(
        self, raw: MapState[Any, Any], current_key: Callable[[], Any], max_keys: int = 4096
    ) -> None:
        super().__init__(raw)
        self._key = current_key
        self._copies: dict[Any, set[Any]] = {}
        self._max_keys = max_keys

    def _copy(self) -> set[Any]:
        key = self._key()
        copy = self._copies.get(key)
        if copy is None:
            copy = set(self.raw.keys())
            if len(self._copies) >= self._max_keys:
                del self._copies[next(iter(self._copies))]
            self._copies[key] = copy
        return copy

    def put(self, window: Any, value: Any) -> None:
        ns = namespace(window)
        self.raw.put(ns, value)
        self._copy().add(ns)

    def remove(self, window: Any) -> None:
        ns = namespace(window)
        self.raw.remove(ns)
        self._copy().discard(ns)

    def contains(self, window: Any) -> bool:
        return namespace(window) in self._copy()

    def keys(self) -> list[Any]:
        return [window_of(ns) for ns in self._copy()]

    def namespaces(self) -> set[Any]:
        """The current key's namespaces (read only: the copy itself, not a snapshot)."""
        return self._copy()


class WindowScope:
    """Map states keyed by window, created on first use, for one operator."""

    def __init__(self, runtime_context: RuntimeContext) -> None:
        self._rc = runtime_context
        self._maps: dict[str, MapState[Any, Any]] = {}

    def windows(self, name: str) -> WindowMap:
        """Map state ``name`` with windows as keys."""
        return WindowMap(self.map(name))

    def map(self, name: str) -> MapState[Any, Any]:
        """Map state ``name``, keyed by namespace."""
        state = self._maps.get(name)
        if state is None:
            state = self._rc.get_map_state(MapStateDescriptor(PREFIX + name, None, None))
            self._maps[name] = state
        return state

    def state(self, descriptor: StateDescriptor, window: Any, prefix: str) -> Any:
        """A value, reducing or list state of ``window`` (for triggers and window state)."""
        table = self.map(prefix + descriptor.get_name())
        window = namespace(window)
        if isinstance(descriptor, ReducingStateDescriptor):
            return _WindowReducingState(table, window, descriptor.reduce)
        if isinstance(descriptor, ValueStateDescriptor):
            return _WindowValueState(table, window)
        if isinstance(descriptor, ListStateDescriptor):
            return _WindowListState(table, window)
        if isinstance(descriptor, MapStateDescriptor):
            return _WindowMapState(table, window)
        if isinstance(descriptor, AggregatingStateDescriptor):
            return _WindowAggregatingState(table, window, descriptor.get_agg_function())
        raise TypeError(f"no per-window state for {type(descriptor).__name__}")

    def merge(
        self, descriptor: StateDescriptor, target: Any, sources: Iterable[Any], prefix: str
    ) -> None:
        """Fold the reducing state of ``sources`` into ``target`` (``on_merge``)."""
        if not isinstance(descriptor, ReducingStateDescriptor):
            raise TypeError(f"only reducing state can be merged, got {descriptor!r}")
        table = self.map(prefix + descriptor.get_name())
        target = namespace(target)
        merged = table.get(target)
        for window in map(namespace, sources):
            value = table.get(window)
            if value is None:
                continue
            table.remove(window)
            merged = value if merged is None else descriptor.reduce(merged, value)
        if merged is not None:
            table.put(target, merged)


class _WindowValueState:
    def __init__(self, table: MapState[Any, Any], window: Any) -> None:
        self._table, self._window = table, window

    def value(self) -> Any:
        return self._table.get(self._window)

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._table.put(self._window, value)

    def clear(self) -> None:
        self._table.remove(self._window)


class _WindowReducingState(_WindowValueState):
    def __init__(self, table: MapState[Any, Any], window: Any, reduce: Callable[..., Any]):
        super().__init__(table, window)
        self._reduce = reduce

    def get(self) -> Any:
        return self.value()

    def add(self, value: Any) -> None:
        current = self.value()
        self.update(value if current is None else self._reduce(current, value))


class _WindowListState(_WindowValueState):
    def get(self) -> list[Any]:
        return list(self.value() or [])

    def add(self, value: Any) -> None:
        self.update([*self.get(), value])

    def add_all(self, values: Iterable[Any]) -> None:
        self.update([*self.get(), *values])

    def __iter__(self) -> Any:
        return iter(self.get())


class _WindowAggregatingState(_WindowValueState):
    def __init__(self, table: MapState[Any, Any], window: Any, agg: Any) -> None:
        super().__init__(table, window)
        self._agg = agg

    def get(self) -> Any:
        acc = self.value()
        return None if acc is None else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        acc = self.value()
        self.update(self._agg.add(value, self._agg.create_accumulator() if acc is None else acc))


class _WindowMapState(_WindowValueState):
    """A map per window, stored as one dict value (replaced, never changed in place)."""

    def _map(self) -> dict[Any, Any]:
        return dict(self.value() or {})

    def get(self, key: Any) -> Any:
        return (self.value() or {}).get(key)

    def put(self, key: Any, value: Any) -> None:
        self.update({**self._map(), key: value})

    def put_all(self, dict_value: Any) -> None:
        self.update({**self._map(), **dict(dict_value)})

    def remove(self, key: Any) -> None:
        m = self._map()
        m.pop(key, None)
        self.update(m or None)

    def contains(self, key: Any) -> bool:
        return key in (self.value() or {})

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._map().items())

    def keys(self) -> Iterable[Any]:
        return list(self._map())

    def values(self) -> Iterable[Any]:
        return list(self._map().values())

    def is_empty(self) -> bool:
        return not self.value()


class WindowStateStore(KeyedStateStore):
    """``ProcessWindowFunction.Context.window_state()``: state of the key and one window."""

    def __init__(self, scope: WindowScope, window: Any) -> None:
        self._scope, self._window = scope, window

    def _get(self, descriptor: StateDescriptor) -> Any:
        return self._scope.state(descriptor, self._window, "window-state/")

    def get_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)


class WindowTimers:
    """Trigger timers per window over the keyed timer service of the current key; windows
    are given as windows or as namespaces, ``pop`` returns windows."""

    def __init__(self, scope: WindowScope) -> None:
        self._table = scope.map("timers")

    def register(self, timer_service: Any, event_time: bool, ts: int, window: Any) -> None:
        window = namespace(window)
        entry = (event_time, ts)
        windows = self._table.get(entry)
        if windows is None:
            self._table.put(entry, (window,))
        elif window not in windows:
            self._table.put(entry, (*windows, window))
            return
        else:
            return
        if event_time:
            timer_service.register_event_time_timer(ts)
        else:
            timer_service.register_processing_time_timer(ts)

    def delete(self, timer_service: Any, event_time: bool, ts: int, window: Any) -> None:
        window = namespace(window)
        entry = (event_time, ts)
        windows = self._table.get(entry)
        if windows is None or window not in windows:
            return
        rest = tuple(w for w in windows if w != window)
        if rest:
            self._table.put(entry, rest)
            return
        self._table.remove(entry)
        if event_time:
            timer_service.delete_event_time_timer(ts)
        else:
            timer_service.delete_processing_time_timer(ts)

    def pop(self, event_time: bool, ts: int) -> tuple[Any, ...]:
        """The windows of a keyed timer that fired (it is gone from the backend)."""
        return tuple(map(window_of, self.pop_namespaces(event_time, ts)))

    def pop_namespaces(self, event_time: bool, ts: int) -> tuple[Any, ...]:
        """``pop`` as namespaces."""
        entry = (event_time, ts)
        windows = self._table.get(entry)
        if windows is None:
            return ()
        self._table.remove(entry)
        return tuple(windows)
