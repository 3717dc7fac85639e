"""Byte layouts of the RocksDB backend: keys, values, TTL timestamps, list frames, timers.

Invariant: a state entry's RocksDB key is ``key group (2 bytes, big-endian)`` + ``length of
the serialized key (4 bytes)`` + ``serialized key`` (+ ``serialized user key`` for map state),
so a key-group range is one contiguous byte range and one key's map entries share a prefix.
Keys serialize deterministically (the same key gives the same bytes in every process:
``encode_key`` never depends on ``hash()``); values carry a one-byte tag, so any codec
decodes what any other wrote and a type hint never changes what a state returns.

>>> prefix = key_prefix(5, "user-1")
>>> prefix[:2], decode_key(prefix[6:])
(b'\\x00\\x05', 'user-1')
>>> codec = value_codec(None)
>>> codec.decode(codec.encode({"n": 1})), value_codec_for_hint("Integer").encode(7)
({'n': 1}, b'\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x07')
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cairn.state.snapshot_format import dumps

__all__ = [
    "KEY_GROUP_BYTES",
    "KG_LEN",
    "TIMER_DOMAINS",
    "ValueCodec",
    "decode_key",
    "decode_list",
    "decode_value",
    "drop_expired_value",
    "encode_key",
    "encode_list",
    "key_group_bytes",
    "key_prefix",
    "list_frame",
    "retime",
    "split_state_key",
    "timer_key",
    "timer_parts",
    "value_codec",
    "value_codec_for_hint",
]

KEY_GROUP_BYTES = 2
_KG = struct.Struct(">H")
KG_LEN = struct.Struct(">HI")  # key group, length of the serialized key
_LEN = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
TS_BYTES = _I64.size

# ----------------------------------------------------------------------------------- keys

_NONE, _FALSE, _TRUE, _INT, _FLOAT, _STR, _BYTES, _TUPLE, _FROZENSET, _PICKLE = range(1, 11)


def encode_key(key: Any) -> bytes:
    """Deterministic bytes of a key (or map user key); ``decode_key`` inverts it.

    ``None``, ``int``, ``float``, ``str``, ``bytes``, ``tuple`` and ``frozenset`` have their
    own layout (keys equal as numbers are one key, as in a dict: ``True``, ``1.0`` and ``1``
    encode, and decode, as ``1``) (a frozenset's elements sorted by their bytes, so iteration order,
    which depends on per-process string hashing, does not matter); other keys (``Decimal``,
    ``UUID``, dates, enums, frozen dataclasses, named tuples) are pickled, which is
    deterministic for values built from these.
    """
    t = type(key)
    if t is float and key.is_integer():
        key, t = int(key), int  # 1.0 == 1: one key, as in a dict (and in its key group)
    elif t is bool:
        key, t = int(key), int  # True == 1
    if t is str:
        text: str = key
        return b"\x06" + text.encode("utf-8", "surrogatepass")
    if t is int:
        n: int = key
        return b"\x04" + n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True)
    if key is None:
        return b"\x01"
    if t is bool:
        return b"\x03" if key else b"\x02"
    if t is float:
        return b"\x05" + _F64.pack(key)
    if t is bytes:
        raw: bytes = key
        return b"\x07" + raw
    if t is tuple:
        return b"\x08" + b"".join(_framed(encode_key(e)) for e in key)
    if t is frozenset:
        return b"\x09" + b"".join(_framed(b) for b in sorted(encode_key(e) for e in key))
    return b"\x0a" + pickle.dumps(key, protocol=4)


def decode_key(data: bytes) -> Any:
    tag = data[0]
    if tag == _STR:
        return data[1:].decode("utf-8", "surrogatepass")
    if tag == _INT:
        return int.from_bytes(data[1:], "big", signed=True)
    if tag == _NONE:
        return None
    if tag in (_FALSE, _TRUE):
        return tag == _TRUE
    if tag == _FLOAT:
        return _F64.unpack_from(data, 1)[0]
    if tag == _BYTES:
        return bytes(data[1:])
    if tag == _TUPLE:
        return tuple(decode_key(e) for e in _frames(data, 1))
    if tag == _FROZENSET:
        return frozenset(decode_key(e) for e in _frames(data, 1))
    if tag == _PICKLE:
        return pickle.loads(data[1:])
    raise ValueError(f"unknown key tag {tag}")


def _framed(b: bytes) -> bytes:
    return _LEN.pack(len(b)) + b


def _frames(data: bytes, pos: int) -> Iterator[bytes]:
    end = len(data)
    while pos < end:
        (n,) = _LEN.unpack_from(data, pos)
        pos += 4
        yield data[pos : pos + n]
        pos += n


def key_group_bytes(key_group: int) -> bytes:
    """The first bytes of every entry of ``key_group`` (``key_group + 1``: its end bound)."""
    return _KG.pack(key_group)


def key_prefix(key_group: int, key: Any) -> bytes:
    """The RocksDB key of ``key``'s value (and the prefix of its map entries)."""
    kb = encode_key(key)
    return KG_LEN.pack(key_group, len(kb)) + kb


def split_state_key(raw: bytes) -> tuple[int, bytes, bytes]:
    """``(key group, serialized key, rest)`` of a RocksDB key (rest: a map's user key)."""
    kg, n = KG_LEN.unpack_from(raw, 0)
    start = KG_LEN.size
    return kg, raw[start : start + n], raw[start + n :]


