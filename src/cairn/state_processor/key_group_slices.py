"""Which Spark task reads or writes which key groups: pure decisions, no I/O, no Spark.

Invariant: the slices of a plan partition ``[0, max_parallelism)`` into contiguous key-group
ranges with Flink's formula (``key_group_range_for_subtask``), and every key group's section
is assigned to exactly one slice, so every key group of a savepoint is read (or written)
exactly once, whatever parallelism wrote it and however many tasks read it. RocksDB state
(``plan_rocksdb_slices``) is planned by database: a task reads the databases overlapping its
range and keeps only its own key groups, so there too each key group is read once.

>>> from cairn.checkpoint.handles import KeyedStateHandle, StreamRange
>>> r = StreamRange(0, 1, 0)
>>> old = [KeyedStateHandle("a", 0, 63, {1: r, 60: r}, 2),
...        KeyedStateHandle("b", 64, 127, {70: r}, 1)]
>>> [(s.key_groups.start, [f.path for f in s.files]) for s in plan_keyed_slices(old, 128, 3, "u")]
[(0, ['a']), (43, ['a', 'b']), (86, [])]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from cairn.checkpoint.handles import KeyedStateHandle, RocksDBKeyedStateHandle, StreamRange
from cairn.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    check_parallelism,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from cairn.state_processor.errors import StateProcessorError

__all__ = [
    "FileSlice",
    "KeyedSlice",
    "RocksDBSlice",
    "default_parallelism",
    "plan_keyed_slices",
    "plan_rocksdb_slices",
    "route",
    "split_handles",
]


@dataclass(frozen=True)
class FileSlice:
    """The sections of one state file that one slice reads, in key-group order."""

    path: str
    sections: tuple[tuple[int, StreamRange], ...]

    @property
    def wanted(self) -> dict[int, StreamRange]:
        return dict(self.sections)


@dataclass(frozen=True)
class KeyedSlice:
    """One Spark task's share of an operator's keyed state: its key groups and their files."""

    index: int
    key_groups: KeyGroupRange
    files: tuple[FileSlice, ...]

    @property
    def num_sections(self) -> int:
        return sum(len(f.sections) for f in self.files)


def plan_keyed_slices(
    handles: Sequence[KeyedStateHandle], max_parallelism: int, num_slices: int, uid: str
) -> list[KeyedSlice]:
    """``num_slices`` slices over the keyed state ``handles`` of operator ``uid``.

    Raises:
        StateProcessorError: ``num_slices`` is not in ``[1, max_parallelism]``, a key group
            is outside ``max_parallelism``, or two files hold the same key group.
    """
    check_parallelism(max_parallelism, num_slices)
    owner: dict[int, str] = {}
    for h in handles:
        for kg in h.sections:
            if not 0 <= kg < max_parallelism:
                raise StateProcessorError(
                    f"operator uid {uid!r}: state file {h.path!r} holds key group {kg}, "
                    f"outside max parallelism {max_parallelism}"
                )
            if kg in owner:
                raise StateProcessorError(
                    f"operator uid {uid!r}: key group {kg} is in two state files, "
                    f"{owner[kg]!r} and {h.path!r}"
                )
            owner[kg] = h.path
    slices = []
    for i in range(num_slices):
        kgs = key_group_range_for_subtask(max_parallelism, num_slices, i)
        files = []
        for h in handles:
            mine = tuple(sorted((kg, r) for kg, r in h.sections.items() if kg in kgs))
            if mine:
                files.append(FileSlice(h.path, mine))
        slices.append(KeyedSlice(i, kgs, tuple(files)))
    return slices


def route(key: Any, max_parallelism: int, parallelism: int) -> tuple[int, int]:
    """The key group of ``key`` and the index of the slice (subtask) that owns it.

    >>> kg, index = route("user-1", 128, 2)
    >>> index == (0 if kg < 64 else 1)
    True
    """
    kg = assign_to_key_group(key, max_parallelism)
    return kg, subtask_for_key_group(max_parallelism, parallelism, kg)


def default_parallelism(max_parallelism: int, spark_parallelism: int) -> int:
    """Tasks for writing or reading: Spark's default parallelism, at most one per key group.

    >>> default_parallelism(128, 4), default_parallelism(2, 8)
    (4, 2)
    """
    return max(1, min(max_parallelism, spark_parallelism))


@dataclass(frozen=True)
class RocksDBSlice:
    """One Spark task's share of an operator's RocksDB state: its key groups and the
    handles (old subtasks' databases) that hold any of them."""

    index: int
    key_groups: KeyGroupRange
    handles: tuple[RocksDBKeyedStateHandle, ...]


def plan_rocksdb_slices(
    handles: Sequence[RocksDBKeyedStateHandle],
    max_parallelism: int,
    num_slices: int | None,
    uid: str,
) -> list[RocksDBSlice]:
    """Slices over the RocksDB ``handles`` of operator ``uid``: without ``num_slices``, one
    per handle (its range: each database is downloaded once); else ``num_slices`` ranges by
    Flink's formula, each with the handles overlapping it (a handle straddling two ranges is
    downloaded by both tasks, each keeping its own key groups).

    >>> from cairn.checkpoint.handles import RocksDBKeyedStateHandle as H
    >>> hs = [H(64, 127, (), 0), H(0, 63, (), 0)]
    >>> [(s.key_groups.start, s.key_groups.end) for s in plan_rocksdb_slices(hs, 128, None, "u")]
    [(0, 63), (64, 127)]
    >>> [len(s.handles) for s in plan_rocksdb_slices(hs, 128, 3, "u")]
    [1, 2, 1]

    Raises:
        StateProcessorError: a handle's range is outside ``max_parallelism``, two handles
            hold the same key group, or ``num_slices`` is not in ``[1, max_parallelism]``.
    """
    ordered = sorted(handles, key=lambda h: h.key_group_start)
    for h in ordered:
        if not 0 <= h.key_group_start <= h.key_group_end < max_parallelism:
            raise StateProcessorError(
                f"operator uid {uid!r}: RocksDB state {h.path!r} holds key groups "
                f"{h.key_group_start}..{h.key_group_end}, outside max parallelism "
                f"{max_parallelism}"
            )
    for a, b in pairwise(ordered):
        if b.key_group_start <= a.key_group_end:
            raise StateProcessorError(
                f"operator uid {uid!r}: key groups {b.key_group_start}..{a.key_group_end} are "
                f"in two RocksDB databases, {a.path!r} and {b.path!r}"
            )
    if num_slices is None:
        return [
            RocksDBSlice(i, KeyGroupRange(h.key_group_start, h.key_group_end), (h,))
            for i, h in enumerate(ordered)
        ]
    check_parallelism(max_parallelism, num_slices)
    slices = []
    for i in range(num_slices):
        kgs = key_group_range_for_subtask(max_parallelism, num_slices, i)
        mine = tuple(
            h for h in ordered if h.key_group_start <= kgs.end and kgs.start <= h.key_group_end
        )
        slices.append(RocksDBSlice(i, kgs, mine))
    return slices


def split_handles(
    handles: Sequence[KeyedStateHandle | RocksDBKeyedStateHandle], uid: str
) -> tuple[list[KeyedStateHandle], list[RocksDBKeyedStateHandle]]:
    """``handles`` as (heap-format ones, RocksDB ones); one of the two is empty.

    Raises:
        StateProcessorError: the operator's keyed state is in both formats (handles of
            different checkpoints mixed).
    """
    heap = [h for h in handles if isinstance(h, KeyedStateHandle)]
    rocks = [h for h in handles if isinstance(h, RocksDBKeyedStateHandle)]
    if heap and rocks:
        raise StateProcessorError(
            f"operator {uid!r}: its keyed state is partly in the heap format and partly in "
            "RocksDB files; one checkpoint holds one backend's state per operator"
        )
    return heap, rocks


def heap_format_handles(
    handles: Sequence[KeyedStateHandle | RocksDBKeyedStateHandle], uid: str
) -> list[KeyedStateHandle]:
    """``handles`` if all are in the heap backend's (canonical) format, else a clear error
    (the writer builds on canonical savepoints only).

    Raises:
        StateProcessorError: the operator's state is in RocksDB's native format (a
            checkpoint or a native savepoint).
    """
    if any(isinstance(h, RocksDBKeyedStateHandle) for h in handles):
        raise StateProcessorError(
            f"operator {uid!r}: its keyed state is in the RocksDB state backend's native "
            "format (a checkpoint, or a savepoint taken with --type native); the state "
            "processor reads it, but writes onto the canonical format only: take a savepoint "
            "in the canonical format (the default) of the job"
        )
    return [h for h in handles if isinstance(h, KeyedStateHandle)]
