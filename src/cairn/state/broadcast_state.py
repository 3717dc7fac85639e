"""Broadcast state: a dict per operator subtask, the same on every subtask (Flink's
``BroadcastState``), written only by the broadcast side of a broadcast-connected operator.

Invariant: the non-broadcast side sees it through ``ReadOnlyBroadcastState`` (writes raise);
a checkpoint stores each subtask's copy, and a restored subtask ``i`` of ``n`` gets old
subtask ``i mod old_n``'s copy whatever the parallelism (Flink's broadcast redistribution), so
every subtask starts from the same map when the function updated it alike on every subtask.

>>> s = BroadcastMapState("rules")
>>> s.put("max", 3)
>>> ro = ReadOnlyBroadcastState(s)
>>> ro.get("max"), sorted(ro.keys()), ro.contains("min")
(3, ['max'], False)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["BROADCAST", "BroadcastMapState", "ReadOnlyBroadcastState"]

BROADCAST = "broadcast"  # the redistribution mode of broadcast state in operator state


class BroadcastMapState:
    """``BroadcastState``: ``get``/``put``/``put_all``/``remove``/``contains``/``items``/
    ``keys``/``values``/``is_empty``/``clear``; iteration methods return snapshots."""

    __slots__ = ("_map", "mode", "name")

    def __init__(self, name: str, entries: Iterable[tuple[Any, Any]] = ()) -> None:
        self.name = name
        self.mode = BROADCAST
        self._map: dict[Any, Any] = dict(entries)

    def get(self, key: Any) -> Any:
        return self._map.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._map[key] = value

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        self._map.update(dict_value)

    def remove(self, key: Any) -> None:
        self._map.pop(key, None)

    def contains(self, key: Any) -> bool:
        return key in self._map

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._map.items())

    def keys(self) -> list[Any]:
        return list(self._map)

    def values(self) -> list[Any]:
        return list(self._map.values())

    def is_empty(self) -> bool:
        return not self._map

    def clear(self) -> None:
        self._map.clear()

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def __contains__(self, key: Any) -> bool:
        return key in self._map

    def __getitem__(self, key: Any) -> Any:
        return self._map[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._map[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._map[key]


class ReadOnlyBroadcastState:
    """What the non-broadcast side sees: reads only (Flink's ``ReadOnlyBroadcastState``)."""

    __slots__ = ("_state",)

    def __init__(self, state: BroadcastMapState) -> None:
        self._state = state

    def get(self, key: Any) -> Any:
        return self._state.get(key)

    def contains(self, key: Any) -> bool:
        return self._state.contains(key)

    def items(self) -> list[tuple[Any, Any]]:
        return self._state.items()

    def keys(self) -> list[Any]:
        return self._state.keys()

    def values(self) -> list[Any]:
        return self._state.values()

    def is_empty(self) -> bool:
        return self._state.is_empty()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._state.keys())

    def __contains__(self, key: Any) -> bool:
        return self._state.contains(key)

    def __getitem__(self, key: Any) -> Any:
        return self._state[key]

    def __getattr__(self, name: str) -> Any:
        if name in ("put", "put_all", "remove", "clear", "__setitem__", "__delitem__"):
            raise RuntimeError(
                f"broadcast state {self._state.name!r} is read-only here: only "
                "process_broadcast_element may change it"
            )
        raise AttributeError(name)
