"""Which old RocksDB checkpoints a new subtask restores from, and how (Flink's rescaling).

Invariant: ``plan_restore`` is a pure decision over key-group ranges: the old database that
holds most of the new range becomes the new database (its foreign key groups deleted with
``delete_range``), and the owned key groups of every other overlapping old database are
copied into it; every owned key group comes from exactly one old subtask, or the plan is
refused. ``apply_copy`` and ``trim`` carry it out on open databases.

>>> plan = plan_restore(KeyGroupRange(43, 85), [KeyGroupRange(0, 63), KeyGroupRange(64, 127)])
>>> plan.base, plan.copies, plan.trim
(1, ((0, KeyGroupRange(start=43, end=63)),), (KeyGroupRange(start=86, end=127),))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import rocksdict

from cairn.state.errors import StateMigrationError, StateRestoreError
from cairn.state.key_groups import KeyGroupRange
from cairn.state.rocksdb.canonical import META_PREFIX
from cairn.state.rocksdb.codecs import key_group_bytes
from cairn.state.rocksdb.db import TIMERS_CF, StateDB

__all__ = ["RestorePlan", "apply_copy", "merge_meta", "overlap", "plan_restore", "trim"]

_BATCH = 10_000  # entries per WriteBatch when copying key groups between databases


@dataclass(frozen=True)
class RestorePlan:
    """``base``: index of the old database to open as the new one (``None``: none overlaps);
    ``copies``: (old database, key groups to copy from it); ``trim``: key groups of the base
    that the new subtask does not own."""

    base: int | None
    copies: tuple[tuple[int, KeyGroupRange], ...]
    trim: tuple[KeyGroupRange, ...]


def overlap(a: KeyGroupRange, b: KeyGroupRange) -> KeyGroupRange:
    start, end = max(a.start, b.start), min(a.end, b.end)
    return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()


def plan_restore(own: KeyGroupRange, old: Sequence[KeyGroupRange]) -> RestorePlan:
    """Plan the restore of ``own`` from old subtasks' ranges ``old`` (see the module doc)."""
    owner: dict[int, int] = {}
    for i, r in enumerate(old):
        for kg in overlap(own, r):
            if kg in owner:
                raise StateRestoreError(
                    f"key group {kg} is present in two state files: old subtasks "
                    f"{old[owner[kg]].start}..{old[owner[kg]].end} and {r.start}..{r.end} "
                    "(handles from different checkpoints mixed?)"
                )
            owner[kg] = i
    sizes = [len(overlap(own, r)) for r in old]
    if not any(sizes):
        return RestorePlan(None, (), ())
    base = max(range(len(old)), key=lambda i: (sizes[i], -i))
    copies = tuple((i, overlap(own, r)) for i, r in enumerate(old) if i != base and sizes[i])
    b = old[base]
    trim = tuple(
        KeyGroupRange(lo, hi)
        for lo, hi in ((b.start, min(b.end, own.start - 1)), (max(b.start, own.end + 1), b.end))
        if lo <= hi
    )
    return RestorePlan(base, copies, trim)


def _bounds(r: KeyGroupRange) -> tuple[bytes, bytes]:
    return key_group_bytes(r.start), key_group_bytes(r.end + 1)


def trim(db: StateDB, ranges: Sequence[KeyGroupRange]) -> None:
    """Delete the key groups ``ranges`` from every column family of ``db``."""
    for name in [*db.state_column_families(), TIMERS_CF]:
        if not db.has_column_family(name):
            continue
        cf = db.column_family(name)
        for r in ranges:
            cf.delete_range(*_bounds(r))


def apply_copy(source: StateDB, target: StateDB, key_groups: KeyGroupRange) -> int:
    """Copy ``key_groups`` of every column family of ``source`` into ``target``; entries."""
    lo, hi = _bounds(key_groups)
    copied = 0
    for name in [*source.state_column_families(), TIMERS_CF]:
        if not source.has_column_family(name):
            continue
        handle = target.handle(name)
        batch = rocksdict.WriteBatch(raw_mode=True)
        pending = 0
        it = source.column_family(name).iter()
        it.seek(lo)
        while it.valid():
            k = it.key()
            if k >= hi:
                break
            batch.put(k, it.value(), handle)
            pending += 1
            if pending == _BATCH:
                target.db.write(batch, target.write_options)
                copied += pending
                batch, pending = rocksdict.WriteBatch(raw_mode=True), 0
            it.next()
        if pending:
            target.db.write(batch, target.write_options)
            copied += pending
    return copied


def merge_meta(source: StateDB, target: StateDB) -> None:
    """Copy the state registrations (kind, TTL) of an old subtask's database into the new
    one; a state registered with two different kinds is refused."""
    for k, v in source.db.items(from_key=META_PREFIX):
        if not k.startswith(META_PREFIX):
            break
        existing = target.db.get(k)
        if existing is not None and json.loads(existing)["kind"] != json.loads(v)["kind"]:
            raise StateMigrationError(
                f"state {k[len(META_PREFIX) :].decode()!r} has different kinds in the old subtasks"
            )
        target.db.put(k, v)
