"""Metadata columns: which keys a connector reads and writes, checked at planning.

Invariant: a table's metadata column names a key its connector offers for the direction the
table is used in — every metadata column when it is read, every non-virtual one when it is
written — else planning fails with Flink's message listing the keys offered. A column may
declare a type other than the key's: it is cast from the connector's type (Flink's rule).

>>> from cairn.table.schema import Schema
>>> from cairn.table.types import DataTypes
>>> s = Schema.new_builder().column_by_metadata("x", DataTypes.INT()).build()
>>> check_metadata("t", "datagen", s, {}, reading=True)
Traceback (most recent call last):
...
cairn.table.errors.ValidationError: Invalid metadata key 'x' in column 'x' of table \
'default_catalog.default_database.t'. The table source of connector 'datagen' supports the \
following metadata keys for reading:
<BLANKLINE>
"""

from __future__ import annotations

from collections.abc import Mapping

from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.schema import Schema
from cairn.table.types import DataType, DataTypes

__all__ = ["DATA_STREAM_METADATA", "check_metadata", "with_metadata"]

#: What ``from_data_stream`` reads besides the fields: each record's timestamp (Flink's).
DATA_STREAM_METADATA: dict[str, DataType] = {"rowtime": DataTypes.TIMESTAMP_LTZ(3, False)}


def check_metadata(
    table: str,
    connector: str,
    schema: Schema,
    offered: Mapping[str, DataType],
    reading: bool,
) -> None:
    """Refuse a metadata column whose key ``connector`` does not offer (``offered``: the
    keys it reads, or writes when ``reading`` is false, with their types)."""
    for c in schema.metadata_columns():
        if not reading and c.is_virtual:
            continue
        if c.key not in offered:
            what = "source" if reading else "sink"
            direction = "reading" if reading else "writing"
            listing = "\n".join(sorted(offered))
            raise ValidationError(
                f"Invalid metadata key '{c.key}' in column '{c.name}' of table"
                f" 'default_catalog.default_database.{table}'. The table {what} of connector"
                f" '{connector}' supports the following metadata keys for {direction}:\n"
                f"{listing}"
            )


def with_metadata(
    physical: Columns, schema: Schema | None, offered: Mapping[str, DataType]
) -> Columns:
    """A source's output: its ``physical`` columns, then its metadata columns in declared
    order, each in the type the connector produces (cast to the declared one afterwards)."""
    pairs = list(zip(physical.names, physical.types, strict=True))
    if schema is not None:
        pairs += [(c.name, offered[c.key]) for c in schema.metadata_columns()]
    return Columns.of(pairs)
