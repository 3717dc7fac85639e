"""The Kafka source with PyFlink's names (``pyflink.datastream.connectors.kafka``).

Invariant: a ``KafkaSource`` is an immutable, picklable description built on the driver;
everything it reads is decided on the workers by ``KafkaSourceReader``s, one per subtask,
each owning the partitions ``split_owner`` gives it, and the partitions' next offsets are
the checkpointed split state (``union`` redistribution: any parallelism on restore).

>>> from cairn.common.serialization import SimpleStringSchema
>>> source = (KafkaSource.builder()
...     .set_bootstrap_servers("127.0.0.1:9092")
...     .set_topics("orders")
...     .set_group_id("shop")
...     .set_starting_offsets(KafkaOffsetsInitializer.earliest())
...     .set_value_only_deserializer(SimpleStringSchema())
...     .build())
>>> source.is_bounded(), source.discovery_interval_ms, source.commit_offsets_on_checkpoint
(False, 300000, True)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from cairn.api.connectors import Source, SourceReader, SourceReaderContext
from cairn.common.exceptions import require_module
from cairn.common.serialization import DeserializationSchema
from cairn.datastream.connectors.kafka.offsets import (
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)
from cairn.datastream.connectors.kafka.source_config import KafkaSourceConfig, KafkaSourceOptions

__all__ = ["KafkaSource", "KafkaSourceBuilder", "KafkaSourceOptions"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaSource(KafkaSourceConfig, Source):
    """Reads Kafka topics; build it with ``KafkaSource.builder()`` (see the module).

    Each Kafka partition is a split. Every subtask lists the topics itself (at start and every
    ``partition.discovery.interval.ms``) and reads the partitions it owns by Flink's
    assignment, with one librdkafka consumer on ``assign()`` (no group rebalancing: the
    group id only names where offsets are committed, for monitoring). Records are the
    deserialized values; their Kafka timestamps reach a ``WatermarkStrategy``'s
    ``TimestampAssigner`` as ``record_timestamp``, and watermarks are generated per
    partition and merged by the minimum (idle partitions with ``with_idleness``).
    """

    split_redistribution = "union"

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        """A builder (PyFlink's ``KafkaSource.builder()``)."""
        return KafkaSourceBuilder()

    def config(self) -> KafkaSourceConfig:
        """The options alone: what the readers receive."""
        return KafkaSourceConfig(
            **{f.name: getattr(self, f.name) for f in fields(KafkaSourceConfig)}
        )

    # -- Source --------------------------------------------------------------------------

    def is_bounded(self) -> bool:
        return self.bounded

    def create_splits(self, parallelism: int) -> list[Any]:
        # Nothing to hand out: each reader discovers and resolves its own partitions.
        return []

    def create_reader(self, splits: Sequence[Any], context: SourceReaderContext) -> SourceReader:
        from cairn.datastream.connectors.kafka.source_reader import KafkaSourceReader

        return KafkaSourceReader(self.config(), splits, context)


class KafkaSourceBuilder:
    """PyFlink's ``KafkaSourceBuilder``: bootstrap servers, topics (or a pattern, or
    partitions) and a value deserializer are required."""

    def __init__(self) -> None:
        self._servers: str | None = None
        self._topics: tuple[str, ...] = ()
        self._pattern: str | None = None
        self._partitions: tuple[KafkaTopicPartition, ...] = ()
        self._group_id: str | None = None
        self._deserializer: DeserializationSchema | None = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: KafkaOffsetsInitializer | None = None
        self._bounded = False
        self._properties: dict[str, str] = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSourceBuilder:
        """``host:port[,host:port...]`` of the Kafka cluster."""
        if not isinstance(bootstrap_servers, str) or not bootstrap_servers.strip():
            raise ValueError("bootstrap servers must be a non-empty 'host:port,...' string")
        self._servers = bootstrap_servers
        return self

    def set_group_id(self, group_id: str) -> KafkaSourceBuilder:
        """The consumer group the checkpointed offsets are committed to (monitoring only)."""
        self._group_id = group_id
        return self

    def set_topics(self, *topics: str) -> KafkaSourceBuilder:
        """Read these topics; each must exist when the job starts."""
        if len(topics) == 1 and isinstance(topics[0], (list, tuple)):
            topics = tuple(topics[0])
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise ValueError(f"set_topics needs topic names, got {topics!r}")
        self._topics, self._pattern, self._partitions = tuple(topics), None, ()
        return self

    def set_topic_pattern(self, topic_pattern: str) -> KafkaSourceBuilder:
        """Read every topic whose whole name matches ``topic_pattern`` (a regular
        expression), including topics created while the job runs (discovery)."""
        re.compile(topic_pattern)
        self._topics, self._pattern, self._partitions = (), topic_pattern, ()
        return self

    def set_partitions(self, partitions: set[KafkaTopicPartition]) -> KafkaSourceBuilder:
        """Read exactly these partitions."""
        parts = tuple(sorted(partitions))
        if not parts or not all(isinstance(p, KafkaTopicPartition) for p in parts):
            raise ValueError("set_partitions needs a non-empty set of KafkaTopicPartition")
        self._topics, self._pattern, self._partitions = (), None, parts
        return self

    def set_starting_offsets(
        self, starting_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """Where a fresh start begins (default: earliest); a restore resumes at the
        checkpointed offsets, and partitions first seen later start at the earliest."""
        self._starting = _initializer(starting_offsets_initializer)
        return self

    def set_unbounded(
        self, stopping_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """Stay a streaming source but stop each partition at these offsets."""
        self._stopping = _initializer(stopping_offsets_initializer)
        self._bounded = False
        return self

    def set_bounded(
        self, stopping_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """A bounded source: each partition stops at these offsets (resolved when first
        seen, kept in checkpoints), and the source ends when all did; no discovery."""
        self._stopping = _initializer(stopping_offsets_initializer)
        self._bounded = True
        return self

    def set_value_only_deserializer(
        self, deserialization_schema: DeserializationSchema
    ) -> KafkaSourceBuilder:
        """Records are ``deserialization_schema.deserialize(value)``; keys are ignored. A
        ``None`` result skips the record (Flink's way to drop corrupt messages). A schema
        whose ``reads_message_key`` is true gets ``(key, value)`` instead (Flink's
        ``KafkaRecordDeserializationSchema``: the Table API's upsert reader needs keys)."""
        if not callable(getattr(deserialization_schema, "deserialize", None)):
            raise TypeError("the deserializer must have deserialize(bytes)")
        self._deserializer = deserialization_schema
        return self

    def set_client_id_prefix(self, prefix: str) -> KafkaSourceBuilder:
        """Client ids are ``<prefix>-<subtask>``."""
        return self.set_property(KafkaSourceOptions.CLIENT_ID_PREFIX, prefix)

    def set_property(self, key: str, value: str) -> KafkaSourceBuilder:
        """A librdkafka consumer property or one of ``KafkaSourceOptions``. Keys the source
        sets itself (``enable.auto.commit``, ``group.id``, ``client.id``, ...) are
        overridden; Java-only keys (``key.deserializer``...) are ignored."""
        self._properties[str(key)] = str(value)
        return self

    def set_properties(self, props: dict[str, str]) -> KafkaSourceBuilder:
        for key, value in props.items():
            self.set_property(key, value)
        return self

    def build(self) -> KafkaSource:
        require_module("confluent_kafka", "KafkaSource", "kafka")
        # As in Flink, the client keys may come as properties instead of setters.
        props = dict(self._properties)
        servers = self._servers or props.pop("bootstrap.servers", None)
        group_id = self._group_id or props.pop("group.id", None)
        if servers is None:
            raise ValueError("KafkaSource needs set_bootstrap_servers(...)")
        if not (self._topics or self._pattern or self._partitions):
            raise ValueError(
                "KafkaSource needs set_topics(...), set_topic_pattern(...) or set_partitions(...)"
            )
        if self._deserializer is None:
            raise ValueError("KafkaSource needs set_value_only_deserializer(...)")
        if self._starting.kind == "committed" and group_id is None:
            raise ValueError("committed_offsets() needs set_group_id(...)")
        source = KafkaSource(
            bootstrap_servers=servers,
            topics=self._topics,
            topic_pattern=self._pattern,
            partitions=self._partitions,
            group_id=group_id,
            deserializer=self._deserializer,
            starting_offsets=self._starting,
            stopping_offsets=self._stopping,
            bounded=self._bounded,
            properties=tuple(sorted(props.items())),
        )
        # Parse the source's own options now: a typo fails on the driver, not on a worker.
        _ = (source.discovery_interval_ms, source.commit_offsets_on_checkpoint)
        _ = (source.api_timeout_s, source.ignore_parse_errors)
        return source


def _initializer(value: KafkaOffsetsInitializer) -> KafkaOffsetsInitializer:
    if not isinstance(value, KafkaOffsetsInitializer):
        raise TypeError(f"expected a KafkaOffsetsInitializer, got {value!r}")
    return value
