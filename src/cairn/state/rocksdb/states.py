"""Keyed state objects of the RocksDB backend, with the heap backend's semantics.

Invariant: no state object holds user data between calls: every access reads or writes the
current key's entries in the state's column family (``key_prefix`` of the current key), so
Python memory does not grow with the number of keys. Value, reducing and aggregating state
(with and without TTL) *are* the heap classes (``keyed_states``, ``ttl``) working on a
``CurrentKeyTable``, a dict-like view of the current key's one entry; list and map state have
their own classes here because the heap classes mutate lists and dicts in place.

>>> import tempfile
>>> from cairn.datastream.state import ListStateDescriptor
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

from cairn.datastream.state import ListState, MapState, StateDescriptor
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
    ValueCodec,
    decode_key,
    decode_list,
    encode_key,
    encode_list,
    key_prefix,
    list_frame,
    value_codec,
)
from cairn.state.rocksdb.db import Column

__all__ = ["CurrentKeyTable", "RocksKeyContext", "RocksListState", "RocksMapState"]

_MISSING: Any = object()


class RocksKeyContext(KeyContext):
    """The current key, its key group, and (computed once per key) its RocksDB prefix; a key
    of a key group outside ``owned`` fails there, as a foreign key group of the heap does."""

    __slots__ = ("_owned", "_prefix", "_prefix_of")

    def __init__(self, owned: KeyGroupRange = KeyGroupRange(0, MAX_PARALLELISM_UPPER_BOUND - 1)):
        super().__init__()
        self._owned = owned
        self._prefix_of: Any = _MISSING  # never a key, never NO_KEY
        self._prefix = b""

    def prefix(self, state_name: str) -> bytes:
        key = self.key
        if key is not self._prefix_of:  # identity: we hold the key, its id is not reused
            if key is NO_KEY:
                raise_no_key(state_name)
            if self.key_group not in self._owned:
                ForeignKeyGroup(self.key_group, f"{self._owned.start}..{self._owned.end}").get(key)
            self._prefix = key_prefix(self.key_group, key)
            self._prefix_of = key
        return self._prefix


class CurrentKeyTable:
    """The part of a key group's ``dict`` the heap value-like state classes use (``get``,
    ``[]=``, ``pop``, ``del``), always on the current key: its one entry in ``cf``."""

    __slots__ = ("_cf", "_codec", "_ctx", "_name")

    def __init__(self, name: str, ctx: RocksKeyContext, cf: Column, codec: ValueCodec):
        self._name, self._ctx, self._cf, self._codec = name, ctx, cf, codec

    def get(self, key: Any, default: Any = None) -> Any:
        raw = self._cf.get(self._ctx.prefix(self._name))
        return default if raw is None else self._codec.decode(raw)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._cf.put(self._ctx.prefix(self._name), self._codec.encode(value))

    def pop(self, key: Any, default: Any = None) -> Any:
        self._cf.delete(self._ctx.prefix(self._name))
        return default  # callers never use the removed value

    def __delitem__(self, key: Any) -> None:
        self._cf.delete(self._ctx.prefix(self._name))


class _RocksState:
    __slots__ = ("_cf", "_clock", "_codec", "_ctx", "_on_read", "_return_expired", "_ttl", "name")

    def __init__(
        self,
        name: str,
        ctx: RocksKeyContext,
        cf: Column,
        desc: StateDescriptor,
        clock: NowMs,
        type_info: Any = None,
    ) -> None:
        cfg = desc.ttl_config
        self.name, self._ctx, self._cf, self._clock = name, ctx, cf, clock
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
        self, name: str, ctx: RocksKeyContext, cf: Column, desc: StateDescriptor,
        clock: NowMs,
    ) -> None:
        super().__init__(name, ctx, cf, desc, clock, getattr(desc, "elem_type_info", None))

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
        old = self._cf.get(k)
        self._cf.put(k, frame if old is None else old + frame)

    def add_all(self, values: Iterable[Any] | None) -> None:
        k = self._prefix()
        vals = list_elements(values)
        if vals:
            old = self._cf.get(k) or b""
            self._cf.put(k, old + encode_list(self._codec, self._wrap(vals)))

    def update(self, values: Iterable[Any] | None) -> None:
        k = self._prefix()
        vals = list_elements(values)
        if vals:
            self._cf.put(k, encode_list(self._codec, self._wrap(vals)))
        else:
            self._cf.delete(k)

    def clear(self) -> None:
        self._cf.delete(self._prefix())


class RocksMapState(_RocksState, MapState[Any, Any]):
    """Map state: one RocksDB entry per user key (``prefix + encode_key(user key)``), so
    ``get``/``put`` of one user key never reads the others. Iteration is in the order of the
    serialized user keys (the heap's is insertion order; neither is part of the contract)."""

    __slots__ = ()

    def __init__(
        self, name: str, ctx: RocksKeyContext, cf: Column, desc: StateDescriptor,
        clock: NowMs,
    ) -> None:
        super().__init__(name, ctx, cf, desc, clock, getattr(desc, "value_type_info", None))

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
        self._cf.put(self._prefix() + encode_key(key), self._codec.encode(obj))

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        prefix = self._prefix()
        if not dict_value:
            return
        now = self._clock() if self._ttl is not None else 0
        for uk, v in dict_value.items():
            obj = v if self._ttl is None else (v, now)
            self._cf.put(prefix + encode_key(uk), self._codec.encode(obj))

    def remove(self, key: Any) -> None:
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
        for k, _ in list(self._entries(prefix)):
            self._cf.delete(k)
