"""Parquet at PyFlink's module path (``pyflink.datastream.formats.parquet``), on pyarrow.

Invariant: the formats are picklable values; a reader returns a file's rows in order and is
positioned by record count (a restore skips the rows already returned); a writer writes one
row group per ``row_group_size`` rows and the footer when its part file is finished.

``ParquetColumnarRowInputFormat`` reads named ``Row``s of the given row type (only its
columns); ``AvroParquetReaders`` reads Avro generic records (dicts); ``ParquetBulkWriters``
and ``AvroParquetWriters`` write. Row types are ``Types.ROW_NAMED(...)`` or a
``pyarrow.Schema`` (Cairn has no ``DataTypes``); the Hadoop configuration is accepted and
ignored.

>>> from cairn.common import Types
>>> fmt = ParquetColumnarRowInputFormat(
...     row_type=Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()]), batch_size=500)
>>> fmt.schema.names
['a', 'b']
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

import pyarrow.parquet as pq

from cairn.common.formats.avro import AvroSchema
from cairn.common.serialization import BulkWriterFactory
from cairn.common.typeinfo import RowTypeInfo
from cairn.datastream.connectors.formats import (
    BulkFormat,
    ParquetBulkWriters,
    ParquetWriterFactory,
)
from cairn.datastream.formats.arrow import ArrowRows, arrow_schema, avro_arrow_schema, rows

__all__ = [
    "AvroParquetReaders",
    "AvroParquetWriters",
    "ParquetBulkWriters",
    "ParquetColumnarRowInputFormat",
    "ParquetWriterFactory",
]


class ParquetColumnarRowInputFormat(BulkFormat):
    """Reads Parquet files into named ``Row``s of ``row_type``'s columns (by name; with
    ``is_case_sensitive=False`` names match ignoring case)."""

    def __init__(
        self,
        hadoop_config: Any = None,
        row_type: Any = None,
        batch_size: int = 2048,
        is_utc_timestamp: bool = False,
        is_case_sensitive: bool = True,
    ) -> None:
        if row_type is None:
            raise TypeError("ParquetColumnarRowInputFormat needs a row_type")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.schema = arrow_schema(row_type)
        self.row_type = row_type if isinstance(row_type, RowTypeInfo) else None
        self.batch_size = batch_size
        self.is_case_sensitive = is_case_sensitive

    def iterate(self, stream: BinaryIO) -> Iterator[list[Any]]:
        file = pq.ParquetFile(stream)
        present = file.schema_arrow.names
        columns = []
        for name in self.schema.names:
            match = name if name in present else None
            if match is None and not self.is_case_sensitive:
                match = next((p for p in present if p.lower() == name.lower()), None)
            if match is None:
                raise ValueError(f"the Parquet file has no column {name!r} (it has {present})")
            columns.append(match)
        read = rows if self.row_type is None else ArrowRows(self.row_type).rows
        for batch in file.iter_batches(batch_size=self.batch_size, columns=columns):
            if columns != self.schema.names:
                batch = batch.rename_columns(self.schema.names)
            yield read(batch.cast(self.schema))


class _AvroParquetFormat(BulkFormat):
    def __init__(self, schema: AvroSchema) -> None:
        self.avro_schema = schema

    def iterate(self, stream: BinaryIO) -> Iterator[list[Any]]:
        names = self.avro_schema.field_names
        for batch in pq.ParquetFile(stream).iter_batches(columns=names or None):
            yield rows(batch, as_dicts=True)


class AvroParquetReaders:
    """``AvroParquetReaders.for_generic_record(schema)``: Parquet rows as Avro generic
    records (dicts with the schema's fields)."""

    @staticmethod
    def for_generic_record(schema: AvroSchema) -> BulkFormat:
        return _AvroParquetFormat(schema)


class AvroParquetWriters:
    """``AvroParquetWriters.for_generic_record(schema)``: writes Avro generic records
    (dicts) as Parquet, with the Arrow schema derived from the Avro record schema."""

    @staticmethod
    def for_generic_record(schema: AvroSchema) -> BulkWriterFactory:
        return ParquetBulkWriters.for_row_type(avro_arrow_schema(schema.parsed))
