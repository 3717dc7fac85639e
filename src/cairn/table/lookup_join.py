"""The lookup join operator: each row of the input joined with the rows a lookup table holds
for its key at that moment (Flink's ``LookupJoinRunner``).

Invariant: stateless apart from its cache — a row is joined once, when it passes, with what
the lookup returns then (a later change of the looked-up table does not revise the result);
the row's kind is kept (a changelog input gives a changelog output); with ``outer`` (``LEFT
JOIN``) a row that matched nothing is emitted padded with NULLs; a key holding a NULL matches
nothing. The cache (``lookup_cache``) is per subtask and not checkpointed; its hits, misses
and size are the ``cache`` metric group's gauges (Flink's ``hitCount``, ``missCount``,
``numCachedRecords``) and ``loadCount`` counts the lookups made.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from cairn.api.functions import FlatMapFunction
from cairn.table.codegen import CompiledCalc
from cairn.table.lookup_cache import LookupCache, LookupCacheOptions
from cairn.table.lookup_source import LookupFunction

__all__ = ["LookupJoinFunction"]


class LookupJoinFunction(FlatMapFunction):
    """``input [LEFT] JOIN table FOR SYSTEM_TIME AS OF input.proctime ON keys [AND cond]``:
    ``keys`` are the input's columns looked up, ``condition`` filters each joined pair."""

    def __init__(
        self,
        lookup: LookupFunction,
        keys: tuple[int, ...],
        right_arity: int,
        outer: bool,
        condition: CompiledCalc | None,
        cache: LookupCacheOptions,
    ) -> None:
        self.lookup = lookup
        self.keys = keys
        self.right_arity = right_arity
        self.outer = outer
        self.condition = condition
        self.cache_options = cache

    def open(self, runtime_context: Any) -> None:
        self.lookup.open()
        self._cache = LookupCache(self.cache_options)
        self._nulls = (None,) * self.right_arity
        self._matches = None if self.condition is None else self.condition.function()
        self._loads = 0
        group = runtime_context.get_metrics_group().add_group("cache")
        group.gauge("hitCount", lambda: self._cache.hits)
        group.gauge("missCount", lambda: self._cache.misses)
        group.gauge("loadCount", lambda: self._loads)
        group.gauge("numCachedRecords", lambda: len(self._cache))

    def close(self) -> None:
        self.lookup.close()

    def _rows(self, key: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if not self.cache_options.enabled:  # lookup.cache NONE: every row asks the table
            self._loads += 1
            return self.lookup.lookup(key)
        now = int(time.monotonic() * 1000)
        rows = self._cache.get(key, now)
        if rows is None:
            rows = self.lookup.lookup(key)
            self._loads += 1
            self._cache.put(key, rows, now)
        return rows

    def flat_map(self, value: tuple[int, tuple[Any, ...]]) -> Iterable[Any]:
        kind, row = value
        key = tuple(row[i] for i in self.keys)
        out = []
        if None not in key:
            for found in self._rows(key):
                joined = row + found
                if self._matches is None or self._matches(joined) is not None:
                    out.append((kind, joined))
        if not out and self.outer:
            out.append((kind, row + self._nulls))
        return out
