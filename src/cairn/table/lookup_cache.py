"""The cache of a lookup join: Flink's ``lookup.cache`` options and a partial cache.

Invariant: pure (the clock is given). A cached key's rows are served until they expire —
``expire_after_write_ms`` after they were looked up, or ``expire_after_access_ms`` after they
were last served — and at most ``max_rows`` keys are kept, the least recently used evicted
first (Flink's ``DefaultLookupCache``). A key that matched nothing is cached as an empty list
only with ``cache_missing_key``. The cache is per subtask and never checkpointed: after a
restore it starts empty, as Flink's does.

>>> options = cache_options({"lookup.cache": "PARTIAL", "lookup.partial-cache.max-rows": "2"})
>>> cache = LookupCache(options)
>>> for key, rows in [((1,), [("a",)]), ((2,), []), ((3,), [("c",)])]:
...     cache.put(key, rows, now_ms=0)
>>> cache.get((1,), now_ms=1) is None, cache.get((3,), now_ms=1)
(True, [('c',)])
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cairn.common.config_values import parse_duration_ms
from cairn.table.errors import ValidationError

__all__ = ["CACHE_KEYS", "LookupCache", "LookupCacheOptions", "cache_options"]

#: The lookup options of Flink's lookup sources (``FactoryUtil``/``LookupOptions``), and the
#: JDBC connector's older names for them.
CACHE_KEYS = frozenset(
    {
        "lookup.cache",
        "lookup.partial-cache.max-rows",
        "lookup.partial-cache.expire-after-write",
        "lookup.partial-cache.expire-after-access",
        "lookup.partial-cache.cache-missing-key",
        "lookup.max-retries",
        "lookup.cache.max-rows",
        "lookup.cache.ttl",
        "lookup.cache.caching-missing-key",
    }
)


@dataclass(frozen=True)
class LookupCacheOptions:
    """``enabled``: ``lookup.cache`` is ``PARTIAL``; ``None`` expiries never expire;
    ``max_retries``: how many times a failed lookup is tried again (``lookup.max-retries``)."""

    enabled: bool = False
    max_rows: int | None = None
    expire_after_write_ms: int | None = None
    expire_after_access_ms: int | None = None
    cache_missing_key: bool = True
    max_retries: int = 3


def _duration(options: Mapping[str, str], key: str) -> int | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        return parse_duration_ms(text)
    except ValueError:
        raise ValidationError(f"Could not parse value '{text}' for key '{key}'.") from None


def _int(options: Mapping[str, str], key: str) -> int | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(f"Could not parse value '{text}' for key '{key}'.") from None
    if value < 0:
        raise ValidationError(f"'{key}' must be >= 0, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    text = options.get(key)
    if text is None:
        return default
    if text.lower() not in ("true", "false"):
        raise ValidationError(f"Could not parse value '{text}' for key '{key}'.")
    return text.lower() == "true"


def cache_options(options: Mapping[str, str]) -> LookupCacheOptions:
    """The cache a table's options ask for. ``lookup.cache`` = ``NONE`` (Flink's default) or
    ``PARTIAL``; the legacy ``lookup.cache.max-rows`` with ``lookup.cache.ttl`` (JDBC's before
    Flink 1.16) turn a partial cache on as they did."""
    kind = options.get("lookup.cache", "").upper()
    if kind not in ("", "NONE", "PARTIAL", "FULL"):
        raise ValidationError(
            f"Could not parse value '{options['lookup.cache']}' for key 'lookup.cache'."
            " Possible values: NONE, PARTIAL, FULL"
        )
    if kind == "FULL":
        raise ValidationError(
            "'lookup.cache' = 'FULL' is not supported by Cairn's lookup sources: use 'PARTIAL'"
        )
    legacy_rows = _int(options, "lookup.cache.max-rows")
    legacy_ttl = _duration(options, "lookup.cache.ttl")
    enabled = kind == "PARTIAL" or (kind == "" and legacy_rows is not None)
    rows = _int(options, "lookup.partial-cache.max-rows")
    write = _duration(options, "lookup.partial-cache.expire-after-write")
    missing = _bool(options, "lookup.partial-cache.cache-missing-key", True)
    if kind == "":
        rows, write = legacy_rows, legacy_ttl
        missing = _bool(options, "lookup.cache.caching-missing-key", True)
    retries = _int(options, "lookup.max-retries")
    return LookupCacheOptions(
        enabled=enabled,
        max_rows=rows,
        expire_after_write_ms=write,
        expire_after_access_ms=_duration(options, "lookup.partial-cache.expire-after-access"),
        cache_missing_key=missing,
        max_retries=3 if retries is None else retries,
    )


class LookupCache:
    """Rows by lookup key, least recently used first; see the module's invariant."""

    def __init__(self, options: LookupCacheOptions) -> None:
        self.options = options
        # key -> (rows, written at, last read at)
        self._entries: OrderedDict[Any, tuple[list[Any], int, int]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Any, now_ms: int) -> list[Any] | None:
        """The cached rows of ``key``, or ``None`` when it must be looked up."""
        if not self.options.enabled:
            return None
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        rows, written, read = entry
        o = self.options
        written_out = o.expire_after_write_ms is not None and (
            now_ms - written >= o.expire_after_write_ms
        )
        unread = o.expire_after_access_ms is not None and now_ms - read >= o.expire_after_access_ms
        if written_out or unread:
            del self._entries[key]
            self.misses += 1
            return None
        self._entries[key] = (rows, written, now_ms)
        self._entries.move_to_end(key)
        self.hits += 1
        return rows

    def put(self, key: Any, rows: list[Any], now_ms: int) -> None:
        """Keep what ``key`` looked up (an empty result only with ``cache_missing_key``)."""
        o = self.options
        if not o.enabled or (not rows and not o.cache_missing_key):
            return
        self._entries[key] = (rows, now_ms, now_ms)
        self._entries.move_to_end(key)
        if o.max_rows is not None:
            while len(self._entries) > o.max_rows:
                self._entries.popitem(last=False)
