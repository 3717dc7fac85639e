"""Record batches of a hash-partitioned edge that carry each record's key group.

Invariant: a ``KeyGroupedBatch`` is a list of records whose ``key_groups`` holds, per record
and in the same order, the key group the producer's key selector and the edge's max
parallelism gave it (the one its channel was chosen by); neither list changes after the batch
was handed on. A consumer keyed by the same selector takes a record's key group from it
instead of hashing the key again: with a million keys the key-group cache no longer fits the
CPU caches and a lookup costs ~0.5 us per record, as much as hashing. Producers send them only
to a head operator that declares ``takes_key_groups`` (``RecordWriter(carry_key_groups=...)``);
to anything else one is a plain list of records (``as_plain``). Batches with timestamps carry
them as a ``StampedBatch``'s ``key_groups``. The class's import path is part of unaligned
checkpoints' in-flight data: keep it.

>>> b = with_key_groups(["a", "b"], [7, 3])
>>> b, b.key_groups, list(zip(b, key_groups_of(b)))
(['a', 'b'], [7, 3], [('a', 7), ('b', 3)])
>>> list(zip(["c"], key_groups_of(["c"])))  # a plain batch: hash the key as before
[('c', None)]
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from typing import Any

__all__ = ["KeyGroupedBatch", "as_plain", "key_groups_of", "with_key_groups"]


class KeyGroupedBatch(list[Any]):
    """A record batch with its records' key groups (see the module docstring)."""

    __slots__ = ("key_groups",)

    key_groups: list[int]


def with_key_groups(records: list[Any], key_groups: list[int]) -> KeyGroupedBatch:
    """``records`` (copied) as a ``KeyGroupedBatch`` with ``key_groups`` (same length)."""
    batch = KeyGroupedBatch(records)
    batch.key_groups = key_groups
    return batch


def key_groups_of(records: list[Any]) -> Iterable[int | None]:
    """Per record, its key group if the batch carries them (a ``KeyGroupedBatch``, or a
    ``StampedBatch`` with ``key_groups``), else ``None`` (compute it)."""
    if type(records) is KeyGroupedBatch:
        return records.key_groups
    key_groups: list[int] | None = getattr(records, "key_groups", None)
    return repeat(None) if key_groups is None else key_groups


def as_plain(entry: Any) -> Any:
    """``entry`` with a ``KeyGroupedBatch`` turned into a plain list, anything else as is."""
    return list(entry) if type(entry) is KeyGroupedBatch else entry
