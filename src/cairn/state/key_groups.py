"""Key groups: the shards of keyed state, and Flink's formulas to map them onto subtasks.

Invariant: ``stable_hash`` is a pure function of a key's *value* (identical in every process
and consistent with ``==``: ``1``, ``1.0`` and ``True`` hash alike), so a key lands in the same
key group on every worker, in every run, before and after a restore.

Supported keys: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``Decimal``,
``UUID``, ``date``/``datetime``/``timedelta``, enums, ``tuple``/``frozenset`` of supported keys
(named tuples included), frozen dataclasses of supported fields, and any object defining
``__cairn_key__()`` that returns a supported key (it must agree with the object's ``__eq__``).
Anything else raises ``TypeError``: Python's own ``hash()`` of ``str``/``bytes`` is salted per
process and an arbitrary object's hash is its address, so neither may decide placement.

>>> assign_to_key_group("user-1", 128) == assign_to_key_group("user-1", 128)
True
>>> key_group_range_for_subtask(128, 3, 0), key_group_range_for_subtask(128, 3, 2)
(KeyGroupRange(start=0, end=42), KeyGroupRange(start=86, end=127))
>>> subtask_for_key_group(128, 3, 43)
1
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import itertools
import math
import struct
import threading
import uuid
import weakref
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = [
    "DEFAULT_KEY_GROUP_CACHE_SIZE",
    "MAX_PARALLELISM_UPPER_BOUND",
    "KeyGroupAssigner",
    "KeyGroupRange",
    "assign_to_key_group",
    "check_parallelism",
    "key_group_range_for_subtask",
    "murmur_hash",
    "stable_hash",
    "subtask_for_key_group",
]

MAX_PARALLELISM_UPPER_BOUND = 1 << 15  # Flink's UPPER_BOUND_MAX_PARALLELISM

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


# ------------------------------------------------------------------------------- hashing


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: non-negative scramble of a 32-bit hash code.

    Written with as few Python integer operations as possible (it runs per record when the
    key-group cache misses): a rotation feeding a multiplication needs no mask, because the
    bits it leaves above bit 31 only reach bits that the multiplication's mask drops.
    """
    k = ((code & _M32) * 0xCC9E2D51) & _M32
    k = (((k << 15) | (k >> 17)) * 0x1B873593) & _M32
    h = ((((k << 13) | (k >> 19)) * 5 + 0xE6546B64) & _M32) ^ 4
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    if h < 0x80000000:
        return h
    # Java int semantics: negate negatives, Integer.MIN_VALUE maps to 0.
    return (1 << 32) - h if h != 0x80000000 else 0


