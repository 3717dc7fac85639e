"""A bounded source of the numbers ``start..end`` (inclusive), PyFlink's ``NumberSequenceSource``.

Invariant: the initial splits are disjoint contiguous ranges covering ``[start, end]``; a
split state ``(split_id, next_value, end)`` holds exactly the numbers not yet returned, so
snapshots taken between two polls resume without loss or duplicates at any parallelism.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cairn.api.connectors import Source, SourceReader, SourceReaderContext
from cairn.ids import CheckpointId

__all__ = ["NumberSequenceSource", "NumberSequenceSplit"]


@dataclass(frozen=True)
class NumberSequenceSplit:
    """The numbers ``next_value..end`` (inclusive) that are still to be emitted."""

    split_id: int
    next_value: int
    end: int

    @property
    def remaining(self) -> int:
        return max(0, self.end - self.next_value + 1)


class NumberSequenceSource(Source):
    """Emits every integer from ``start`` to ``end``, both inclusive, like Flink.

    >>> source = NumberSequenceSource(1, 10)
    >>> [(s.next_value, s.end) for s in source.create_splits(3)]
    [(1, 4), (5, 7), (8, 10)]

    Use with ``env.from_source(NumberSequenceSource(0, 999), WatermarkStrategy
    .no_watermarks(), "numbers")``. The order is ascending within each split.
    """

    split_redistribution = "split"

    def __init__(self, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"end ({end}) must not be smaller than start ({start})")
        self._start = int(start)
        self._end = int(end)

    def get_from(self) -> int:
        return self._start

    def get_to(self) -> int:
        return self._end

    def is_bounded(self) -> bool:
        return True

    def create_splits(self, parallelism: int) -> list[NumberSequenceSplit]:
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        total = self._end - self._start + 1
        # Like Flink: at most one split per number, sizes differ by at most one.
        count = min(parallelism, total)
        splits = []
        first = self._start
        for i in range(count):
            size = total // count + (1 if i < total % count else 0)
            splits.append(NumberSequenceSplit(i, first, first + size - 1))
            first += size
        return splits

    def create_reader(
        self, splits: Sequence[NumberSequenceSplit], context: SourceReaderContext
    ) -> NumberSequenceReader:
        return NumberSequenceReader(splits)


class NumberSequenceReader(SourceReader):
    """Reads its splits one after the other, in the order given."""

    def __init__(self, splits: Sequence[NumberSequenceSplit]) -> None:
        self._splits = [s for s in splits if s.remaining > 0]

    def poll_batch(self, max_records: int) -> list[int] | None:
        if not self._splits:
            return None
        if max_records <= 0:
            return []
        split = self._splits[0]
        stop = min(split.next_value + max_records, split.end + 1)
        batch = list(range(split.next_value, stop))
        if stop > split.end:
            self._splits.pop(0)
        else:
            self._splits[0] = NumberSequenceSplit(split.split_id, stop, split.end)
        return batch

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[NumberSequenceSplit]:
        return list(self._splits)
