"""Kafka partitions as source splits: who reads a partition, and what a checkpoint keeps.

Invariant: partition ``(topic, p)`` belongs to subtask ``(((hash(topic) * 31) & 0x7FFFFFFF)
% n + p) % n`` with Java's ``String.hashCode`` (Flink's ``KafkaSourceEnumerator.
getSplitOwner``), a pure function of the names and the parallelism ``n``, so every reader
computes the same assignment without a coordinator and, after a restore at another
parallelism, keeps exactly the checkpointed partitions it now owns. A split's ``offset`` is
the next offset to read (or ``EARLIEST``: nothing read yet, from the beginning).

>>> java_string_hash("hello"), java_string_hash("polygenelubricants")
(99162322, -2147483648)
>>> [split_owner("orders", p, 3) for p in range(4)]
[0, 1, 2, 0]
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EARLIEST",
    "NO_STOPPING_OFFSET",
    "KafkaPartitionSplit",
    "KafkaSourceMarker",
    "java_string_hash",
    "split_owner",
]

EARLIEST = -2  # librdkafka's OFFSET_BEGINNING: resolved by the client when it starts reading
NO_STOPPING_OFFSET = -(2**63)  # Flink's ``KafkaPartitionSplit.NO_STOPPING_OFFSET``


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: 31-polynomial over UTF-16 code units, as a signed int.

    >>> java_string_hash(""), java_string_hash("Aa") == java_string_hash("BB")
    (0, True)
    >>> java_string_hash("😀")  # one code point, two UTF-16 code units
    1772899
    """
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def split_owner(topic: str, partition: int, parallelism: int) -> int:
    """The subtask that reads ``partition`` of ``topic`` (Flink's ``getSplitOwner``)."""
    start = ((java_string_hash(topic) * 31) & 0x7FFFFFFF) % parallelism
    return (start + partition) % parallelism


@dataclass(frozen=True)
class KafkaPartitionSplit:
    """One partition's progress: read up to ``offset`` (exclusive), stop at ``stopping_offset``
    (exclusive; ``NO_STOPPING_OFFSET``: never)."""

    topic: str
    partition: int
    offset: int
    stopping_offset: int = NO_STOPPING_OFFSET

    @property
    def split_id(self) -> str:
        """Flink's split id, ``<topic>-<partition>``."""
        return f"{self.topic}-{self.partition}"

    @property
    def finished(self) -> bool:
        return self.stopping_offset != NO_STOPPING_OFFSET and (
            self.offset >= self.stopping_offset
            or (self.stopping_offset == 0 and self.offset == EARLIEST)
        )


@dataclass(frozen=True)
class KafkaSourceMarker:
    """In every snapshot beside the splits: the initial discovery is over, so partitions
    first seen after a restore start at the earliest offset (Flink's enumerator state
    ``initialDiscoveryFinished``), not at the configured starting offsets."""
