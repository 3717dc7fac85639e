"""Avro at PyFlink's module path (``pyflink.datastream.formats.avro``), on fastavro: the
row schemas for messages (Kafka), and Avro container files for the file connector.

Invariant: every format here is a picklable value holding the schema's JSON; files are
Avro object container files (header, schema, blocks), read as generic records (dicts) and
written from dicts or ``Row``s; a record that does not fit the schema fails naming the field
and the value.

>>> schema = AvroSchema.parse_string('''{"type": "record", "name": "User", "fields": [
...     {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}''')
>>> GenericRecordAvroTypeInfo(schema)
GenericRecordAvroTypeInfo(User)
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

import fastavro
from fastavro.write import Writer

from cairn.common.formats.avro import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
    AvroSchema,
    describe_mismatch,
    to_avro,
)
from cairn.common.serialization import BulkWriter, BulkWriterFactory
from cairn.common.typeinfo import TypeInformation
from cairn.datastream.connectors.formats import BulkFormat

__all__ = [
    "AvroBulkWriters",
    "AvroInputFormat",
    "AvroRowDeserializationSchema",
    "AvroRowSerializationSchema",
    "AvroSchema",
    "AvroWriters",
    "GenericRecordAvroTypeInfo",
]

_BATCH = 1024


class GenericRecordAvroTypeInfo(TypeInformation):
    """The type of Avro generic records (dicts) of a schema (PyFlink's name). Cairn needs no
    such declaration before an Avro sink: records are Python values all the way."""

    def __init__(self, schema: AvroSchema) -> None:
        self.schema = schema

    def _key(self) -> tuple[object, ...]:
        return ("GenericRecordAvroTypeInfo", self.schema.schema_string)

    def __repr__(self) -> str:
        return f"GenericRecordAvroTypeInfo({self.schema.name})"


class AvroInputFormat(BulkFormat):
    """Reads Avro container files as generic records (dicts), resolved against ``schema``
    (PyFlink: ``env.create_input(AvroInputFormat(path, schema))``; here also usable with
    ``FileSource.for_bulk_file_format(AvroInputFormat(path, schema), path)``)."""

    def __init__(self, path: str, schema: AvroSchema) -> None:
        if not isinstance(schema, AvroSchema):
            raise TypeError(f"AvroInputFormat needs an AvroSchema, got {schema!r}")
        self.path = str(path)
        self.schema = schema

    def get_produced_type(self) -> GenericRecordAvroTypeInfo:
        return GenericRecordAvroTypeInfo(self.schema)

    def iterate(self, stream: BinaryIO) -> Iterator[list[Any]]:
        reader = fastavro.reader(stream, reader_schema=self.schema.parsed)
        batch: list[Any] = []
        for record in reader:
            batch.append(record)
            if len(batch) >= _BATCH:
                yield batch
                batch = []
        if batch:
            yield batch


class AvroWriterFactory(BulkWriterFactory):
    def __init__(self, schema: AvroSchema, codec: str) -> None:
        self.schema = schema
        self.codec = codec

    def create(self, stream: BinaryIO) -> BulkWriter:
        return _AvroBulkWriter(stream, self.schema, self.codec)


class _AvroBulkWriter(BulkWriter):
    def __init__(self, stream: BinaryIO, schema: AvroSchema, codec: str) -> None:
        self._schema = schema
        self._writer = Writer(stream, schema.parsed, codec=codec)

    def add_element(self, element: Any) -> None:
        parsed = self._schema.parsed
        record = to_avro(element, parsed)
        try:
            self._writer.write(record)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError):
            raise ValueError(describe_mismatch(record, parsed, self._schema.name)) from None

    def add_elements(self, elements: Sequence[Any]) -> None:
        for element in elements:
            self.add_element(element)

    def flush(self) -> None:
        self._writer.flush()

    def finish(self) -> None:
        self._writer.flush()


class AvroWriters:
    """``AvroWriters.for_generic_record(schema)``: a ``BulkWriterFactory`` for
    ``FileSink.for_bulk_format`` writing dicts or ``Row``s as Avro container files
    (``codec``: ``null``, ``deflate``, ``snappy`` if installed...)."""

    @staticmethod
    def for_generic_record(schema: AvroSchema, codec: str = "null") -> BulkWriterFactory:
        Writer(io.BytesIO(), schema.parsed, codec=codec)  # an unknown codec fails here
        return AvroWriterFactory(schema, codec)


AvroBulkWriters = AvroWriters  # the name PyFlink's tests use
