"""ORC at PyFlink's module path (``pyflink.datastream.formats.orc``), on pyarrow.

Invariant: ``OrcBulkWriters.for_row_type`` is a picklable factory; each part file holds the
rows added to it, in order, readable by any ORC reader (``pyarrow.orc.read_table``, Spark)
once ``finish`` wrote its footer.

>>> from cairn.common import Types
>>> factory = OrcBulkWriters.for_row_type(Types.ROW_NAMED(["k"], [Types.STRING()]))
>>> factory.schema.names
['k']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.orc as orc

from cairn.common.serialization import BulkWriter, BulkWriterFactory
from cairn.common.typeinfo import RowTypeInfo
from cairn.datastream.connectors.formats import arrow_rows, rows_to_table
from cairn.datastream.formats.arrow import arrow_schema

__all__ = ["OrcBulkWriters", "OrcWriterFactory"]


class OrcBulkWriters:
    """PyFlink's ``OrcBulkWriters.for_row_type(row_type, writer_properties, hadoop_config)``;
    ``row_type`` is ``Types.ROW_NAMED(...)`` or a ``pyarrow.Schema``. ``writer_properties``
    (a dict or ``Configuration``) may set ``orc.compress`` (e.g. ``ZSTD``) and
    ``orc.stripe.size``; Hadoop's configuration is ignored."""

    @staticmethod
    def for_row_type(
        row_type: Any, writer_properties: Any = None, hadoop_config: Any = None
    ) -> OrcWriterFactory:
        props = dict(writer_properties.to_dict()) if hasattr(writer_properties, "to_dict") else {}
        if isinstance(writer_properties, dict):
            props = dict(writer_properties)
        return OrcWriterFactory(
            arrow_schema(row_type, orc=True),
            str(props.get("orc.compress", "uncompressed")).lower(),
            int(props.get("orc.stripe.size", 64 * 1024 * 1024)),
            row_type if isinstance(row_type, RowTypeInfo) else None,
        )


class OrcWriterFactory(BulkWriterFactory):
    def __init__(
        self,
        schema: pa.Schema,
        compression: str,
        stripe_size: int,
        row_type: RowTypeInfo | None = None,
    ) -> None:
        self.schema = schema
        self.compression = compression
        self.stripe_size = stripe_size
        self.row_type = row_type

    def create(self, stream: BinaryIO) -> BulkWriter:
        return _OrcBulkWriter(stream, self)


class _OrcBulkWriter(BulkWriter):
    def __init__(self, stream: BinaryIO, factory: OrcWriterFactory) -> None:
        self._schema = factory.schema
        self._codec = arrow_rows(factory.row_type)
        self._writer = orc.ORCWriter(
            stream, compression=factory.compression, stripe_size=factory.stripe_size
        )
        self._rows: list[Any] = []

    def add_element(self, element: Any) -> None:
        self._rows.append(element)

    def add_elements(self, elements: Sequence[Any]) -> None:
        self._rows.extend(elements)

    def flush(self) -> None:
        if self._rows:
            self._writer.write(rows_to_table(self._rows, self._schema, self._codec))
            self._rows = []

    def finish(self) -> None:
        self.flush()
        self._writer.close()
