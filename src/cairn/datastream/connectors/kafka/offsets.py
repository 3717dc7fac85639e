"""Where a Kafka source starts and stops reading (PyFlink's ``KafkaOffsetsInitializer``).

Invariant: an initializer is an immutable, picklable description; it is resolved to concrete
offsets by a reader when it first sees a partition (``resolve``), and from then on only the
concrete offsets travel in checkpoints, so a restore never re-resolves "latest" or a
timestamp and never skips or repeats a record.

>>> KafkaOffsetsInitializer.timestamp(1_700_000_000_000)
KafkaOffsetsInitializer.timestamp(1700000000000)
>>> KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaTopicPartition",
    "NoOffsetError",
    "OffsetLookup",
    "OffsetResetStrategy",
]


@dataclass(frozen=True, order=True)
class KafkaTopicPartition:
    """One partition of a topic (Java's ``TopicPartition``).

    >>> KafkaTopicPartition("orders", 3)
    KafkaTopicPartition('orders', 3)
    >>> KafkaTopicPartition("orders", 3) == KafkaTopicPartition("orders", 3)
    True
    """

    topic: str
    partition: int

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not self.topic:
            raise ValueError(f"topic must be a non-empty string, got {self.topic!r}")
        if not isinstance(self.partition, int) or self.partition < 0:
            raise ValueError(f"partition must be an int >= 0, got {self.partition!r}")

    def __repr__(self) -> str:
        return f"KafkaTopicPartition({self.topic!r}, {self.partition})"


class KafkaOffsetResetStrategy(enum.Enum):
    """What to do when a committed offset is missing (Java's ``OffsetResetStrategy``)."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2

    def __repr__(self) -> str:
        return f"KafkaOffsetResetStrategy.{self.name}"


OffsetResetStrategy = KafkaOffsetResetStrategy  # Java's name, as in older PyFlink examples


class OffsetLookup(Protocol):
    """What resolving needs from a Kafka client (the reader implements it with librdkafka).
    ``committed`` and ``for_timestamp`` give -1 for a partition without a committed offset
    or without a record at or after the timestamp."""

    def earliest(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]: ...

    def latest(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]: ...

    def committed(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]: ...

    def for_timestamp(
        self, tps: Sequence[KafkaTopicPartition], timestamp_ms: int
    ) -> dict[KafkaTopicPartition, int]: ...


class NoOffsetError(LookupError):
    """A partition has no committed offset and the reset strategy is ``NONE``."""


@dataclass(frozen=True)
class KafkaOffsetsInitializer:
    """Starting or stopping offsets per partition; build one with the static methods."""

    kind: str
    reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST
    timestamp_ms: int | None = None
    specified: tuple[tuple[KafkaTopicPartition, int], ...] = ()

    @staticmethod
    def earliest() -> KafkaOffsetsInitializer:
        """The earliest offset still in each partition (the default starting offsets)."""
        return KafkaOffsetsInitializer("earliest")

    @staticmethod
    def latest() -> KafkaOffsetsInitializer:
        """The end of each partition when the reader first sees it."""
        return KafkaOffsetsInitializer("latest", KafkaOffsetResetStrategy.LATEST)

    @staticmethod
    def committed_offsets(
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE,
    ) -> KafkaOffsetsInitializer:
        """The consumer group's committed offsets (needs ``set_group_id``); partitions
        without one use ``offset_reset_strategy`` (``NONE``: fail)."""
        return KafkaOffsetsInitializer("committed", _strategy(offset_reset_strategy))

    @staticmethod
    def timestamp(timestamp: int) -> KafkaOffsetsInitializer:
        """The first record whose timestamp is at least ``timestamp`` (epoch ms); the end of
        the partition when there is none."""
        if not isinstance(timestamp, int) or timestamp < 0:
            raise ValueError(f"timestamp must be epoch milliseconds >= 0, got {timestamp!r}")
        return KafkaOffsetsInitializer("timestamp", KafkaOffsetResetStrategy.LATEST, timestamp)

    @staticmethod
    def offsets(
        offsets: Mapping[KafkaTopicPartition, int],
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST,
    ) -> KafkaOffsetsInitializer:
        """The given offset per partition; other partitions start at the committed offset,
        else by ``offset_reset_strategy``, which also applies when a given offset is out of
        range."""
        specified = []
        for tp, offset in offsets.items():
            if not isinstance(tp, KafkaTopicPartition):
                raise TypeError(f"offsets keys must be KafkaTopicPartition, got {tp!r}")
            if not isinstance(offset, int) or offset < 0:
                raise ValueError(f"offset of {tp!r} must be an int >= 0, got {offset!r}")
            specified.append((tp, offset))
        return KafkaOffsetsInitializer(
            "offsets", _strategy(offset_reset_strategy), None, tuple(sorted(specified))
        )

    def auto_offset_reset(self) -> str:
        """librdkafka's ``auto.offset.reset`` for offsets out of range."""
        return {
            KafkaOffsetResetStrategy.EARLIEST: "earliest",
            KafkaOffsetResetStrategy.LATEST: "latest",
            KafkaOffsetResetStrategy.NONE: "error",
        }[self.reset_strategy]

    def resolve(
        self, partitions: Sequence[KafkaTopicPartition], lookup: OffsetLookup
    ) -> dict[KafkaTopicPartition, int]:
        """Concrete offsets of ``partitions`` (a few round trips, none for the rest)."""
        if not partitions:
            return {}
        if self.kind == "earliest":
            return lookup.earliest(partitions)
        if self.kind == "latest":
            return lookup.latest(partitions)
        if self.kind == "timestamp":
            assert self.timestamp_ms is not None
            found = lookup.for_timestamp(partitions, self.timestamp_ms)
            missing = [tp for tp in partitions if found.get(tp, -1) < 0]
            return {**found, **lookup.latest(missing)} if missing else found
        given = dict(self.specified) if self.kind == "offsets" else {}
        rest = [tp for tp in partitions if tp not in given]
        result = {tp: given[tp] for tp in partitions if tp in given}
        if rest:
            committed = lookup.committed(rest)
            result.update({tp: o for tp, o in committed.items() if o >= 0})
            lacking = [tp for tp in rest if committed.get(tp, -1) < 0]
            if lacking:
                if self.reset_strategy is KafkaOffsetResetStrategy.NONE:
                    raise NoOffsetError(
                        f"no committed offset for {lacking[:5]} and the offset reset "
                        "strategy is NONE; use committed_offsets(KafkaOffsetResetStrategy."
                        "EARLIEST) or LATEST to start them anyway"
                    )
                fallback = (
                    lookup.earliest
                    if self.reset_strategy is KafkaOffsetResetStrategy.EARLIEST
                    else lookup.latest
                )
                result.update(fallback(lacking))
        return result

    def __repr__(self) -> str:
        if self.kind == "timestamp":
            return f"KafkaOffsetsInitializer.timestamp({self.timestamp_ms})"
        if self.kind == "committed":
            return f"KafkaOffsetsInitializer.committed_offsets({self.reset_strategy!r})"
        if self.kind == "offsets":
            given = dict(self.specified)
            return f"KafkaOffsetsInitializer.offsets({given!r}, {self.reset_strategy!r})"
        return f"KafkaOffsetsInitializer.{self.kind}()"


def _strategy(value: KafkaOffsetResetStrategy) -> KafkaOffsetResetStrategy:
    if not isinstance(value, KafkaOffsetResetStrategy):
        raise TypeError(f"expected a KafkaOffsetResetStrategy, got {value!r}")
    return value
