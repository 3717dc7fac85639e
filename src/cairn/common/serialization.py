"""Record (de)serializers with PyFlink's names (``pyflink.common.serialization``).

Invariant: every schema, encoder and writer factory here is a small picklable value; the
stateful part (an open ``BulkWriter``) is created on the worker from a factory and lives for
exactly one part file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, BinaryIO

__all__ = [
    "BulkWriter",
    "BulkWriterFactory",
    "ByteArraySchema",
    "DeserializationSchema",
    "Encoder",
    "RowFieldExtractorSchema",
    "SerializationSchema",
    "SimpleStringEncoder",
    "SimpleStringSchema",
]


class SerializationSchema(ABC):
    """Turns a record into bytes (e.g. the value of a Kafka message)."""

    @abstractmethod
    def serialize(self, element: Any) -> bytes: ...


class DeserializationSchema(ABC):
    """Turns bytes back into a record."""

    @abstractmethod
    def deserialize(self, message: bytes) -> Any: ...


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings to bytes and back in one charset (UTF-8 by default).

    >>> schema = SimpleStringSchema()
    >>> schema.deserialize(schema.serialize("héllo"))
    'héllo'
    """

    def __init__(self, charset: str = "UTF-8") -> None:
        "".encode(charset)  # fail on the driver for an unknown charset, not on a worker
        self.charset = charset

    def serialize(self, element: Any) -> bytes:
        return str(element).encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return message.decode(self.charset)


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Bytes as they are, both ways (PyFlink's ``ByteArraySchema``, Flink 2.0).

    >>> ByteArraySchema().deserialize(ByteArraySchema().serialize(b"\\x00raw"))
    b'\\x00raw'
    """

    def serialize(self, element: Any) -> bytes:
        if not isinstance(element, bytes | bytearray | memoryview):
            raise TypeError(
                f"ByteArraySchema serializes bytes, got {type(element).__name__} {element!r}"
            )
        return bytes(element)

    def deserialize(self, message: bytes) -> bytes:
        return bytes(message)


class RowFieldExtractorSchema(SerializationSchema):
    """One field of a ``Row`` (or tuple), which must hold bytes, as the message
    (PyFlink's ``RowFieldExtractorSchema``): e.g. field 0 as the Kafka key, field 1 as the
    value. A ``None`` record or field gives ``b""``, as in Flink.

    >>> from cairn.common.types import Row
    >>> RowFieldExtractorSchema(1).serialize(Row(b"user-1", b'{"n": 1}'))
    b'{"n": 1}'
    >>> RowFieldExtractorSchema(0).serialize(Row("user-1", b""))
    Traceback (most recent call last):
    ...
    TypeError: RowFieldExtractorSchema: field 0 must be of type bytes, got str 'user-1'
    """

    def __init__(self, field_index: int) -> None:
        if isinstance(field_index, bool) or not isinstance(field_index, int) or field_index < 0:
            raise ValueError(f"field index must be a non-negative int, got {field_index!r}")
        self.field_index = field_index

    def serialize(self, element: Any) -> bytes:
        if element is None:
            return b""
        if self.field_index >= len(element):
            raise IndexError(
                f"RowFieldExtractorSchema: field {self.field_index} is out of range for a "
                f"row of {len(element)} fields: {element!r}"
            )
        value = element[self.field_index]
        if value is None:
            return b""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(
                f"RowFieldExtractorSchema: field {self.field_index} must be of type bytes, "
                f"got {type(value).__name__} {value!r}"
            )
        return bytes(value)


class Encoder(ABC):
    """Writes one record of a row-format ``FileSink`` part file.

    >>> Encoder.simple_string_encoder().encode(42)
    b'42\\n'
    """

    @abstractmethod
    def encode(self, element: Any) -> bytes:
        """The bytes of one record, including its delimiter."""

    def encode_batch(self, elements: Sequence[Any]) -> bytes:
        """The bytes of several records (override for a faster path)."""
        return b"".join(self.encode(e) for e in elements)

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        """``str(record)`` followed by a newline, encoded in ``charset_name``."""
        return SimpleStringEncoder(charset_name)


class SimpleStringEncoder(Encoder):
    """``str(record) + "\\n"`` in one charset (Flink's ``SimpleStringEncoder``)."""

    def __init__(self, charset_name: str = "UTF-8") -> None:
        "".encode(charset_name)
        self.charset_name = charset_name

    def encode(self, element: Any) -> bytes:
        return (str(element) + "\n").encode(self.charset_name)

    def encode_batch(self, elements: Sequence[Any]) -> bytes:
        if not elements:
            return b""
        # One join and one encode per batch instead of one per record.
        return ("\n".join(map(str, elements)) + "\n").encode(self.charset_name)


class BulkWriter(ABC):
    """Writes the records of one part file of a bulk format (e.g. Parquet) to a stream.

    The stream belongs to the caller: ``finish`` completes the file format (footers) and
    flushes, but does not close the stream.
    """

    @abstractmethod
    def add_element(self, element: Any) -> None: ...

    def add_elements(self, elements: Sequence[Any]) -> None:
        for element in elements:
            self.add_element(element)

    @abstractmethod
    def flush(self) -> None:
        """Write buffered records to the stream (may end a block/row group early)."""

    @abstractmethod
    def finish(self) -> None:
        """Write everything including trailers; nothing may be added afterwards."""


class BulkWriterFactory(ABC):
    """A picklable factory of ``BulkWriter`` objects, one per part file."""

    @abstractmethod
    def create(self, stream: BinaryIO) -> BulkWriter: ...
