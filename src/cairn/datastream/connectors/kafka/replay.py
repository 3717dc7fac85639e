"""A bounded source that replays records captured from a ``KafkaSource`` as that source
would have read them (``cairn chaos`` runs a job on a captured prefix of its topics).

Invariant: the replay keeps the Kafka source's split structure: one split per captured
partition, owned by the same subtask (``split_owner``), split id ``<topic>-<partition>``,
its state a ``KafkaPartitionSplit`` whose ``offset`` is one past the last record returned
(``union`` redistribution, so a restore at any parallelism resumes each partition exactly
where the checkpoint left it); the records are the captured raw messages through the job's
own deserializer (value, ``(key, value)`` or the message, as the live reader hands them),
stamped with their Kafka timestamps, in offset order per partition. It ends when every
captured partition was replayed.

>>> p = CapturedPartition("orders", 1, "/tmp/orders-1.parquet", 100, 150, 50)
>>> p.split_id, p.last_offset
('orders-1', 149)
>>> [q.partition for q in owned_partitions([p, CapturedPartition("orders", 0, "x", 0, 0, 0)], 0, 2)]
[1]
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.api.connectors import Source, SourceReader, SourceReaderContext, SplitBatch
from cairn.datastream.connectors.datagen import RateLimiter, RateLimiterStrategy
from cairn.datastream.connectors.kafka.captured import CapturedMessage, read_partition
from cairn.datastream.connectors.kafka.source_config import KafkaSourceConfig
from cairn.datastream.connectors.kafka.splits import (
    KafkaPartitionSplit,
    KafkaSourceMarker,
    split_owner,
)
from cairn.ids import CheckpointId

__all__ = ["CapturedPartition", "KafkaReplayReader", "KafkaReplaySource", "owned_partitions"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CapturedPartition:
    """What was captured of one partition: ``records`` messages in ``path``, read from
    ``start_offset`` (the source's starting offset) up to ``stop_offset`` (exclusive: one
    past the last captured record; ``start_offset`` when none was)."""

    topic: str
    partition: int
    path: str
    start_offset: int
    stop_offset: int
    records: int

    @property
    def split_id(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def last_offset(self) -> int | None:
        return self.stop_offset - 1 if self.records else None


def owned_partitions(
    partitions: Sequence[CapturedPartition], subtask: int, parallelism: int
) -> list[CapturedPartition]:
    """The partitions subtask ``subtask`` of ``parallelism`` replays: those the Kafka source
    would have given it (``split_owner``), in ``(topic, partition)`` order."""
    mine = [p for p in partitions if split_owner(p.topic, p.partition, parallelism) == subtask]
    return sorted(mine, key=lambda p: (p.topic, p.partition))


@dataclass(frozen=True)
class KafkaReplaySource(Source):
    """Replays ``partitions`` through ``config``'s deserializer (see the module);
    ``records_per_second``: the whole source's pace (None: as fast as the job reads)."""

    config: KafkaSourceConfig
    partitions: tuple[CapturedPartition, ...]
    records_per_second: float | None = None
    name: str = "KafkaSource"

    split_redistribution = "union"

    def is_bounded(self) -> bool:
        return True

    def create_splits(self, parallelism: int) -> list[Any]:
        return []  # each reader takes the partitions it owns, as the Kafka source's do

    def create_reader(self, splits: Sequence[Any], context: SourceReaderContext) -> SourceReader:
        strategy = RateLimiterStrategy(self.records_per_second)
        limiter = strategy.create_rate_limiter(context.parallelism)
        mine = owned_partitions(self.partitions, context.subtask_index, context.parallelism)
        return KafkaReplayReader(self.config, mine, splits, limiter)

    def __repr__(self) -> str:
        total = sum(p.records for p in self.partitions)
        return f"KafkaReplaySource({len(self.partitions)} partitions, {total} records)"


