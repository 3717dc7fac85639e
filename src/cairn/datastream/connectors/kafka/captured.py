"""Kafka records captured from a partition, as raw bytes, and their file: one Parquet file
per partition (``cairn chaos`` captures a prefix of a topic, then replays it).

Invariant: a ``CapturedMessage`` answers what a deserializer asks of a librdkafka message
(``key()``, ``value()``, ``timestamp()``, ``headers()``, ``topic()``, ``partition()``,
``offset()``, ``leader_epoch()``) with exactly the bytes and metadata the broker returned,
and ``write_partition``/``read_partition`` round-trip a partition's messages unchanged, in
offset order.

>>> import os, tempfile
>>> m = CapturedMessage("orders", 1, 7, (1, 1_700_000_000_000), b"k", b"v", [("h", b"x")])
>>> path = os.path.join(tempfile.mkdtemp(), "orders-1.parquet")
>>> write_partition(path, [m])
>>> back = read_partition(path)[0]
>>> back == m, back.value(), back.timestamp(), back.headers()
(True, b'v', (1, 1700000000000), [('h', b'x')])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CapturedMessage", "read_partition", "write_partition"]

Headers = list[tuple[str, bytes | None]] | None


class CapturedMessage:
    """One Kafka record as the broker gave it (librdkafka's ``Message`` interface)."""

    __slots__ = (
        "_epoch",
        "_headers",
        "_key",
        "_offset",
        "_partition",
        "_stamp",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: tuple[int, int],
        key: bytes | None,
        value: bytes | None,
        headers: Headers = None,
        leader_epoch: int | None = None,
    ) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._stamp = (int(timestamp[0]), int(timestamp[1]))
        self._key, self._value, self._headers = key, value, headers
        self._epoch = leader_epoch

    @staticmethod
    def of(message: Any) -> CapturedMessage:
        """A copy of a librdkafka ``Message`` (or anything with its methods)."""
        headers = message.headers()
        epoch = message.leader_epoch()
        return CapturedMessage(
            message.topic(),
            message.partition(),
            message.offset(),
            message.timestamp(),
            message.key(),
            message.value(),
            None if headers is None else [(str(k), v) for k, v in headers],
            None if epoch is None or epoch < 0 else int(epoch),
        )

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        """``(type, epoch ms)``: type 0 none, 1 create time, 2 log append time."""
        return self._stamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers:
        return None if self._headers is None else list(self._headers)

    def leader_epoch(self) -> int | None:
        return self._epoch

    def error(self) -> None:
        return None

    def _fields(self) -> tuple[Any, ...]:
        headers = None if self._headers is None else tuple(self._headers)
        return (
            self._topic,
            self._partition,
            self._offset,
            self._stamp,
            self._key,
            self._value,
            headers,
            self._epoch,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CapturedMessage) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"CapturedMessage({self._topic!r}, {self._partition}, {self._offset})"


def _schema() -> Any:
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp_type", pa.int8()),
            ("timestamp", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(header)),
            ("leader_epoch", pa.int32()),
        ]
    )


def write_partition(path: str, messages: Sequence[CapturedMessage]) -> None:
    """Write one partition's ``messages`` (in offset order) to the Parquet file ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {
        "topic": [m.topic() for m in messages],
        "partition": [m.partition() for m in messages],
        "offset": [m.offset() for m in messages],
        "timestamp_type": [m.timestamp()[0] for m in messages],
        "timestamp": [m.timestamp()[1] for m in messages],
        "key": [m.key() for m in messages],
        "value": [m.value() for m in messages],
        "headers": [
            None if h is None else [{"key": k, "value": v} for k, v in h]
            for h in (m.headers() for m in messages)
        ],
        "leader_epoch": [m.leader_epoch() for m in messages],
    }
    pq.write_table(pa.table(columns, schema=_schema()), path)


def read_partition(path: str) -> list[CapturedMessage]:
    """The messages ``write_partition`` wrote to ``path``, in the same order."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, schema=_schema())
    c = {name: table.column(name).to_pylist() for name in table.column_names}
    return [
        CapturedMessage(
            c["topic"][i],
            c["partition"][i],
            c["offset"][i],
            (c["timestamp_type"][i], c["timestamp"][i]),
            c["key"][i],
            c["value"][i],
            None if c["headers"][i] is None else [(h["key"], h["value"]) for h in c["headers"][i]],
            c["leader_epoch"][i],
        )
        for i in range(table.num_rows)
    ]
