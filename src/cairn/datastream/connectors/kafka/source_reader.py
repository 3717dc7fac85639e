"""The Kafka source's reader: one librdkafka consumer per subtask on ``assign()``.

Invariants: the reader owns exactly the partitions ``split_owner`` gives its subtask; the
offset it snapshots for a partition is one past the last record it returned from it (never
ahead of what went downstream), so a restore neither skips nor repeats a record;
``poll_batch`` never waits on the network (``consume(timeout=0)``); partition discovery
after the start runs on a thread of its own with its own consumer, and the task thread only
picks up its result (new partitions, or the failure of a partition whose topic was
deleted). Committing offsets to the group (on checkpoint completion) is
asynchronous and only for monitoring: restores use the checkpointed offsets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from itertools import groupby
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cairn.api.connectors import SourceReader, SourceReaderContext, SplitBatch
from cairn.datastream.connectors.kafka.offsets import (
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
    NoOffsetError,
)
from cairn.datastream.connectors.kafka.source_config import KafkaSourceConfig
from cairn.datastream.connectors.kafka.splits import (
    EARLIEST,
    NO_STOPPING_OFFSET,
    KafkaPartitionSplit,
    KafkaSourceMarker,
    split_owner,
)
from cairn.ids import CheckpointId

__all__ = ["ConsumerLookup", "KafkaSourceError", "KafkaSourceReader", "list_partitions"]

log = logging.getLogger(__name__)

_Key = tuple[str, int]
# librdkafka's local error codes are underscored in confluent-kafka's documented API.
_MISSING = (
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
)
_IDLE_POLL_S = 0.005  # records arrive on librdkafka's threads; we cannot be woken by them
_WARN_EVERY_S = 10.0


def _partition_of(msg: Any) -> _Key:
    return (msg.topic(), msg.partition())


class KafkaSourceError(RuntimeError):
    """The Kafka source cannot go on: unreachable cluster, missing topic, unreadable record."""


class ConsumerLookup:
    """``OffsetLookup`` over a librdkafka consumer; every call bounded by ``timeout_s``."""

    def __init__(self, consumer: Consumer, timeout_s: float, servers: str) -> None:
        self._consumer = consumer
        self._timeout = timeout_s
        self._servers = servers

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args, timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaSourceError(
                f"Kafka at {self._servers}: {what} failed within {self._timeout:g} s "
                f"(default.api.timeout.ms): {exc}"
            ) from exc

    def _watermarks(self, tps: Sequence[KafkaTopicPartition], high: bool) -> dict[Any, int]:
        out = {}
        for tp in tps:
            low_high = self._call(
                f"reading the offsets of {tp.topic}-{tp.partition}",
                self._consumer.get_watermark_offsets,
                TopicPartition(tp.topic, tp.partition),
            )
            out[tp] = int(low_high[1] if high else low_high[0])
        return out

    def earliest(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]:
        return self._watermarks(tps, high=False)

    def latest(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]:
        return self._watermarks(tps, high=True)

    def committed(self, tps: Sequence[KafkaTopicPartition]) -> dict[KafkaTopicPartition, int]:
        found = self._call(
            "reading the group's committed offsets",
            self._consumer.committed,
            [TopicPartition(tp.topic, tp.partition) for tp in tps],
        )
        return {KafkaTopicPartition(t.topic, t.partition): max(t.offset, -1) for t in found}

    def for_timestamp(
        self, tps: Sequence[KafkaTopicPartition], timestamp_ms: int
    ) -> dict[KafkaTopicPartition, int]:
        found = self._call(
            f"looking up offsets for timestamp {timestamp_ms}",
            self._consumer.offsets_for_times,
            [TopicPartition(tp.topic, tp.partition, timestamp_ms) for tp in tps],
        )
        return {KafkaTopicPartition(t.topic, t.partition): max(t.offset, -1) for t in found}


def list_partitions(
    source: KafkaSourceConfig, consumer: Consumer, timeout_s: float, strict: bool = True
) -> list[KafkaTopicPartition]:
    """The partitions ``source`` reads now; with ``strict``, a named topic or partition that
    does not exist is an error (a pattern may match nothing), else it is left out."""
    try:
        if len(source.topics) == 1 and not source.partitions:
            meta = consumer.list_topics(source.topics[0], timeout=timeout_s)
        else:
            meta = consumer.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaSourceError(
            f"could not reach the Kafka cluster at {source.bootstrap_servers} within "
            f"{timeout_s:g} s (default.api.timeout.ms): {exc}"
        ) from exc
    topics = meta.topics

    def exists(name: str) -> bool:
        topic = topics.get(name)
        return topic is not None and topic.error is None and bool(topic.partitions)

    if source.partitions:
        if not strict:
            return [
                tp
                for tp in source.partitions
                if exists(tp.topic) and tp.partition in topics[tp.topic].partitions
            ]
        missing = [
            tp
            for tp in source.partitions
            if not exists(tp.topic) or tp.partition not in topics[tp.topic].partitions
        ]
        if missing:
            raise KafkaSourceError(
                f"partitions {missing} do not exist on the Kafka cluster at "
                f"{source.bootstrap_servers}"
            )
        return list(source.partitions)
    if source.topic_pattern is None and strict:
        missing_topics = [t for t in source.topics if not exists(t)]
        if missing_topics:
            raise KafkaSourceError(
                f"topic(s) {missing_topics} do not exist on the Kafka cluster at "
                f"{source.bootstrap_servers} (use set_topic_pattern to wait for topics)"
            )
    return sorted(
        KafkaTopicPartition(name, p)
        for name, topic in topics.items()
        if topic.error is None and source.matches(name)
        for p in topic.partitions
    )


class _Discovery(threading.Thread):
    """Lists the partitions every interval with a consumer of its own. With discovery on,
    the partitions its subtask owns and has not seen yet wait in ``take()`` with their
    stopping offsets; in any case a partition it reads that is gone from the cluster in two
    lists in a row (its topic deleted) makes ``take()`` raise."""

    CHECK_INTERVAL_S = 10.0  # without discovery: how often to look for deleted topics

    def __init__(
        self, source: KafkaSourceConfig, conf: dict[str, Any], owns: Any, seen: set[_Key]
    ) -> None:
        super().__init__(name=f"kafka-discovery-{conf['client.id']}", daemon=True)
        self._source = source
        self._conf = {**conf, "client.id": f"{conf['client.id']}-discovery"}
        self._conf.pop("on_commit", None)
        self._owns = owns
        self._seen = set(seen)
        self._discovers = source.discovery_interval_ms > 0
        self._interval_s = (
            source.discovery_interval_ms / 1000.0 if self._discovers else self.CHECK_INTERVAL_S
        )
        self._stop_event = threading.Event()
        self._lock = threading.Lock()
        self._found: list[tuple[KafkaTopicPartition, int]] = []
        self._failure: KafkaSourceError | None = None
        self.has_news = False  # read without the lock: a stale False only delays a poll

    def run(self) -> None:
        consumer = Consumer(self._conf)
        lookup = ConsumerLookup(
            consumer, self._source.api_timeout_s, self._source.bootstrap_servers
        )
        last_warning = 0.0
        gone_before: set[_Key] = set()
        try:
            while not self._stop_event.wait(self._interval_s):
                try:
                    found = list_partitions(
                        self._source, consumer, self._source.api_timeout_s, strict=False
                    )
                    present = {(tp.topic, tp.partition) for tp in found}
                    new = [
                        tp
                        for tp in found
                        if self._discovers
                        and (tp.topic, tp.partition) not in self._seen
                        and self._owns(tp)
                    ]
                    stops = _stopping_offsets(self._source.stopping_offsets, new, lookup)
                except (KafkaSourceError, NoOffsetError) as exc:
                    if time.monotonic() - last_warning > _WARN_EVERY_S:
                        last_warning = time.monotonic()
                        log.warning("Kafka partition discovery failed (retrying): %s", exc)
                    continue
                gone = self._seen - present
                if gone & gone_before:
                    names = ", ".join(f"{t}-{p}" for t, p in sorted(gone & gone_before)[:5])
                    self._fail(
                        KafkaSourceError(
                            f"Kafka source: partition(s) {names} no longer exist on the "
                            f"cluster at {self._source.bootstrap_servers} (topic deleted while "
                            "the job ran?)"
                        )
                    )
                    return
                gone_before = gone
                if new:
                    self._seen.update((tp.topic, tp.partition) for tp in new)
                    with self._lock:
                        self._found.extend((tp, stops[tp]) for tp in new)
                    self.has_news = True
        finally:
            consumer.close()

    def _fail(self, failure: KafkaSourceError) -> None:
        with self._lock:
            self._failure = failure
        self.has_news = True

    def take(self) -> list[tuple[KafkaTopicPartition, int]]:
        with self._lock:
            if self._failure is not None:
                raise self._failure
            found, self._found = self._found, []
            self.has_news = False
        return found

    def stop(self) -> None:
        self._stop_event.set()


def _stopping_offsets(
    initializer: KafkaOffsetsInitializer | None,
    tps: Sequence[KafkaTopicPartition],
    lookup: ConsumerLookup,
) -> dict[KafkaTopicPartition, int]:
    if initializer is None:
        return dict.fromkeys(tps, NO_STOPPING_OFFSET)
    return initializer.resolve(tps, lookup)


class KafkaSourceReader(SourceReader):
    """Reads the partitions of one subtask (see the module docstring)."""

    def __init__(
        self, source: KafkaSourceConfig, splits: Sequence[Any], context: SourceReaderContext
    ) -> None:
        assert source.deserializer is not None
        self._source = source
        self._deserialize: Callable[[Any], Any] = source.deserializer.deserialize
        # A deserializer with ``reads_message_key`` gets ``(key, value)``: an upsert reader
        # needs the key, and a tombstone has no value.
        self._with_key = bool(getattr(source.deserializer, "reads_message_key", False))
        # ... and one with ``reads_kafka_message`` the message itself (the Table API's
        # metadata columns: topic, partition, offset, timestamp, headers).
        self._with_message = bool(getattr(source.deserializer, "reads_kafka_message", False))
        self._parallelism = context.parallelism
        self._subtask = context.subtask_index
        self._ignore_errors = source.ignore_parse_errors
        self._commit = source.commit_offsets_on_checkpoint
        self.skipped_records = 0
        self._next: dict[_Key, int] = {}
        self._stop: dict[_Key, int] = {}  # only partitions with a stopping offset
        self._active: set[_Key] = set()
        self._pending_commits: dict[int, list[TopicPartition]] = {}
        self._last_warning = 0.0
        self._ends = source.stopping_offsets is not None and source.discovery_interval_ms <= 0
        conf = source.consumer_config(context.subtask_index, context.job_id)
        conf["on_commit"] = _on_commit
        # librdkafka's own messages (e.g. "partition count changed") go to Python logging.
        conf.setdefault("logger", logging.getLogger("cairn.kafka.librdkafka"))
        try:
            self._consumer = Consumer(conf)
        except KafkaException as exc:
            raise KafkaSourceError(f"invalid Kafka consumer configuration: {exc}") from exc
        try:
            self._start(splits, conf)
        except BaseException:
            self._consumer.close()
            raise

    def _owns(self, tp: KafkaTopicPartition) -> bool:
        return split_owner(tp.topic, tp.partition, self._parallelism) == self._subtask

    def _start(self, splits: Sequence[Any], conf: dict[str, Any]) -> None:
        source = self._source
        timeout = source.api_timeout_s
        restored = any(isinstance(s, KafkaSourceMarker) for s in splits)
        mine: dict[_Key, KafkaPartitionSplit] = {}
        for split in splits:
            if isinstance(split, KafkaPartitionSplit) and self._owns(
                KafkaTopicPartition(split.topic, split.partition)
            ):
                key = (split.topic, split.partition)
                known = mine.get(key)
                if known is None or split.offset > known.offset:
                    mine[key] = split
        lookup = ConsumerLookup(self._consumer, timeout, source.bootstrap_servers)
        found = [tp for tp in list_partitions(source, self._consumer, timeout) if self._owns(tp)]
        new = [tp for tp in found if (tp.topic, tp.partition) not in mine]
        if restored or source.starting_offsets.kind == "earliest":
            starts = dict.fromkeys(new, EARLIEST)  # resolved by the client, no round trip
        else:
            try:
                starts = source.starting_offsets.resolve(new, lookup)
            except NoOffsetError as exc:
                raise KafkaSourceError(str(exc)) from exc
        stops = _stopping_offsets(source.stopping_offsets, new, lookup)
        for tp in new:
            mine[(tp.topic, tp.partition)] = KafkaPartitionSplit(
                tp.topic, tp.partition, starts[tp], stops[tp]
            )
        self._add([s for _, s in sorted(mine.items())])
        self._discovery = _Discovery(source, conf, self._owns, set(mine))
        self._discovery.start()
        log.info(
            "Kafka source subtask %d/%d reads %d partition(s)%s",
            self._subtask,
            self._parallelism,
            len(self._active),
            " (restored)" if restored else "",
        )

    def _add(self, splits: Sequence[KafkaPartitionSplit]) -> None:
        assign = []
        for split in splits:
            key = (split.topic, split.partition)
            self._next[key] = split.offset
            if split.stopping_offset != NO_STOPPING_OFFSET:
                self._stop[key] = split.stopping_offset
            if not split.finished:
                self._active.add(key)
                assign.append(TopicPartition(split.topic, split.partition, split.offset))
        if assign:
            self._consumer.incremental_assign(assign)

    def _finish(self, key: _Key) -> None:
        self._active.discard(key)
        self._consumer.incremental_unassign([TopicPartition(key[0], key[1])])

    # -- SourceReader ----------------------------------------------------------------------

    def poll_batch(self, max_records: int) -> list[Any] | None:
        discovery = self._discovery
        if discovery.has_news:
            self._add(
                [
                    KafkaPartitionSplit(tp.topic, tp.partition, EARLIEST, stop)
                    for tp, stop in discovery.take()
                ]
            )
        if not self._active:
            return None if self._ends else []
        messages: list[Any] = self._consumer.consume(max(1, max_records), timeout=0)
        if not messages:
            if self._stop:
                self._finish_by_position()
                if not self._active and self._ends:
                    return None
            return []
        records: list[Any] = []
        timestamps: list[int | None] = []
        runs: list[tuple[str, int]] = []
        active, next_offsets, stops = self._active, self._next, self._stop
        deserialize = self._deserialize
        if any(m.error() is not None for m in messages):
            for msg in messages:
                if msg.error() is not None:
                    self._on_error(msg)  # raises, or logs a passing one (broker restarting)
            messages = [m for m in messages if m.error() is None]
        # librdkafka hands out messages in runs of one partition: work a run at a time, in
        # comprehensions; a run with an error or an unreadable record goes record by record.
        for key, group in groupby(messages, _partition_of):
            run = list(group)
            if key not in active:
                continue  # fetched before the partition finished (or an error event)
            stop = stops.get(key)
            if stop is not None and run[-1].offset() >= stop - 1:
                run = [m for m in run if m.offset() < stop]
                self._finish(key)
                if not run:
                    continue
            try:
                if self._with_message:
                    values = [deserialize(m) for m in run]
                elif self._with_key:
                    values = [deserialize((m.key(), m.value())) for m in run]
                else:
                    values = [deserialize(m.value()) for m in run]
            except Exception:
                values = self._deserialize_each(run)
            next_offsets[key] = run[-1].offset() + 1
            stamps = [m.timestamp() for m in run]
            if None in values:  # Flink: a deserializer returning null drops the record
                kept = [(v, st) for v, st in zip(values, stamps, strict=True) if v is not None]
                values = [v for v, _ in kept]
                stamps = [st for _, st in kept]
                if not values:
                    continue
            records += values
            timestamps += [ts if kind else None for kind, ts in stamps]
            runs.append((f"{key[0]}-{key[1]}", len(values)))
        if not records and not self._active and self._ends:
            return None
        return SplitBatch.of(records, timestamps, runs)

    def _deserialize_each(self, run: list[Any]) -> list[Any]:
        """The values of ``run`` one by one: an unreadable record fails naming where it is,
        or becomes ``None`` (dropped) with ``ignore-parse-errors``."""
        values = []
        deserialize = self._deserialize
        for msg in run:
            try:
                if self._with_message:
                    message = msg
                else:
                    message = (msg.key(), msg.value()) if self._with_key else msg.value()
                values.append(deserialize(message))
            except Exception as exc:
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if not self._ignore_errors:
                    raise KafkaSourceError(
                        f"could not deserialize the record at topic {topic!r} partition "
                        f"{partition} offset {offset}: {type(exc).__name__}: {exc} (set "
                        "the source property 'ignore-parse-errors' to 'true' to skip such "
                        "records)"
                    ) from exc
                self._skipped(topic, partition, offset, exc)
                values.append(None)
        return values

    def _finish_by_position(self) -> None:
        """A bounded partition whose last offsets are transaction markers (or compacted
        away) never returns a record at ``stop - 1``: its position tells it is done."""
        keys = [k for k in self._active if k in self._stop]
        if not keys:
            return
        positions = self._consumer.position([TopicPartition(t, p) for t, p in keys])
        for tp in positions:
            key = (tp.topic, tp.partition)
            if tp.offset >= 0 and tp.offset >= self._stop[key]:
                self._next[key] = max(self._next[key], tp.offset)
                self._finish(key)

    def _on_error(self, msg: Any) -> None:
        err = msg.error()
        where = f"topic {msg.topic()!r} partition {msg.partition()}" if msg.topic() else ""
        if err.code() in _MISSING:
            raise KafkaSourceError(
                f"Kafka source: {where or 'a topic'} does not exist any more (deleted while "
                f"the job ran?): {err.str()}"
            )
        if err.fatal() or err.code() == KafkaError._AUTO_OFFSET_RESET:
            raise KafkaSourceError(f"Kafka source: {where}: {err.str()}")
        now = time.monotonic()
        if now - self._last_warning > _WARN_EVERY_S:  # e.g. the broker is restarting
            self._last_warning = now
            log.warning("Kafka source subtask %d: %s %s", self._subtask, where, err.str())

    def _skipped(self, topic: str, partition: int, offset: int, exc: Exception) -> None:
        self.skipped_records += 1
        n = self.skipped_records
        if n <= 10 or n % 1000 == 0:
            log.warning(
                "Kafka source skipped an unreadable record (%d so far) at topic %r "
                "partition %d offset %d: %s: %s",
                n,
                topic,
                partition,
                offset,
                type(exc).__name__,
                exc,
            )

    def available_in_s(self) -> float | None:
        return _IDLE_POLL_S if self._active else 0.05

    def split_ids(self) -> list[str]:
        return [f"{t}-{p}" for t, p in sorted(self._active)]

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[Any]:
        splits: list[Any] = [KafkaSourceMarker()]
        commit = []
        for (topic, partition), offset in sorted(self._next.items()):
            stop = self._stop.get((topic, partition), NO_STOPPING_OFFSET)
            splits.append(KafkaPartitionSplit(topic, partition, offset, stop))
            if offset >= 0:
                commit.append(TopicPartition(topic, partition, offset))
        if self._commit and commit:
            self._pending_commits[checkpoint_id] = commit
        return splits

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        due = [c for c in self._pending_commits if c <= checkpoint_id]
        if not due:
            return
        offsets = self._pending_commits[max(due)]
        for c in due:
            del self._pending_commits[c]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:  # monitoring only: never fail the job for it
            log.warning("Kafka source: committing offsets of checkpoint %d: %s", checkpoint_id, exc)

    def close(self) -> None:
        self._discovery.stop()
        self._consumer.close()


def _on_commit(err: Any, partitions: Any) -> None:
    if err is not None:
        log.warning("Kafka source: offsets commit failed (monitoring only): %s", err)
