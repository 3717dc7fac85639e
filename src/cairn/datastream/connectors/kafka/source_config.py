"""A Kafka source's options as one frozen value: what its readers receive.

Invariant: immutable and picklable; the readers (``source_reader``) get a
``KafkaSourceConfig``, never the ``KafkaSource`` (which subclasses it and adds the ``Source``
methods), so the reader module does not import the source that creates it. Options are parsed
on demand, and the builder parses them once on the driver.

>>> c = KafkaSourceConfig("h:9092", topics=("orders",), properties=(("client.id.prefix", "x"),))
>>> c.matches("orders"), c.client_id(3), c.discovery_interval_ms
(True, 'x-3', 300000)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cairn.common.serialization import DeserializationSchema
from cairn.datastream.connectors.kafka.offsets import (
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)

__all__ = ["KafkaSourceConfig", "KafkaSourceOptions"]


class KafkaSourceOptions:
    """The source's own keys for ``set_property`` (never passed to the Kafka client).

    ``partition.discovery.interval.ms`` (default 300000; ``-1``/``0`` off; always off with
    ``set_bounded``), ``commit.offsets.on.checkpoint`` (default ``true``; only with a group
    id), ``client.id.prefix``, ``register.consumer.metrics`` (accepted, ignored),
    ``default.api.timeout.ms`` (Java's consumer key: how long metadata and offset look-ups
    may take before the source fails with a clear error; default 60000), and Cairn's
    ``ignore-parse-errors`` (default ``false``: a record the deserializer cannot read fails
    the job naming topic, partition and offset; ``true``: it is skipped, logged and counted).
    """

    PARTITION_DISCOVERY_INTERVAL_MS = "partition.discovery.interval.ms"
    COMMIT_OFFSETS_ON_CHECKPOINT = "commit.offsets.on.checkpoint"
    CLIENT_ID_PREFIX = "client.id.prefix"
    REGISTER_CONSUMER_METRICS = "register.consumer.metrics"
    DEFAULT_API_TIMEOUT_MS = "default.api.timeout.ms"
    IGNORE_PARSE_ERRORS = "ignore-parse-errors"


_SOURCE_KEYS = frozenset(
    v for k, v in vars(KafkaSourceOptions).items() if k.isupper() and isinstance(v, str)
)
# Java consumer keys that librdkafka does not know; the builder sets what they mean itself.
_JAVA_ONLY_KEYS = frozenset(
    {"key.deserializer", "value.deserializer", "max.poll.records", "auto.offset.reset.strategy"}
)
_DEFAULT_DISCOVERY_MS = 300_000
_DEFAULT_API_TIMEOUT_MS = 60_000


def _truthy(value: str, key: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"{key} must be true or false, got {value!r}")


@dataclass(frozen=True)
class KafkaSourceConfig:
    """What a Kafka source reads and how: servers, topics (or pattern, or partitions), group,
    deserializer, starting and stopping offsets, the consumer properties."""

    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    partitions: tuple[KafkaTopicPartition, ...] = ()
    group_id: str | None = None
    deserializer: DeserializationSchema | None = None
    starting_offsets: KafkaOffsetsInitializer = field(
        default_factory=KafkaOffsetsInitializer.earliest
    )
    stopping_offsets: KafkaOffsetsInitializer | None = None
    bounded: bool = False
    properties: tuple[tuple[str, str], ...] = ()

    def _property(self, key: str) -> str | None:
        for k, v in self.properties:
            if k == key:
                return v
        return None

    @property
    def discovery_interval_ms(self) -> int:
        """Partition discovery period; ``<= 0``: only at start."""
        if self.bounded:
            return -1
        value = self._property(KafkaSourceOptions.PARTITION_DISCOVERY_INTERVAL_MS)
        return _DEFAULT_DISCOVERY_MS if value is None else int(value)

    @property
    def commit_offsets_on_checkpoint(self) -> bool:
        value = self._property(KafkaSourceOptions.COMMIT_OFFSETS_ON_CHECKPOINT)
        enabled = True if value is None else _truthy(value, "commit.offsets.on.checkpoint")
        return enabled and self.group_id is not None

    @property
    def api_timeout_s(self) -> float:
        value = self._property(KafkaSourceOptions.DEFAULT_API_TIMEOUT_MS)
        return (_DEFAULT_API_TIMEOUT_MS if value is None else int(value)) / 1000.0

    @property
    def ignore_parse_errors(self) -> bool:
        value = self._property(KafkaSourceOptions.IGNORE_PARSE_ERRORS)
        return False if value is None else _truthy(value, "ignore-parse-errors")

    def client_id(self, subtask_index: int) -> str:
        """Flink's ``<client.id.prefix>-<subtask>``; the prefix defaults to the group id."""
        prefix = self._property(KafkaSourceOptions.CLIENT_ID_PREFIX)
        return f"{prefix or self.group_id or 'KafkaSource'}-{subtask_index}"

    def consumer_config(self, subtask_index: int, job_id: str) -> dict[str, Any]:
        """librdkafka's configuration for the reader of ``subtask_index``."""
        conf: dict[str, Any] = {
            # Java's default (librdkafka's is read_committed): set read_committed to read
            # only committed transactions, as an exactly-once pipeline downstream of a
            # transactional producer should.
            "isolation.level": "read_uncommitted",
        }
        for key, value in self.properties:
            if key not in _SOURCE_KEYS and key not in _JAVA_ONLY_KEYS:
                conf[key] = value
        conf.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                # librdkafka needs a group id even for assign(); offsets go to it only when
                # the user named it (commit.offsets.on.checkpoint).
                "group.id": self.group_id or f"cairn-kafka-source-{job_id}",
                "client.id": self.client_id(subtask_index),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                "auto.offset.reset": self.starting_offsets.auto_offset_reset(),
            }
        )
        return conf

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is read (set_topics / set_topic_pattern; internal topics never)."""
        if self.topic_pattern is not None:
            return (
                not topic.startswith("__") and re.fullmatch(self.topic_pattern, topic) is not None
            )
        return topic in self.topics
