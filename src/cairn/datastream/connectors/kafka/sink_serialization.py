"""How the Kafka sink turns a record into a Kafka message (PyFlink's
``KafkaRecordSerializationSchema`` and its builder, ``KafkaTopicSelector``, and Flink's
``FlinkKafkaPartitioner`` as ``KafkaPartitioner``).

Invariant: a schema is a picklable value built and checked on the driver (a value
serializer and exactly one of a fixed topic or a topic selector); on the workers
``serialize`` is a pure function of the record and the target topic's partitions.

>>> from cairn.common.serialization import SimpleStringSchema
>>> schema = (KafkaRecordSerializationSchema.builder()
...     .set_topic("words")
...     .set_key_serialization_schema(SimpleStringSchema())
...     .set_value_serialization_schema(SimpleStringSchema())
...     .build())
>>> schema.serialize("cairn", lambda topic: [0, 1])
('words', b'cairn', b'cairn', None)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from cairn.common.serialization import SerializationSchema

__all__ = [
    "FixedPartitioner",
    "KafkaPartitioner",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaTopicSelector",
    "SerializedRecord",
]

# (topic, key, value, partition or None: librdkafka's partitioner, by key hash)
SerializedRecord = tuple[str, bytes | None, bytes | None, int | None]


class KafkaTopicSelector(ABC):
    """Selects the topic of an incoming record (PyFlink's ``KafkaTopicSelector``)."""

    @abstractmethod
    def apply(self, data: Any) -> str: ...


class _FunctionTopicSelector(KafkaTopicSelector):
    def __init__(self, f: Callable[[Any], str]) -> None:
        self._f = f

    def apply(self, data: Any) -> str:
        return self._f(data)


class KafkaPartitioner(ABC):
    """Chooses the partition of each message (Flink's ``FlinkKafkaPartitioner``).

    ``open`` is called once per sink subtask before the first record; ``partition`` returns
    one of ``partitions`` (the target topic's partition ids, ascending). Without a
    partitioner librdkafka's own decides: by a hash of the key, at random without a key.
    """

    def open(self, parallel_instance_id: int, parallel_instances: int) -> None:  # noqa: B027
        """Called on the worker before the first record."""

    @abstractmethod
    def partition(
        self,
        record: Any,
        key: bytes | None,
        value: bytes | None,
        target_topic: str,
        partitions: Sequence[int],
    ) -> int: ...


class FixedPartitioner(KafkaPartitioner):
    """Each sink subtask writes to one partition: subtask ``i`` to partition
    ``i mod len(partitions)`` (Flink's ``FlinkFixedPartitioner``).

    >>> p = FixedPartitioner()
    >>> p.open(3, 4)
    >>> p.partition("r", None, b"r", "t", [0, 1])
    1
    """

    def __init__(self) -> None:
        self._subtask = 0

    def open(self, parallel_instance_id: int, parallel_instances: int) -> None:
        self._subtask = parallel_instance_id

    def partition(
        self,
        record: Any,
        key: bytes | None,
        value: bytes | None,
        target_topic: str,
        partitions: Sequence[int],
    ) -> int:
        return partitions[self._subtask % len(partitions)]


class _FunctionPartitioner(KafkaPartitioner):
    def __init__(self, f: Callable[..., int]) -> None:
        self._f = f

    def partition(
        self,
        record: Any,
        key: bytes | None,
        value: bytes | None,
        target_topic: str,
        partitions: Sequence[int],
    ) -> int:
        return self._f(record, key, value, target_topic, partitions)


class KafkaRecordSerializationSchema:
    """Converts a stream record into a Kafka message: topic, key, value, partition.

    Build it with :meth:`builder`. ``serialize(element, partitions_of)`` returns
    ``(topic, key, value, partition)``; ``partitions_of(topic)`` is only called when a
    partitioner is set.
    """

    def __init__(
        self,
        topic: str | None,
        topic_selector: KafkaTopicSelector | None,
        key_schema: SerializationSchema | None,
        value_schema: SerializationSchema,
        partitioner: KafkaPartitioner | None,
        timestamp_selector: Callable[[Any], int | None] | None = None,
    ) -> None:
        self.topic = topic
        self.topic_selector = topic_selector
        self.key_schema = key_schema
        self.value_schema = value_schema
        self.partitioner = partitioner
        self.timestamp_selector = timestamp_selector

    @staticmethod
    def builder() -> KafkaRecordSerializationSchemaBuilder:
        """A builder: a topic (or topic selector) and a value serializer are required."""
        return KafkaRecordSerializationSchemaBuilder()

    def open(self, subtask_index: int, parallelism: int) -> None:
        """Prepare for serializing on a worker (opens the partitioner)."""
        if self.partitioner is not None:
            self.partitioner.open(subtask_index, parallelism)

    def serialize(
        self, element: Any, partitions_of: Callable[[str], Sequence[int]]
    ) -> SerializedRecord:
        topic = self.topic if self.topic_selector is None else self.topic_selector.apply(element)
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"Kafka sink: the topic selector returned {topic!r} for {element!r}")
        key = None if self.key_schema is None else self.key_schema.serialize(element)
        value = self.value_schema.serialize(element)
        partition = None
        if self.partitioner is not None:
            partitions = partitions_of(topic)
            partition = self.partitioner.partition(element, key, value, topic, partitions)
            if partition not in partitions:
                raise ValueError(
                    f"Kafka sink: the partitioner chose partition {partition!r} of topic "
                    f"{topic!r}, which has partitions {list(partitions)}"
                )
        return topic, key, value, partition