# --------------------------------------------------------------------------------- values

_V_PICKLE, _V_INT, _V_FLOAT, _V_STR = 0, 1, 2, 3
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _pickle_encode(v: Any) -> bytes:
    return b"\x00" + dumps(v)


def _int_encode(v: Any) -> bytes:
    if type(v) is int and _INT64_MIN <= v <= _INT64_MAX:
        return b"\x01" + _I64.pack(v)
    return b"\x00" + dumps(v)


def _float_encode(v: Any) -> bytes:
    if type(v) is float:
        return b"\x02" + _F64.pack(v)
    return b"\x00" + dumps(v)


def _str_encode(v: Any) -> bytes:
    if type(v) is str:
        return b"\x03" + v.encode("utf-8", "surrogatepass")
    return b"\x00" + dumps(v)


def decode_value(data: bytes, pos: int = 0) -> Any:
    tag = data[pos]
    if tag == _V_INT:
        return _I64.unpack_from(data, pos + 1)[0]
    if tag == _V_PICKLE:
        return pickle.loads(memoryview(data)[pos + 1 :])
    if tag == _V_FLOAT:
        return _F64.unpack_from(data, pos + 1)[0]
    if tag == _V_STR:
        return bytes(data[pos + 1 :]).decode("utf-8", "surrogatepass")
    raise ValueError(f"unknown value tag {tag}")


_BY_HINT: dict[str, Callable[[Any], bytes]] = {
    "Integer": _int_encode,
    "Long": _int_encode,
    "Short": _int_encode,
    "Byte": _int_encode,
    "BigInteger": _int_encode,
    "Float": _float_encode,
    "Double": _float_encode,
    "String": _str_encode,
}


@dataclass(frozen=True)
class ValueCodec:
    """Encodes one state's values; with ``ttl`` a value is ``(value, last_access_ms)`` and
    its bytes start with the timestamp (8 bytes), as the heap's TTL tables hold it."""

    encode_plain: Callable[[Any], bytes]
    ttl: bool = False

    def encode(self, obj: Any) -> bytes:
        if self.ttl:
            return _I64.pack(obj[1]) + self.encode_plain(obj[0])
        return self.encode_plain(obj)

    def decode(self, data: bytes) -> Any:
        if self.ttl:
            return (decode_value(data, TS_BYTES), _I64.unpack_from(data, 0)[0])
        return decode_value(data)

    def with_ttl(self, ttl: bool) -> ValueCodec:
        return ValueCodec(self.encode_plain, ttl)


def value_codec_for_hint(name: str | None, ttl: bool = False) -> ValueCodec:
    """Fixed-width ``struct`` layouts for the numeric and string type hints, pickle else."""
    return ValueCodec(_BY_HINT.get(name or "", _pickle_encode), ttl)


def value_codec(type_info: Any, ttl: bool = False) -> ValueCodec:
    """The codec a descriptor's type information calls for (``Types.INT()`` etc.)."""
    return value_codec_for_hint(getattr(type_info, "name", None), ttl)


# ---------------------------------------------------------------------------------- lists


def encode_list(codec: ValueCodec, elements: list[Any]) -> bytes:
    """A list as length-prefixed frames; appending is concatenating (no decoding)."""
    return b"".join(_framed(codec.encode(e)) for e in elements)


def decode_list(codec: ValueCodec, data: bytes | None) -> list[Any]:
    if not data:
        return []
    return [codec.decode(f) for f in _frames(data, 0)]


def list_frame(codec: ValueCodec, element: Any) -> bytes:
    return _framed(codec.encode(element))


def drop_expired_value(kind: str, raw: bytes, now: int, ttl_ms: int) -> bytes | None:
    """A stored TTL value without its expired parts (list: elements), ``None`` if all are."""
    if kind == "list":
        live = [f for f in _frames(raw, 0) if _I64.unpack_from(f, 0)[0] + ttl_ms > now]
        return b"".join(_framed(f) for f in live) or None
    return raw if _I64.unpack_from(raw, 0)[0] + ttl_ms > now else None


def retime(kind: str, raw: bytes, to_ttl: bool, now: int) -> bytes:
    """A stored value (of list state: every element) with a TTL timestamp ``now`` added, or
    its timestamp dropped: how a restored state changes when its TTL setting did."""
    stamp = _I64.pack(now)

    def one(b: bytes) -> bytes:
        return stamp + b if to_ttl else b[TS_BYTES:]

    if kind == "list":
        return b"".join(_framed(one(f)) for f in _frames(raw, 0))
    return one(raw)


# --------------------------------------------------------------------------------- timers

TIMER_DOMAINS = {"processing": b"p", "event": b"e"}
_DOMAIN_NAMES = {v[0]: k for k, v in TIMER_DOMAINS.items()}


def timer_key(key_group: int, domain: str, timestamp: int, key: Any) -> bytes:
    return _KG.pack(key_group) + TIMER_DOMAINS[domain] + _I64.pack(timestamp) + encode_key(key)


def timer_parts(raw: bytes) -> tuple[int, str, int, Any]:
    """``(key group, domain, timestamp, key)`` of a timer's RocksDB key."""
    (kg,) = _KG.unpack_from(raw, 0)
    domain = _DOMAIN_NAMES[raw[2]]
    (ts,) = _I64.unpack_from(raw, 3)
    return kg, domain, ts, decode_key(raw[3 + TS_BYTES :])
