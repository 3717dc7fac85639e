"""Keyed state objects of the RocksDB backend, with the heap backend's semantics.

Invariant: no state object holds user data between calls: every access reads or writes the
current key's entries in the state's column family (``key_prefix`` of the current key), so
Python memory does not grow with the number of keys. Value, reducing and aggregating state
(with and without TTL) *are* the heap classes (``keyed_states``, ``ttl``) working on a
``CurrentKeyTable``, a dict-like view of the current key's one entry (through the state's
bounded ``WriteCache``); list and map state have their own classes here because the heap
classes mutate lists and dicts in place. Prefixes of recent keys are kept in a bounded dict.

>>> import tempfile
>>> from cairn.api.state import ListStateDescriptor
>>> from cairn.state.rocksdb.db import RocksDBMemory, StateDB
>>> db = StateDB.open(tempfile.mkdtemp(), RocksDBMemory(block_cache_bytes=1 << 20))
>>> ctx = RocksKeyContext()
>>> s = RocksListState("l", ctx, db.column_family("s:l"), ListStateDescriptor("l", None), int)
>>> ctx.key, ctx.key_group = "a", 3
>>> s.add(1); s.add_all([2, 3]); s.get()
[1, 2, 3]
>>> db.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cairn.api.state import ListState, MapState, StateDescriptor, ValueState
from cairn.state.key_groups import MAX_PARALLELISM_UPPER_BOUND, KeyGroupRange
from cairn.state.keyed_states import (
    NO_KEY,
    ForeignKeyGroup,
    KeyContext,
    NowMs,
    check_list_element,
    list_elements,
    raise_no_key,
)
from cairn.state.rocksdb.codecs import (
    KG_LEN,
    ValueCodec,
    decode_key,
    decode_list,
    decode_value,
    encode_key,
    encode_list,
    key_prefix,
    list_frame,
    value_codec,
)
from cairn.state.rocksdb.db import Column
from cairn.state.rocksdb.native import NativeGate
from cairn.state.rocksdb.write_cache import WriteCache

__all__ = [
    "CurrentKeyTable",
    "RocksKeyContext",
    "RocksListState",
    "RocksMapState",
    "RocksValueState",
]

_MISSING: Any = object()
_PREFIX_CACHE = 1 << 14  # keys whose RocksDB prefix is kept (~3 MB at most)
# Only where dict equality and ``encode_key`` agree (Decimal(1) == 1 but pickles differently).
_CACHED_KEY_TYPES = frozenset({str, int})


class RocksKeyContext(KeyContext):
    """The current key, its key group, and (computed once per key) its RocksDB prefix; a key
    of a key group outside ``owned`` fails there, as a foreign key group of the heap does."""

    __slots__ = ("_end", "_prefixes", "_start", "last_key", "last_prefix")

    def __init__(self, owned: KeyGroupRange = KeyGroupRange(0, MAX_PARALLELISM_UPPER_BOUND - 1)):
        super().__init__()
        self._start, self._end = owned.start, owned.end
        self._prefixes: dict[Any, bytes] = {}  # bounded: cleared at _PREFIX_CACHE entries
        self.last_key: Any = _MISSING  # never a key, never NO_KEY
        self.last_prefix = b""  # of ``last_key``

    def prefix(self, state_name: str) -> bytes:
        key = self.key
        if key is self.last_key:  # identity: we hold the key, its id is not reused
            return self.last_prefix
        cacheable = type(key) in _CACHED_KEY_TYPES
        prefix = self._prefixes.get(key) if cacheable else None
        if prefix is None:
            if key is NO_KEY:
                raise_no_key(state_name)
            kg = self.key_group
            if not self._start <= kg <= self._end:
                ForeignKeyGroup(kg, f"{self._start}..{self._end}").get(key)
            if type(key) is str:  # key_prefix, inlined for the common case
                kb = key.encode("utf-8", "surrogatepass")
                prefix = _pack_kg_len(kg, len(kb) + 1) + b"\x06" + kb
            else:
                prefix = key_prefix(kg, key)
            if cacheable:
                if len(self._prefixes) >= _PREFIX_CACHE:
                    self._prefixes.clear()
                self._prefixes[key] = prefix
        self.last_prefix = prefix
        self.last_key = key
        return prefix


_pack_kg_len = KG_LEN.pack


class CurrentKeyTable:
    """The part of a key group's ``dict`` the heap value-like state classes use (``get``,
    ``[]=``, ``pop``, ``del``), always on the current key: its one entry in ``cf``."""

    __slots__ = ("_cache", "_codec", "_ctx", "_name")

    def __init__(self, name: str, ctx: RocksKeyContext, cache: WriteCache, codec: ValueCodec):
        self._name, self._ctx, self._cache, self._codec = name, ctx, cache, codec

    def get(self, key: Any, default: Any = None) -> Any:
        raw = self._cache.get(self._ctx.prefix(self._name))
        return default if raw is None else self._codec.decode(raw)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._cache.put(self._ctx.prefix(self._name), self._codec.encode(value))

    def pop(self, key: Any, default: Any = None) -> Any:
        self._cache.put(self._ctx.prefix(self._name), None)
        return default  # callers never use the removed value

    def __delitem__(self, key: Any) -> None:
        self._cache.put(self._ctx.prefix(self._name), None)


class RocksValueState(ValueState[Any]):
    """Value state without TTL, the hot path of most jobs: ``value``/``update`` inlined
    (TTL value state is the heap's ``TtlValueState`` on a ``CurrentKeyTable``)."""

    __slots__ = ("_cache", "_cf_get", "_clean", "_ctx", "_decode", "_encode", "_entries", "name")

    def __init__(self, name: str, ctx: RocksKeyContext, cache: WriteCache, type_info: Any):
        self.name, self._ctx, self._cache = name, ctx, cache
        self._entries = cache.entries
        self._clean = cache.clean
        self._cf_get = cache.column_family.get
        self._encode = value_codec(type_info).encode_plain
        self._decode = decode_value

    def value(self) -> Any:
        ctx = self._ctx
        p = ctx.last_prefix if ctx.key is ctx.last_key else ctx.prefix(self.name)
        raw = self._entries.get(p, _MISSING)
        if raw is _MISSING:
            raw = self._clean.get(p, _MISSING)
            if raw is _MISSING:
                raw = self._cf_get(p)
        return None if raw is None else self._decode(raw)

    def update(self, value: Any) -> None:
        ctx = self._ctx
        p = ctx.last_prefix if ctx.key is ctx.last_key else ctx.prefix(self.name)
        self._cache.put(p, None if value is None else self._encode(value))

    def clear(self) -> None:
        ctx = self._ctx
        p = ctx.last_prefix if ctx.key is ctx.last_key else ctx.prefix(self.name)
        self._cache.put(p, None)


class _RocksState:
    __slots__ = (
        "_cf",
        "_clock",
        "_codec",
        "_ctx",
        "_gate",
        "_on_read",
        "_return_expired",
        "_ttl",
        "name",
    )

    def __init__(
        self,
        name: str,
        ctx: RocksKeyContext,
        cf: Column,
        desc: StateDescriptor,
        clock: NowMs,
        type_info: Any = None,
        gate: NativeGate | None = None,
    ) -> None:
        cfg = desc.ttl_config
        self.name, self._ctx, self._cf, self._clock = name, ctx, cf, clock
        # Every write to ``cf`` settles first: nothing after a barrier reaches RocksDB before
        # the pending native checkpoint (``native``) is taken.
        self._gate = gate or NativeGate()
        self._codec = value_codec(type_info, ttl=cfg is not None)
        self._ttl = cfg.ttl_ms if cfg is not None else None
        self._on_read = cfg is not None and cfg.update_on_read
        self._return_expired = cfg is not None and cfg.return_expired

    def _prefix(self) -> bytes:
        return self._ctx.prefix(self.name)


class RocksListState(_RocksState, ListState[Any]):
    """List state: the current key's elements as frames of one value (``encode_list``); with
    TTL each element carries its own timestamp, as in ``ttl.TtlListState``."""

    __slots__ = ()

    def __init__(
        self,
        name: str,
        ctx: RocksKeyContext,
        cf: Column,
        desc: StateDescriptor,
        clock: NowMs,
        gate: NativeGate | None = None,
    ) -> None:
        elem = getattr(desc, "elem_type_info", None)
        super().__init__(name, ctx, cf, desc, clock, elem, gate)

    def _wrap(self, values: list[Any]) -> list[Any]:
        if self._ttl is None:
            return values
        now = self._clock()
        return [(v, now) for v in values]

    def get(self) -> list[Any]:
        k = self._prefix()
        lst = decode_list(self._codec, self._cf.get(k))
        if self._ttl is None or not lst:
            return lst
        now, ttl = self._clock(), self._ttl
        live = [e for e in lst if e[1] + ttl > now]
        result = [e[0] for e in (lst if self._return_expired else live)]
        self._gate.settle()
        if not live:
            self._cf.delete(k)
        elif self._on_read:
            self._cf.put(k, encode_list(self._codec, [(e[0], now) for e in live]))
        elif len(live) != len(lst):
            self._cf.put(k, encode_list(self._codec, live))
        return result

    def add(self, value: Any) -> None:
        k = self._prefix()
        check_list_element(value)
        frame = list_frame(self._codec, value if self._ttl is None else (value, self._clock()))
        self._gate.settle()
        old = self._cf.get(k)
        self._cf.put(k, frame if old is None else old + frame)

    def add_all(self, values: Iterable[Any] | None) -> None:
        k = self._prefix()
        vals = list_elements(values)
        if vals:
            self._gate.settle()
            old = self._cf.get(k) or b""
            self._cf.put(k, old + encode_list(self._codec, self._wrap(vals)))

    def update(self, values: Iterable[Any] | None) -> None:
        k = self._prefix()
        vals = list_elements(values)
        self._gate.settle()
        if vals:
            self._cf.put(k, encode_list(self._codec, self._wrap(vals)))
        else:
            self._cf.delete(k)

    def clear(self) -> None:
        self._gate.settle()
        self._cf.delete(self._prefix())


class RocksMapState(_RocksState, MapState[Any, Any]):
    """Map state: one RocksDB entry per user key (``prefix + encode_key(user key)``), so
    ``get``/``put`` of one user key never reads the others. Iteration is in the order of the
    serialized user keys (the heap's is insertion order; neither is part of the contract)."""

    __slots__ = ()

    def __init__(
        self,
        name: str,
        ctx: RocksKeyContext,
        cf: Column,
        desc: StateDescriptor,
        clock: NowMs,
        gate: NativeGate | None = None,
    ) -> None:
        value = getattr(desc, "value_type_info", None)
        super().__init__(name, ctx, cf, desc, clock, value, gate)

    def _entries(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self._cf.iter()
        it.seek(prefix)
        while it.valid():
            k = it.key()
            if not k.startswith(prefix):
                return
            yield k, it.value()
            it.next()

    def _entry(self, user_key: Any) -> Any:
        k = self._prefix() + encode_key(user_key)
        raw = self._cf.get(k)
        if raw is None:
            return _MISSING
        if self._ttl is None:
            return self._codec.decode(raw)
        v, ts = self._codec.decode(raw)
        now = self._clock()
        self._gate.settle()
        if ts + self._ttl <= now:
            self._cf.delete(k)
            return v if self._return_expired else _MISSING
        if self._on_read:
            self._cf.put(k, self._codec.encode((v, now)))
        return v

    def _all(self) -> list[tuple[Any, Any]]:
        prefix = self._prefix()
        n = len(prefix)
        codec, cf = self._codec, self._cf
        if self._ttl is None:
            return [(decode_key(k[n:]), codec.decode(v)) for k, v in self._entries(prefix)]
        now, ttl = self._clock(), self._ttl
        self._gate.settle()
        shown: list[tuple[Any, Any]] = []
        for k, raw in list(self._entries(prefix)):
            v, ts = codec.decode(raw)
            if ts + ttl <= now:
                cf.delete(k)
                if self._return_expired:
                    shown.append((decode_key(k[n:]), v))
            else:
                shown.append((decode_key(k[n:]), v))
                if self._on_read:
                    cf.put(k, codec.encode((v, now)))
        return shown

    def get(self, key: Any) -> Any:
        v = self._entry(key)
        return None if v is _MISSING else v

    def contains(self, key: Any) -> bool:
        return self._entry(key) is not _MISSING

    def put(self, key: Any, value: Any) -> None:
        obj = value if self._ttl is None else (value, self._clock())
        self._gate.settle()
        self._cf.put(self._prefix() + encode_key(key), self._codec.encode(obj))

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        prefix = self._prefix()
        if not dict_value:
            return
        now = self._clock() if self._ttl is not None else 0
        self._gate.settle()
        for uk, v in dict_value.items():
            obj = v if self._ttl is None else (v, now)
            self._cf.put(prefix + encode_key(uk), self._codec.encode(obj))

    def remove(self, key: Any) -> None:
        self._gate.settle()
        self._cf.delete(self._prefix() + encode_key(key))

    def items(self) -> list[tuple[Any, Any]]:
        return self._all()

    def keys(self) -> list[Any]:
        return [uk for uk, _ in self._all()]

    def values(self) -> list[Any]:
        return [v for _, v in self._all()]

    def is_empty(self) -> bool:
        if self._ttl is None:
            return next(self._entries(self._prefix()), None) is None
        return not self._all()

    def clear(self) -> None:
        prefix = self._prefix()
        self._gate.settle()
        for k, _ in list(self._entries(prefix)):
            self._cf.delete(k)