class KafkaRecordSerializationSchemaBuilder:
    """Builder of :class:`KafkaRecordSerializationSchema` (PyFlink's names).

    >>> KafkaRecordSerializationSchema.builder().set_topic("t").build()
    Traceback (most recent call last):
    ...
    ValueError: KafkaRecordSerializationSchema needs a value serialization schema \
(set_value_serialization_schema)
    """

    def __init__(self) -> None:
        self._topic: str | None = None
        self._selector: KafkaTopicSelector | None = None
        self._key: SerializationSchema | None = None
        self._value: SerializationSchema | None = None
        self._partitioner: KafkaPartitioner | None = None
        self._timestamp: Callable[[Any], int | None] | None = None

    def set_topic(self, topic: str) -> KafkaRecordSerializationSchemaBuilder:
        """A fixed topic for every record."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"a Kafka topic must be a non-empty string, got {topic!r}")
        self._topic, self._selector = topic, None
        return self

    def set_topic_selector(
        self, topic_selector: Callable[[Any], str] | KafkaTopicSelector
    ) -> KafkaRecordSerializationSchemaBuilder:
        """A topic computed from each record (a ``KafkaTopicSelector`` or a function)."""
        if isinstance(topic_selector, KafkaTopicSelector):
            self._selector = topic_selector
        elif callable(topic_selector):
            self._selector = _FunctionTopicSelector(topic_selector)
        else:
            raise TypeError("topic_selector must be KafkaTopicSelector or a callable")
        self._topic = None
        return self

    def set_key_serialization_schema(
        self, key_serialization_schema: SerializationSchema
    ) -> KafkaRecordSerializationSchemaBuilder:
        """Serializes each record into the message key (optional: no key by default)."""
        self._key = _schema(key_serialization_schema, "key")
        return self

    def set_value_serialization_schema(
        self, value_serialization_schema: SerializationSchema
    ) -> KafkaRecordSerializationSchemaBuilder:
        """Serializes each record into the message value (required)."""
        self._value = _schema(value_serialization_schema, "value")
        return self

    def set_partitioner(
        self, partitioner: KafkaPartitioner | Callable[..., int]
    ) -> KafkaRecordSerializationSchemaBuilder:
        """Chooses each message's partition (Java's ``setPartitioner``): a
        ``KafkaPartitioner`` or a function ``(record, key, value, topic, partitions) -> int``.
        """
        if isinstance(partitioner, KafkaPartitioner):
            self._partitioner = partitioner
        elif callable(partitioner):
            self._partitioner = _FunctionPartitioner(partitioner)
        else:
            raise TypeError("partitioner must be a KafkaPartitioner or a callable")
        return self

    def set_timestamp_selector(
        self, timestamp_selector: Callable[[Any], int | None]
    ) -> KafkaRecordSerializationSchemaBuilder:
        """Each message's timestamp (epoch ms) from its record, ``None`` for the record's own
        timestamp (Cairn's; the Table API's ``timestamp`` metadata column writes it, as
        Flink's ``ProducerRecord`` timestamp)."""
        if not callable(timestamp_selector):
            raise TypeError("timestamp_selector must be a callable")
        self._timestamp = timestamp_selector
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        if self._value is None:
            raise ValueError(
                "KafkaRecordSerializationSchema needs a value serialization schema "
                "(set_value_serialization_schema)"
            )
        if self._topic is None and self._selector is None:
            raise ValueError(
                "KafkaRecordSerializationSchema needs a topic (set_topic or set_topic_selector)"
            )
        return KafkaRecordSerializationSchema(
            self._topic,
            self._selector,
            self._key,
            self._value,
            self._partitioner,
            self._timestamp,
        )


def _schema(schema: Any, what: str) -> SerializationSchema:
    if not callable(getattr(schema, "serialize", None)):
        raise TypeError(
            f"the {what} serialization schema must have serialize(element) -> bytes "
            f"(e.g. SimpleStringSchema()), got {type(schema).__name__}"
        )
    return schema  # type: ignore[no-any-return]
