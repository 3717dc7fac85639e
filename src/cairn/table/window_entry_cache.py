"""The batch path of the window aggregates: generated code over a whole stamped batch, its
window (or slice) entries held in a cache that goes back into keyed map state in one pass.

Invariant: between two ``write_back`` calls, the entries the generated function added to
live only in ``cache`` (``(key, map key) -> entry``); ``write_back`` puts each into the map
state under its key and empties the cache. The keyed operator calls it (``keyed_flush``)
before timers fire, before a snapshot and before rows go one by one, so what fires and what
is saved is what the row path would have stored.

>>> stored, current = {}, [None]
>>> class Map:  # a keyed map state: the key is ``current[0]``
...     def get(self, k): return stored.get((current[0], k))
...     def put(self, k, v): stored[(current[0], k)] = v
>>> class Ctx:
...     def timer_service(self): return self
...     def register_event_time_timer(self, t): pass
...     def current_watermark(self): return 0
>>> def code(records, set_key, get, register, watermark, cache):  # counts rows per slot
...     for key, slot in records:
...         cache[(key, slot)] = (cache.get((key, slot)) or 0) + 1
>>> batch = CachedWindowBatch(code, Map())
>>> batch.run([("a", 1), ("a", 1)], [5, 6], None, lambda k: current.__setitem__(0, k), Ctx())
([], [])
>>> dict(stored), batch.write_back(), stored
({}, None, {('a', 1): 2})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CachedWindowBatch"]


class CachedWindowBatch:
    """``function(records, set_key, get, register_timer, watermark, cache)`` (generated
    window or slice code) run over whole batches against ``state`` (a keyed map state)."""

    __slots__ = ("_cache", "_function", "_set_key", "_state")

    def __init__(self, function: Callable[..., None], state: Any) -> None:
        self._function = function
        self._state = state
        self._cache: dict[tuple[Any, Any], Any] = {}
        self._set_key: Any = None

    def run(
        self,
        records: list[Any],
        timestamps: list[int | None],
        key_selector: Any,
        set_key: Any,
        ctx: Any,
    ) -> tuple[list[Any], list[int | None]]:
        """The keyed operator's batch path: nothing is emitted until a window fires."""
        timers = ctx.timer_service()
        self._set_key = set_key
        self._function(
            records,
            set_key,
            self._state.get,
            timers.register_event_time_timer,
            timers.current_watermark(),
            self._cache,
        )
        return [], []

    def write_back(self) -> None:
        """Put the cached entries into the map state and empty the cache."""
        cache = self._cache
        if not cache:
            return
        set_key, put = self._set_key, self._state.put
        for (key, slot), entry in cache.items():
            set_key(key)
            put(slot, entry)
        cache.clear()