def _hash_int(v: int) -> int:
    if -(1 << 63) <= v < (1 << 63):
        u = v & _M64
        return (u ^ (u >> 32)) & _M32  # java.lang.Long.hashCode, so ints match Flink's longs
    return zlib.crc32(v.to_bytes(v.bit_length() // 8 + 1, "little", signed=True))


def _hash_float(v: float) -> int:
    if v.is_integer():
        return _hash_int(int(v))  # 2.0 == 2 must hash alike
    if math.isnan(v):
        v = math.nan  # one canonical NaN bit pattern
    bits: int = struct.unpack("<Q", struct.pack("<d", v))[0]
    return (bits ^ (bits >> 32)) & _M32  # java.lang.Double.hashCode


def _hash_str(v: str) -> int:
    return zlib.crc32(v.encode("utf-8", "surrogatepass"))


def _hash_bytes(v: bytes) -> int:
    return zlib.crc32(v)


def _hash_none(v: None) -> int:
    return 0


def _hash_bool(v: bool) -> int:
    return _hash_int(int(v))  # True == 1


def _hash_tuple(v: tuple[Any, ...]) -> int:
    h = 1
    for e in v:
        h = (31 * h + stable_hash(e)) & _M32  # java.util.List.hashCode
    return h


def _hash_frozenset(v: frozenset[Any]) -> int:
    return sum(stable_hash(e) for e in v) & _M32  # order-independent, like Set.hashCode


def _hash_decimal(v: Decimal) -> int:
    if not v.is_finite():
        return _hash_float(float(v))
    if v == v.to_integral_value():
        return _hash_int(int(v))
    as_float = float(v)
    if Decimal(as_float) == v:
        return _hash_float(as_float)  # Decimal("1.5") == 1.5
    return _hash_str(str(v.normalize()))


def _hash_datetime(v: _dt.datetime) -> int:
    if v.tzinfo is not None and v.utcoffset() is not None:
        # Aware datetimes are equal when they denote the same instant.
        v = v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    seconds = v.hour * 3600 + v.minute * 60 + v.second
    return _hash_tuple(("datetime", v.toordinal(), seconds, v.microsecond))


def _hash_date(v: _dt.date) -> int:
    return _hash_tuple(("date", v.toordinal()))


def _hash_timedelta(v: _dt.timedelta) -> int:
    return _hash_tuple(("timedelta", v.days, v.seconds, v.microseconds))


def _hash_uuid(v: uuid.UUID) -> int:
    return _hash_int(v.int)


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


_EXACT: dict[type, Callable[[Any], int]] = {
    str: _hash_str,
    int: _hash_int,
    tuple: _hash_tuple,
    bytes: _hash_bytes,
    float: _hash_float,
    bool: _hash_bool,
    type(None): _hash_none,
    frozenset: _hash_frozenset,
    Decimal: _hash_decimal,
    _dt.datetime: _hash_datetime,
    _dt.date: _hash_date,
    _dt.timedelta: _hash_timedelta,
    uuid.UUID: _hash_uuid,
}


def stable_hash(key: Any) -> int:
    """A 32-bit hash of ``key`` that is identical across processes and Python runs.

    Raises ``TypeError`` for keys without a stable encoding (see the module docstring).

    >>> stable_hash(("a", 1)) == stable_hash(("a", 1.0))
    True
    """
    fn = _EXACT.get(key.__class__)
    if fn is not None:
        return fn(key)
    return _hash_other(key)


def _hash_other(key: Any) -> int:
    custom = getattr(key, "__cairn_key__", None)
    if custom is not None and not isinstance(key, type):
        return stable_hash(custom())
    # Subclasses compare like their base (IntEnum == int, NamedTuple == tuple), check those
    # bases before the enum/dataclass rules.
    for base in (bool, int, str, float, bytes, tuple, frozenset, Decimal, uuid.UUID):
        if isinstance(key, base):
            return _EXACT[base](key)
    if isinstance(key, _dt.datetime):
        return _hash_datetime(key)
    if isinstance(key, _dt.date):
        return _hash_date(key)
    if isinstance(key, _dt.timedelta):
        return _hash_timedelta(key)
    if isinstance(key, enum.Enum):
        return _hash_tuple((_qualified_name(type(key)), key.value))
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        params = getattr(key, "__dataclass_params__", None)
        if params is not None and params.frozen and params.eq:
            values = tuple(getattr(key, f.name) for f in dataclasses.fields(key) if f.compare)
            return _hash_tuple((_qualified_name(type(key)), *values))
    raise TypeError(
        f"cannot derive a stable (cross-process) hash for a key of type "
        f"{type(key).__module__}.{type(key).__qualname__}: use a str, int, float, bytes, bool, "
        "None, tuple of these or a frozen dataclass as the key, or give the class a "
        "__cairn_key__() method returning one"
    )


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    """The key group of ``key`` (Flink: ``murmurHash(hashCode) % maxParallelism``)."""
    return murmur_hash(stable_hash(key)) % max_parallelism


DEFAULT_KEY_GROUP_CACHE_SIZE = 1 << 20
"""Entries of a ``KeyGroupAssigner`` cache by default (~50 bytes each, plus the keys it keeps
alive): computing a key group in Python costs ~1 µs, a cache hit ~0.1 µs, and a job with a
million keys would otherwise miss on almost every record."""


class _SharedCache:
    """Holds one process-wide cache; alive while an assigner refers to it."""

    __slots__ = ("__weakref__", "entries")

    def __init__(self) -> None:
        self.entries: dict[Any, int] = {}


_SHARED: weakref.WeakValueDictionary[tuple[int, int], _SharedCache] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


class KeyGroupAssigner:
    """``assign_to_key_group`` with a bounded per-key cache for the per-record hot path.

    When the cache is full the older half of its entries is dropped (dicts keep insertion
    order): O(1) amortized, no bookkeeping per hit, and a key set somewhat larger than the
    cache still hits ~3/4 of the cache's share instead of half of it.

    With ``shared`` (the default) all live assigners of a process with the same
    ``max_parallelism`` and ``cache_size`` use one cache: a worker's record writers (which
    partition by key) and keyed state backends then hash each key once, and hold it once.

    >>> KeyGroupAssigner(128).key_group("user-1") == assign_to_key_group("user-1", 128)
    True
    """

    __slots__ = ("_cache_size", "_holder", "cache", "max_parallelism")

    def __init__(
        self,
        max_parallelism: int,
        cache_size: int = DEFAULT_KEY_GROUP_CACHE_SIZE,
        *,
        shared: bool = True,
    ) -> None:
        check_parallelism(max_parallelism, 1)
        self.max_parallelism = max_parallelism
        self._cache_size = max(1, cache_size)
        if shared:
            with _SHARED_LOCK:
                holder = _SHARED.get((max_parallelism, self._cache_size))
                if holder is None:
                    holder = _SHARED[(max_parallelism, self._cache_size)] = _SharedCache()
        else:
            holder = _SharedCache()
        self._holder = holder  # keeps the shared cache alive as long as this assigner
        # Read-only for callers: hot paths may try ``cache.get(key)`` before ``key_group``.
        self.cache: dict[Any, int] = holder.entries

    def key_group(self, key: Any) -> int:
        cache = self.cache
        kg = cache.get(key)
        if kg is None:
            if key.__class__ is str:  # the common case, without the type dispatch
                code = zlib.crc32(key.encode("utf-8", "surrogatepass"))
            else:
                code = stable_hash(key)
            kg = murmur_hash(code) % self.max_parallelism
            if len(cache) >= self._cache_size:
                self._evict_older_half()
            cache[key] = kg
        return kg

    def _evict_older_half(self) -> None:
        cache = self.cache  # mutate in place, never rebind: callers hold this dict
        # list(islice(...)) runs in C without releasing the GIL; another thread sharing the
        # cache may remove a key before we do, hence pop.
        for old in list(itertools.islice(cache, (len(cache) + 1) // 2)):
            cache.pop(old, None)


# ------------------------------------------------------------------------ ranges, formulas


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """Key groups ``start..end`` inclusive; ``end == start - 1`` is the empty range.

    >>> r = KeyGroupRange(3, 5)
    >>> list(r), len(r), 4 in r, 6 in r
    ([3, 4, 5], 3, True, False)
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start - 1:
            raise ValueError(f"invalid key group range {self.start}..{self.end}")

    @classmethod
    def empty(cls) -> KeyGroupRange:
        return cls(0, -1)

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()


def check_parallelism(max_parallelism: int, parallelism: int) -> None:
    """Flink's preconditions: ``1 <= parallelism <= max_parallelism <= 32768``."""
    if not 1 <= max_parallelism <= MAX_PARALLELISM_UPPER_BOUND:
        raise ValueError(
            f"max parallelism must be in [1, {MAX_PARALLELISM_UPPER_BOUND}], got {max_parallelism}"
        )
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(
            f"parallelism must be in [1, max parallelism = {max_parallelism}], got {parallelism}"
        )


def key_group_range_for_subtask(
    max_parallelism: int, parallelism: int, index: int
) -> KeyGroupRange:
    """Key groups owned by subtask ``index`` (Flink's ``computeKeyGroupRangeForOperatorIndex``)."""
    check_parallelism(max_parallelism, parallelism)
    if not 0 <= index < parallelism:
        raise ValueError(f"subtask index {index} out of range for parallelism {parallelism}")
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def subtask_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Subtask owning ``key_group`` (Flink's ``computeOperatorIndexForKeyGroup``)."""
    return key_group * parallelism // max_parallelism
