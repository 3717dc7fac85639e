"""The bounded, non-parallel source behind ``env.from_collection`` / ``from_elements``.

Invariant: there is exactly one split, whose state is the index of the next element to emit;
the elements travel inside the (picklable) source description, not in the checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.api.connectors import Source, SourceReader, SourceReaderContext
from cairn.ids import CheckpointId

__all__ = ["CollectionSource", "CollectionSplit"]


@dataclass(frozen=True)
class CollectionSplit:
    """Elements ``next_index..`` of the collection are still to be emitted."""

    next_index: int


class CollectionSource(Source):
    """Emits the given elements once, in order, from a single subtask.

    >>> source = CollectionSource(["a", "b", "c"])
    >>> source.create_splits(4)
    [CollectionSplit(next_index=0)]
    >>> reader = source.create_reader([CollectionSplit(0)], None)
    >>> reader.poll_batch(2), reader.snapshot_state(1), reader.poll_batch(5), reader.poll_batch(5)
    (['a', 'b'], [CollectionSplit(next_index=2)], ['c'], None)

    With a parallelism above one only the subtask that receives the single split emits;
    the others finish at once. Elements must be picklable.
    """

    split_redistribution = "split"

    def __init__(self, elements: Iterable[Any]) -> None:
        self.elements: tuple[Any, ...] = tuple(elements)

    def is_bounded(self) -> bool:
        return True

    def create_splits(self, parallelism: int) -> list[CollectionSplit]:
        return [CollectionSplit(0)] if self.elements else []

    def create_reader(
        self, splits: Sequence[CollectionSplit], context: SourceReaderContext
    ) -> CollectionReader:
        if len(splits) > 1:
            raise ValueError(f"a collection source has one split, got {len(splits)}")
        return CollectionReader(self.elements, splits[0].next_index if splits else None)

    def __repr__(self) -> str:
        return f"CollectionSource({len(self.elements)} elements)"


class CollectionReader(SourceReader):
    def __init__(self, elements: tuple[Any, ...], next_index: int | None) -> None:
        self._elements = elements
        self._next = next_index  # None: this reader owns no split

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if self._next is None or self._next >= len(self._elements):
            return None
        stop = min(self._next + max(0, max_records), len(self._elements))
        batch = list(self._elements[self._next : stop])
        self._next = stop
        return batch

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[CollectionSplit]:
        if self._next is None or self._next >= len(self._elements):
            return []
        return [CollectionSplit(self._next)]
