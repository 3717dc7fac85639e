"""RocksDB state in the canonical snapshot format: the heap backend's, which savepoints use.

Invariant: ``export_sections`` of a database yields, for each non-empty key group of a range
and in key-group order, exactly the section the heap backend would write for the same state
and timers (``{"version", "states": {name: (kind, ttl, {key: value})}, "timers"}``, values
as the heap holds them: TTL values as ``(value, last_access_ms)``, lists as lists, maps as
dicts); ``import_section`` writes such a section into a database so that the backend's state
objects read back the same values. So a savepoint of either backend restores into the other,
at any parallelism (a restore imports only the sections of the key groups it owns), and the
state processor reads both.

>>> import tempfile
>>> from cairn.state.key_groups import KeyGroupRange
>>> from cairn.state.rocksdb.db import RocksDBMemory, StateDB
>>> db = StateDB.open(tempfile.mkdtemp() + "/db", RocksDBMemory(block_cache_bytes=1 << 20))
>>> section = {"version": 1, "states": {"n": ("map", False, {"a": {"x": 1}})}, "timers": {}}
>>> import_section(db, 3, section, "savepoint", {})
>>> [(kg, s["states"]) for kg, s in export_sections(db, KeyGroupRange(0, 9), now_ms=0)]
[(3, {'n': ('map', False, {'a': {'x': 1}})})]
>>> db.close()
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import rocksdict

from cairn.state.errors import StateMigrationError, StateRestoreError
from cairn.state.key_groups import KeyGroupRange
from cairn.state.rocksdb.codecs import (
    KEY_GROUP_BYTES,
    ValueCodec,
    decode_key,
    decode_list,
    decode_value,
    drop_expired_value,
    encode_key,
    encode_list,
    key_group_bytes,
    key_prefix,
    split_state_key,
    timer_key,
    timer_parts,
    value_codec,
    value_codec_for_hint,
)
from cairn.state.rocksdb.db import STATE_CF_PREFIX, TIMERS_CF, StateDB
from cairn.state.snapshot_format import FORMAT_VERSION, thaw_table

__all__ = ["META_PREFIX", "StateMeta", "export_sections", "import_section", "read_meta"]

META_PREFIX = b"state:"  # default column family: b"state:<name>" -> {"kind": ..., "ttl": ...}
_BATCH = 10_000
_VALUE_KEY_START = KEY_GROUP_BYTES + 4  # a value's key: key group, key length, key


@dataclass(frozen=True)
class StateMeta:
    """What the database records about one state (``cleanup_ttl_ms``: drop values expired
    by then from full snapshots, ``StateTtlConfig.cleanup_full_snapshot``)."""

    kind: str
    ttl: bool
    cleanup_ttl_ms: int | None = None


def read_meta(db: StateDB) -> dict[str, StateMeta]:
    """Every state the database records, by name."""
    out: dict[str, StateMeta] = {}
    for k, v in db.db.items(from_key=META_PREFIX):
        if not k.startswith(META_PREFIX):
            break
        meta = json.loads(v)
        cleanup = meta.get("cleanup_ttl_ms")
        out[k[len(META_PREFIX) :].decode()] = StateMeta(
            str(meta["kind"]), bool(meta["ttl"]), None if cleanup is None else int(cleanup)
        )
    return out


def export_sections(
    db: StateDB,
    key_groups: KeyGroupRange,
    now_ms: int,
    names: Collection[str] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The heap-format section of each non-empty key group of ``key_groups``, in order;
    with ``names``, of those states only (and no timers: a reader of one state)."""
    metas = {
        name: meta
        for name, meta in read_meta(db).items()
        if db.has_column_family(STATE_CF_PREFIX + name) and (names is None or name in names)
    }
    for kg in key_groups:
        lo, hi = key_group_bytes(kg), key_group_bytes(kg + 1)
        states: dict[str, tuple[str, bool, dict[Any, Any]]] = {}
        for name, meta in metas.items():
            table = _export_table(db, name, meta, lo, hi, now_ms)
            if table:
                states[name] = (meta.kind, meta.ttl, table)
        timers: dict[str, list[tuple[int, Any]]] = {}
        if names is None and db.has_column_family(TIMERS_CF):
            for k, _ in _range(db.column_family(TIMERS_CF), lo, hi):
                _, domain, ts, key = timer_parts(k)
                timers.setdefault(domain, []).append((ts, key))
        if states or timers:
            yield kg, {"version": FORMAT_VERSION, "states": states, "timers": timers}


