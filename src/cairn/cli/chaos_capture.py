"""``cairn chaos`` and an unbounded ``KafkaSource``: capture a prefix of its input before the
runs, so that every run reads the same records (``chaos_inputs`` replays them).

Invariant: per partition the capture starts where the job's own ``KafkaSource`` would start
on a fresh run (its ``OffsetsInitializer``, resolved once, here) and keeps the first
``records`` records in offset order, fewer if the source's stopping offset comes first or
``seconds`` pass; a partition's file (``<topic>-<partition>.parquet``) holds exactly what
was kept, raw (key, value, timestamp, headers, partition, offset), and the capture never
commits offsets to the job's consumer group. The decisions are pure (``plan_capture``,
``PartitionPlan.wants``); ``capture_kafka`` is the I/O around them.

>>> plan = plan_capture([("t", 0), ("t", 1)], {("t", 0): 5, ("t", 1): 9}, {("t", 1): 9}, 3)
>>> [(p.partition, p.start, p.stop, p.wants(0, 5)) for p in plan]
[(0, 5, None, True), (1, 9, 9, False)]
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.common.exceptions import ConfigurationError
from cairn.datastream.connectors.kafka.captured import CapturedMessage, write_partition
from cairn.datastream.connectors.kafka.replay import CapturedPartition
from cairn.datastream.connectors.kafka.source_config import KafkaSourceConfig

__all__ = ["CaptureError", "PartitionPlan", "capture_kafka", "is_passing", "plan_capture"]

_Key = tuple[str, int]


class CaptureError(ConfigurationError):
    """The input of a Kafka source could not be captured (cluster, topic, offsets)."""


@dataclass(frozen=True)
class PartitionPlan:
    """What to capture of one partition: from ``start``, at most ``records`` records, none
    at or past ``stop`` (the source's stopping offset; None: no stopping offset)."""

    topic: str
    partition: int
    start: int
    stop: int | None
    records: int

    def wants(self, captured: int, offset: int) -> bool:
        """Whether the record at ``offset`` is kept, ``captured`` records being kept so far
        (also: whether a partition whose next offset is ``offset`` is still read).

        >>> p = PartitionPlan("t", 0, 10, 14, 3)
        >>> p.wants(0, 10), p.wants(3, 13), p.wants(1, 14), p.wants(0, 9)
        (True, False, False, False)
        """
        if captured >= self.records or offset < self.start:
            return False
        return self.stop is None or offset < self.stop


def plan_capture(
    partitions: Sequence[_Key],
    starts: Mapping[_Key, int],
    stops: Mapping[_Key, int],
    records: int,
) -> list[PartitionPlan]:
    """One plan per partition, in ``(topic, partition)`` order: from its resolved starting
    offset, up to its stopping offset if the source has one, ``records`` at most."""
    return [
        PartitionPlan(
            topic, partition, starts[(topic, partition)], stops.get((topic, partition)), records
        )
        for topic, partition in sorted(partitions)
    ]


def capture_kafka(
    config: KafkaSourceConfig, directory: str, records: int, seconds: float
) -> list[CapturedPartition]:
    """Capture ``config``'s partitions into ``directory`` (created) per ``plan_capture``;
    a partition's capture ends when its plan wants no more or ``seconds`` have passed.
    Raises ``CaptureError`` when the cluster, a topic or an offset cannot be read."""
    from confluent_kafka import Consumer, KafkaException

    from cairn.datastream.connectors.kafka.offsets import NoOffsetError
    from cairn.datastream.connectors.kafka.source_reader import KafkaSourceError

    os.makedirs(directory, exist_ok=True)
    conf = config.consumer_config(0, "cairn-chaos-capture")
    conf["client.id"] = "cairn-chaos-capture"
    try:
        consumer = Consumer(conf)
    except KafkaException as exc:
        raise CaptureError(f"invalid Kafka consumer configuration: {exc}") from exc
    try:
        plans = plan_capture(*_offsets(consumer, config), records)
        kept = _read(consumer, config, plans, seconds)
    except (KafkaSourceError, NoOffsetError) as exc:
        raise CaptureError(f"capturing the input of a KafkaSource: {exc}") from exc
    finally:
        consumer.close()
    captured = []
    for plan in plans:
        messages = kept[(plan.topic, plan.partition)]
        path = os.path.join(directory, f"{plan.topic}-{plan.partition}.parquet")
        write_partition(path, messages)
        stop = messages[-1].offset() + 1 if messages else plan.start
        captured.append(
            CapturedPartition(plan.topic, plan.partition, path, plan.start, stop, len(messages))
        )
    return captured


def _offsets(
    consumer: Any, config: KafkaSourceConfig
) -> tuple[list[_Key], dict[_Key, int], dict[_Key, int]]:
    """The partitions ``config`` reads now, their starting offsets and (if it has them)
    stopping offsets, resolved as its reader would; a passing error (a group coordinator
    not ready yet, which would restart the job) is retried within the api timeout."""
    from cairn.datastream.connectors.kafka.source_reader import (
        ConsumerLookup,
        KafkaSourceError,
        list_partitions,
    )

    timeout = config.api_timeout_s
    found = list_partitions(config, consumer, timeout)
    lookup = ConsumerLookup(consumer, timeout, config.bootstrap_servers)
    given_up = time.monotonic() + timeout
    while True:
        try:
            starts = config.starting_offsets.resolve(found, lookup)
            stop_at = config.stopping_offsets
            stops = stop_at.resolve(found, lookup) if stop_at is not None else {}
            break
        except KafkaSourceError as exc:
            if not is_passing(exc) or time.monotonic() > given_up:
                raise
            time.sleep(0.2)
    return (
        [(tp.topic, tp.partition) for tp in found],
        {(tp.topic, tp.partition): o for tp, o in starts.items()},
        {(tp.topic, tp.partition): o for tp, o in stops.items() if o >= 0},
    )


def is_passing(error: BaseException) -> bool:
    """Whether the Kafka error behind ``error`` is one to try again: retriable, or a group
    coordinator or partition leader not there yet (librdkafka does not flag those when an
    offset look-up fails with them)."""
    from confluent_kafka import KafkaError, KafkaException

    cause = error.__cause__
    if not isinstance(cause, KafkaException) or not cause.args:
        return False
    err = cause.args[0]
    if not isinstance(err, KafkaError):
        return False
    transient = (
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    )
    return bool(err.retriable()) or err.code() in transient


def _read(
    consumer: Any, config: KafkaSourceConfig, plans: Sequence[PartitionPlan], seconds: float
) -> dict[_Key, list[CapturedMessage]]:
    """The records each plan wants, read until none wants more or ``seconds`` passed."""
    from confluent_kafka import TopicPartition

    reading = {(p.topic, p.partition): p for p in plans if p.wants(0, p.start)}
    kept: dict[_Key, list[CapturedMessage]] = {(p.topic, p.partition): [] for p in plans}
    if reading:
        consumer.assign([TopicPartition(t, p, plan.start) for (t, p), plan in reading.items()])
    deadline = time.monotonic() + seconds
    while reading and time.monotonic() < deadline:
        wait = min(0.2, max(0.0, deadline - time.monotonic()))
        for message in consumer.consume(1000, timeout=wait):
            _check(message, config)
            if message.error() is not None:
                continue
            record = CapturedMessage.of(message)
            key = (record.topic(), record.partition())
            plan = reading.get(key)
            if plan is None or not plan.wants(len(kept[key]), record.offset()):
                continue
            kept[key].append(record)
            if not plan.wants(len(kept[key]), record.offset() + 1):
                del reading[key]
                consumer.incremental_unassign([TopicPartition(key[0], key[1])])
    return kept


def _check(message: Any, config: KafkaSourceConfig) -> None:
    """Raise ``CaptureError`` for an error that ends reading (a fatal one, a missing topic,
    an offset out of range without reset); a passing one (a broker restarting) is ignored."""
    from confluent_kafka import KafkaError

    err = message.error()
    if err is None:
        return
    missing = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
    if err.fatal() or err.code() in (*missing, KafkaError._AUTO_OFFSET_RESET):
        raise CaptureError(
            f"capturing the input of a KafkaSource at {config.bootstrap_servers}: {err.str()}"
        )
