"""The source behind ``env.from_collection(...)``: a bounded list, read in order.

Invariant: the only split is the index of the next element to emit, so a restored reader
resumes exactly after the last element of the checkpoint; the source is non-parallel (one
split), and readers without a split finish at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.datastream.connectors.base import Source, SourceReader, SourceReaderContext

__all__ = ["CollectionSource"]


class CollectionSource(Source):
    """A bounded source of the elements of a Python collection.

    >>> reader = CollectionSource([1, 2, 3]).create_reader([0], None)  # type: ignore[arg-type]
    >>> reader.poll_batch(2), reader.snapshot_state(1), reader.poll_batch(5), reader.poll_batch(5)
    ([1, 2], [2], [3], None)
    """

    def __init__(self, elements: Iterable[Any]) -> None:
        self.elements = list(elements)

    def is_bounded(self) -> bool:
        return True

    def create_splits(self, parallelism: int) -> list[Any]:
        return [0]

    def create_reader(self, splits: Sequence[Any], context: SourceReaderContext) -> SourceReader:
        if len(splits) > 1:
            raise ValueError(f"a collection source has one split, got {len(splits)}")
        return _CollectionReader(self.elements, int(splits[0]) if splits else None)

    def __repr__(self) -> str:
        return f"CollectionSource({len(self.elements)} elements)"


class _CollectionReader(SourceReader):
    def __init__(self, elements: list[Any], offset: int | None) -> None:
        self._elements = elements
        self._offset = offset  # None: this subtask owns no split

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if self._offset is None or self._offset >= len(self._elements):
            return None
        batch = self._elements[self._offset : self._offset + max(1, max_records)]
        self._offset += len(batch)
        return batch

    def snapshot_state(self, checkpoint_id: int) -> list[Any]:
        return [] if self._offset is None else [self._offset]
