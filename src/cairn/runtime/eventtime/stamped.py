"""Records with timestamps: a batch plus a parallel list of timestamps.

Invariant: a ``StampedBatch`` is a list of records whose ``timestamps`` has one entry per
record (an int in epoch ms, or ``None``: no timestamp), in the same order, and, on a hash edge
into a keyed head, ``key_groups`` too (see ``keyed_batch``; unset elsewhere); no list is
changed after the batch was handed on (channels and broadcast edges share it). A job without
event time never builds one: its batches stay plain lists, so the hot path pays nothing.

>>> b = stamp(["a", "b", "c"], [10, None, 30])
>>> b, b.timestamps, type(b[0:2]) is list
(['a', 'b', 'c'], [10, None, 30], True)
>>> s = slice_batch(b, 1, 3); s, s.timestamps
(['b', 'c'], [None, 30])
"""

from __future__ import annotations

from typing import Any

from cairn.runtime.keyed_batch import KeyGroupedBatch, with_key_groups

__all__ = ["StampedBatch", "slice_batch", "stamp", "timestamps_of"]


class StampedBatch(list[Any]):
    """A record batch whose records carry timestamps (see the module docstring)."""

    __slots__ = ("key_groups", "timestamps")

    timestamps: list[int | None]
    key_groups: list[int]  # only on hash edges into keyed heads: read with ``key_groups_of``


def stamp(records: list[Any], timestamps: list[int | None]) -> StampedBatch:
    """``records`` as a ``StampedBatch`` with ``timestamps`` (same length)."""
    batch = StampedBatch(records)
    batch.timestamps = timestamps
    return batch


def timestamps_of(records: list[Any]) -> list[int | None]:
    """The timestamps of a batch: its own, or ``None`` per record for a plain list."""
    if type(records) is StampedBatch:
        return records.timestamps
    return [None] * len(records)


def slice_batch(records: list[Any], start: int, stop: int) -> list[Any]:
    """``records[start:stop]``, keeping the timestamps of a stamped batch (and the key groups
    of a ``KeyGroupedBatch``)."""
    if type(records) is StampedBatch:
        part = stamp(records[start:stop], records.timestamps[start:stop])
        key_groups = getattr(records, "key_groups", None)
        if key_groups is not None:
            part.key_groups = key_groups[start:stop]
        return part
    if type(records) is KeyGroupedBatch:
        return with_key_groups(records[start:stop], records.key_groups[start:stop])
    return records[start:stop]
