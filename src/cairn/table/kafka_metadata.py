"""The ``kafka`` connector's metadata columns (Flink's "Available Metadata").

Invariant: a metadata value is read from the Kafka message itself, after the value's
format read the physical columns, and appended in the order the table declares its
metadata columns; a message the format skips (``ignore-parse-errors``) is skipped whole.
The ``timestamp`` column of a sink is each message's timestamp (a NULL one leaves the
record's own); the other keys are read-only.

>>> sorted(KAFKA_READABLE)
['headers', 'leader-epoch', 'offset', 'partition', 'timestamp', 'timestamp-type', 'topic']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cairn.common.serialization import DeserializationSchema
from cairn.table.schema import Schema
from cairn.table.timestamps import epoch_millis, timestamp_of_millis
from cairn.table.types import DataType, DataTypes

__all__ = ["KAFKA_READABLE", "KAFKA_WRITABLE", "MessageRow", "TimestampOf"]

#: What a ``kafka`` table reads, with Flink's types.
KAFKA_READABLE: dict[str, DataType] = {
    "topic": DataTypes.STRING(False),
    "partition": DataTypes.INT(False),
    "headers": DataTypes.MAP(DataTypes.STRING(False), DataTypes.BYTES(), False),
    "leader-epoch": DataTypes.INT(),
    "offset": DataTypes.BIGINT(False),
    "timestamp": DataTypes.TIMESTAMP_LTZ(3, False),
    "timestamp-type": DataTypes.STRING(False),
}
#: What a ``kafka`` sink writes (Flink's writes ``headers`` too: not built yet).
KAFKA_WRITABLE: dict[str, DataType] = {"timestamp": DataTypes.TIMESTAMP_LTZ(3, False)}

# confluent-kafka's timestamp types (0 none, 1 create time, 2 log append time), Kafka's names
_TIMESTAMP_TYPES = ("NoTimestampType", "CreateTime", "LogAppendTime")


def _timestamp(message: Any) -> Any:
    kind, millis = message.timestamp()
    return timestamp_of_millis(millis) if kind else None


def _headers(message: Any) -> dict[str, bytes | None]:
    return {k: v for k, v in message.headers() or ()}


def _leader_epoch(message: Any) -> int | None:
    epoch = message.leader_epoch()
    return None if epoch is None or epoch < 0 else int(epoch)


_READERS: dict[str, Callable[[Any], Any]] = {
    "topic": lambda m: m.topic(),
    "partition": lambda m: m.partition(),
    "headers": _headers,
    "leader-epoch": _leader_epoch,
    "offset": lambda m: m.offset(),
    "timestamp": _timestamp,
    "timestamp-type": lambda m: _TIMESTAMP_TYPES[m.timestamp()[0]],
}


class MessageRow(DeserializationSchema):
    """A Kafka message as its value's row followed by the metadata of ``keys``."""

    reads_kafka_message = True  # the source hands over the message, not only its value

    def __init__(self, value: DeserializationSchema, keys: Sequence[str]) -> None:
        self.value = value
        self.keys = tuple(keys)
        self.ignore_parse_errors = bool(getattr(value, "ignore_parse_errors", False))

    def deserialize(self, message: Any) -> Any:
        row = self.value.deserialize(message.value())
        if row is None:
            return None
        return (*tuple(row), *(_READERS[k](message) for k in self.keys))


def metadata_keys(schema: Schema | None) -> list[str]:
    """The metadata keys a ``kafka`` source appends, in declared order."""
    return [] if schema is None else [c.key for c in schema.metadata_columns()]


class TimestampOf:
    """A sink message's timestamp (epoch ms) from its ``(key, value, timestamp)`` parts."""

    def __call__(self, element: Any) -> int | None:
        at = element[2]
        return None if at is None else epoch_millis(at)
