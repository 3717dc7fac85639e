"""Arrow schemas and rows for the columnar file formats (Parquet, ORC).

Invariant: ``arrow_schema`` maps a ``RowTypeInfo`` (or an Avro record schema) to the Arrow
schema whose columns read back as the same Python values; ``rows`` turns a record batch into
named ``Row``s (or dicts, for Avro's generic records) field by field.

>>> from cairn.common import Types
>>> arrow_schema(Types.ROW_NAMED(["id", "tags"], [Types.INT(), Types.LIST(Types.STRING())]))
id: int32
tags: list<item: string>
  child 0, item: string
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from cairn.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TypeInformation,
)
from cairn.common.types import Row

__all__ = ["arrow_schema", "arrow_type", "avro_arrow_schema", "rows"]

_BASIC = {
    "String": pa.string(),
    "Character": pa.string(),
    "Boolean": pa.bool_(),
    "Byte": pa.int8(),
    "Short": pa.int16(),
    "Integer": pa.int32(),
    "Long": pa.int64(),
    "Float": pa.float32(),
    "Double": pa.float64(),
    "BigInteger": pa.int64(),
    "BigDecimal": pa.decimal128(38, 18),
    "Date": pa.date32(),
    "LocalDate": pa.date32(),
    "Time": pa.time64("us"),
    "LocalTime": pa.time64("us"),
    "Timestamp": pa.timestamp("us"),
    "LocalDateTime": pa.timestamp("us"),
    "Instant": pa.timestamp("us", tz="UTC"),
}


def arrow_type(type_info: TypeInformation) -> pa.DataType:
    if isinstance(type_info, RowTypeInfo):
        return pa.struct(
            [
                pa.field(n, arrow_type(t))
                for n, t in zip(
                    type_info.get_field_names(), type_info.get_field_types(), strict=True
                )
            ]
        )
    if (
        isinstance(type_info, PrimitiveArrayTypeInfo)
        and getattr(type_info.element_type, "name", None) == "Byte"
    ):
        return pa.binary()
    if isinstance(type_info, ListTypeInfo | BasicArrayTypeInfo | ObjectArrayTypeInfo):
        return pa.list_(arrow_type(type_info.element_type))
    if isinstance(type_info, PrimitiveArrayTypeInfo):
        return pa.list_(arrow_type(type_info.element_type))
    if isinstance(type_info, MapTypeInfo):
        return pa.map_(arrow_type(type_info.key_type), arrow_type(type_info.value_type))
    if isinstance(type_info, BasicTypeInfo) and type_info.name in _BASIC:
        return _BASIC[type_info.name]
    raise TypeError(f"type {type_info!r} has no Parquet/ORC column type")


def arrow_schema(row_type: Any) -> pa.Schema:
    """The Arrow schema of a ``RowTypeInfo`` (a ``pa.Schema`` is returned as it is)."""
    if isinstance(row_type, pa.Schema):
        return row_type
    if not isinstance(row_type, RowTypeInfo):
        raise TypeError(
            f"row_type must be a RowTypeInfo (Types.ROW_NAMED) or a pyarrow.Schema, got "
            f"{row_type!r} (Cairn has no DataTypes)"
        )
    names = row_type.get_field_names()
    return pa.schema(
        [pa.field(n, arrow_type(t)) for n, t in zip(names, row_type.get_field_types(), strict=True)]
    )


_AVRO = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def _avro_type(schema: Any) -> pa.DataType:
    if isinstance(schema, str):
        if schema in _AVRO:
            return _AVRO[schema]
        raise TypeError(f"Avro type {schema!r} has no Parquet column type here")
    if isinstance(schema, list):  # a union: nullable of its one non-null branch
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise TypeError(f"Avro union {schema} has no Parquet column type (one type or null)")
        return _avro_type(branches[0])
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "timestamp-millis":
        return pa.timestamp("ms", tz="UTC")
    if logical == "timestamp-micros":
        return pa.timestamp("us", tz="UTC")
    if logical == "date":
        return pa.date32()
    if kind == "record":
        return pa.struct([pa.field(f["name"], _avro_type(f["type"])) for f in schema["fields"]])
    if kind == "array":
        return pa.list_(_avro_type(schema["items"]))
    if kind == "map":
        return pa.map_(pa.string(), _avro_type(schema["values"]))
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary(schema["size"])
    return _avro_type(kind)


def avro_arrow_schema(parsed: Any) -> pa.Schema:
    """The Arrow schema of an Avro record schema (fastavro's parsed form)."""
    if not (isinstance(parsed, dict) and parsed.get("type") == "record"):
        raise TypeError("an Avro schema for Parquet must be a record")
    return pa.schema([pa.field(f["name"], _avro_type(f["type"])) for f in parsed["fields"]])


def _named(value: Any) -> Any:
    if isinstance(value, dict):
        row = Row(*(_named(v) for v in value.values()))
        row.set_field_names(list(value))
        return row
    if isinstance(value, list):
        return [_named(v) for v in value]
    return value


def rows(batch: pa.RecordBatch | pa.Table, as_dicts: bool = False) -> list[Any]:
    """The records of ``batch``: named ``Row``s (nested structs too), or plain dicts."""
    records: list[Any] = batch.to_pylist()
    if as_dicts:
        return records
    return [_named(r) for r in records]