class _Partition:
    """A partition being replayed: its messages and the index of the next one."""

    __slots__ = ("index", "info", "messages")

    def __init__(self, info: CapturedPartition, next_offset: int | None) -> None:
        self.info = info
        self.messages = read_partition(info.path) if info.records else []
        offsets = [m.offset() for m in self.messages]
        self.index = 0 if next_offset is None else bisect.bisect_left(offsets, next_offset)

    @property
    def next_offset(self) -> int:
        """One past the last record returned (the start: nothing returned yet)."""
        if self.done:
            return self.info.stop_offset
        return self.messages[self.index - 1].offset() + 1 if self.index else self.info.start_offset

    @property
    def done(self) -> bool:
        return self.index >= len(self.messages)


class KafkaReplayReader(SourceReader):
    """Replays the captured partitions of one subtask (see the module docstring)."""

    def __init__(
        self,
        config: KafkaSourceConfig,
        partitions: Sequence[CapturedPartition],
        splits: Sequence[Any],
        limiter: RateLimiter,
    ) -> None:
        from cairn.datastream.connectors.kafka.source_reader import KafkaSourceError

        assert config.deserializer is not None
        self._error = KafkaSourceError
        self._deserialize: Callable[[Any], Any] = config.deserializer.deserialize
        self._with_key = bool(getattr(config.deserializer, "reads_message_key", False))
        self._with_message = bool(getattr(config.deserializer, "reads_kafka_message", False))
        self._ignore_errors = config.ignore_parse_errors
        restored: dict[tuple[str, int], int] = {}
        for split in splits:
            if isinstance(split, KafkaPartitionSplit):
                key = (split.topic, split.partition)
                restored[key] = max(restored.get(key, split.offset), split.offset)
        self._partitions = [_Partition(p, restored.get((p.topic, p.partition))) for p in partitions]
        self._limiter = limiter
        self._wanted = 1
        self._turn = 0
        self.skipped_records = 0

    def _active(self) -> list[_Partition]:
        return [p for p in self._partitions if not p.done]

    def poll_batch(self, max_records: int) -> list[Any] | None:
        active = self._active()
        if not active:
            return None
        wanted = max(1, min(max_records, sum(len(p.messages) - p.index for p in active)))
        self._wanted = wanted
        granted = self._limiter.acquire(wanted)
        if granted <= 0:
            return []
        share = max(1, granted // len(active))
        records: list[Any] = []
        timestamps: list[int | None] = []
        runs: list[tuple[str, int]] = []
        self._turn = (self._turn + 1) % len(active)
        for partition in active[self._turn :] + active[: self._turn]:
            if granted <= 0:
                break
            take = min(share, granted, len(partition.messages) - partition.index)
            run = partition.messages[partition.index : partition.index + take]
            partition.index += take
            granted -= take
            values = self._values(run)
            kept = [(v, m) for v, m in zip(values, run, strict=True) if v is not None]
            if not kept:
                continue
            records += [v for v, _ in kept]
            timestamps += [m.timestamp()[1] if m.timestamp()[0] else None for _, m in kept]
            runs.append((partition.info.split_id, len(kept)))
        return SplitBatch.of(records, timestamps, runs)

    def _values(self, run: list[CapturedMessage]) -> list[Any]:
        """The deserialized records of ``run`` (``None``: dropped), as the live reader: an
        unreadable record fails naming where it is, or is skipped with
        ``ignore-parse-errors``."""
        values = []
        for m in run:
            if self._with_message:
                message: Any = m
            else:
                message = (m.key(), m.value()) if self._with_key else m.value()
            try:
                values.append(self._deserialize(message))
            except Exception as exc:
                where = f"topic {m.topic()!r} partition {m.partition()} offset {m.offset()}"
                if not self._ignore_errors:
                    raise self._error(
                        f"could not deserialize the (captured) record at {where}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                self.skipped_records += 1
                log.warning("Kafka replay skipped an unreadable record at %s: %s", where, exc)
                values.append(None)
        return values

    def available_in_s(self) -> float | None:
        if not self._active():
            return None
        return self._limiter.seconds_until_ready(self._wanted)

    def records_due_in_s(self) -> float | None:
        return self.available_in_s()

    def split_ids(self) -> list[str]:
        return [p.info.split_id for p in self._active()]

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[Any]:
        splits: list[Any] = [KafkaSourceMarker()]
        for p in self._partitions:
            info = p.info
            splits.append(
                KafkaPartitionSplit(info.topic, info.partition, p.next_offset, info.stop_offset)
            )
        return splits