def _range(cf: Any, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
    for k, v in cf.items(from_key=lo):
        if k >= hi:
            return
        yield k, v


def _export_table(
    db: StateDB, name: str, meta: StateMeta, lo: bytes, hi: bytes, now_ms: int
) -> dict[Any, Any]:
    codec = value_codec(None, meta.ttl)
    expire = meta.cleanup_ttl_ms if meta.ttl else None
    table: dict[Any, Any] = {}
    cf = db.column_family(STATE_CF_PREFIX + name)
    if meta.kind not in ("map", "list") and not meta.ttl:  # the common case, inlined
        for k, raw in _range(cf, lo, hi):
            table[decode_key(k[_VALUE_KEY_START:])] = decode_value(raw)
        return table
    last_kb, last_key = b"", None
    for k, raw in _range(cf, lo, hi):
        if expire is not None:
            live = drop_expired_value(
                "list" if meta.kind == "list" else "value", raw, now_ms, expire
            )
            if live is None:
                continue
            raw = live
        _, kb, rest = split_state_key(k)
        if kb != last_kb:
            last_kb, last_key = kb, decode_key(kb)
        if meta.kind == "map":
            table.setdefault(last_key, {})[decode_key(rest)] = codec.decode(raw)
        elif meta.kind == "list":
            table[last_key] = decode_list(codec, raw)
        else:
            table[last_key] = codec.decode(raw)
    return table


def import_section(
    db: StateDB, kg: int, section: Mapping[str, Any], path: str, known: dict[str, StateMeta]
) -> None:
    """Write one heap-format key-group section into ``db`` (its states' metadata too).

    ``known``: the states imported so far by this restore (updated); ``path`` names the
    state file in errors. Every state object decodes values by their tag, whatever codec
    wrote them: ints are written in the fixed-width layout (``Types.LONG()``'s), any other
    value pickled.
    """
    if section.get("version") != FORMAT_VERSION:
        raise StateRestoreError(
            f"state file {path!r}, key group {kg}: unsupported format version "
            f"{section.get('version')!r}"
        )
    for name, (kind, ttl, payload) in section["states"].items():
        meta = known.get(name)
        if meta is not None and meta.kind != kind:
            raise StateMigrationError(
                f"state {name!r} is {meta.kind} state in one old subtask but {kind} state "
                f"in {path!r}"
            )
        if meta is None or meta.ttl != ttl:
            record = {"kind": kind, "ttl": bool(ttl), "cleanup_ttl_ms": None}
            db.db.put(META_PREFIX + name.encode(), json.dumps(record).encode())
            known[name] = StateMeta(kind, bool(ttl))
        codec = value_codec_for_hint("Long", bool(ttl))
        _import_table(db, name, kind, codec, kg, thaw_table(payload))
    timers = section.get("timers") or {}
    if timers:
        cf = db.column_family(TIMERS_CF)
        for domain, entries in timers.items():
            for ts, key in entries:
                cf.put(timer_key(kg, domain, ts, key), b"")


def _import_table(
    db: StateDB, name: str, kind: str, codec: ValueCodec, kg: int, table: Mapping[Any, Any]
) -> None:
    handle = db.handle(STATE_CF_PREFIX + name)
    batch = rocksdict.WriteBatch(raw_mode=True)
    pending = 0
    for key, value in table.items():
        prefix = key_prefix(kg, key)
        if kind == "map":
            for uk, v in value.items():
                batch.put(prefix + encode_key(uk), codec.encode(v), handle)
                pending += 1
        elif kind == "list":
            if value:
                batch.put(prefix, encode_list(codec, list(value)), handle)
                pending += 1
        else:
            batch.put(prefix, codec.encode(value), handle)
            pending += 1
        if pending >= _BATCH:
            db.db.write(batch, db.write_options)
            batch, pending = rocksdict.WriteBatch(raw_mode=True), 0
    if pending:
        db.db.write(batch, db.write_options)
