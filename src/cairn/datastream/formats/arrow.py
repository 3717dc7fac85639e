"""Arrow schemas and rows for the columnar file formats (Parquet, ORC).

Invariant: ``arrow_schema`` maps a ``RowTypeInfo`` (or an Avro record schema) to the Arrow
schema whose columns read back as the same Python values: for a ``RowTypeInfo``,
``ArrowRows`` writes records into that schema and reads them back as the same values (rows
and tuples as structs, arrays as lists, maps as maps, bytes as binary), with converters
built once per schema by ``TypeVisitor``s; a pickled object has no column type (nor, in
ORC, a time of day) and is refused naming it. ``rows`` turns any record batch into named
``Row``s (or dicts, for Avro's generic records) field by field.

>>> from cairn.common import Types
>>> arrow_schema(Types.ROW_NAMED(["id", "tags"], [Types.INT(), Types.LIST(Types.STRING())]))
id: int32
tags: list<item: string>
  child 0, item: string
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from cairn.common.type_visitor import TypeVisitor, scalar_name
from cairn.common.typeinfo import RowTypeInfo, TypeInformation
from cairn.common.types import Row

__all__ = ["ArrowRows", "arrow_schema", "arrow_type", "avro_arrow_schema", "rows", "rows_from"]

Convert = Callable[[Any], Any]

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

_FORMAT = "Arrow (Parquet, ORC)"


def _tuple_names(types: Sequence[TypeInformation]) -> list[str]:
    return [f"f{i}" for i in range(len(types))]


class _ArrowTypes(TypeVisitor[pa.DataType]):
    format = _FORMAT

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> pa.DataType:
        return pa.struct([pa.field(n, self.visit(f)) for n, f in zip(names, types, strict=True)])

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> pa.DataType:
        return self.visit_row(t, _tuple_names(types), types)

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> pa.DataType:
        return pa.list_(self.visit(element))

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> pa.DataType:
        return pa.map_(self.visit(key), self.visit(value))

    def visit_bytes(self, t: TypeInformation) -> pa.DataType:
        return pa.binary()

    def visit_scalar(self, t: TypeInformation) -> pa.DataType:
        return _BASIC[scalar_name(t)]


class _OrcTypes(_ArrowTypes):
    format = "Arrow (ORC)"

    def visit_time(self, t: TypeInformation) -> pa.DataType:
        return self.unsupported(t, "ORC has no time of day type")


def arrow_type(type_info: TypeInformation) -> pa.DataType:
    """The Arrow type of ``type_info`` (``UnsupportedTypeError``, a ``TypeError``, if none)."""
    return _ArrowTypes().visit(type_info)


def arrow_schema(row_type: Any, orc: bool = False) -> pa.Schema:
    """The Arrow schema of a ``RowTypeInfo`` (a ``pa.Schema`` is returned as it is); for
    ``orc``, without the types ORC lacks (a time of day)."""
    if isinstance(row_type, pa.Schema):
        return row_type
    if not isinstance(row_type, RowTypeInfo):
        raise TypeError(
            f"row_type must be a RowTypeInfo (Types.ROW_NAMED) or a pyarrow.Schema, got "
            f"{row_type!r} (Cairn has no DataTypes)"
        )
    names = row_type.get_field_names()
    types = _OrcTypes() if orc else _ArrowTypes()
    return pa.schema(
        [
            pa.field(n, types.visit(t))
            for n, t in zip(names, row_type.get_field_types(), strict=True)
        ]
    )


def _same(value: Any) -> Any:
    return value


def _nullable(convert: Convert) -> Convert:
    if convert is _same:
        return _same
    return lambda value: None if value is None else convert(value)


class _ToArrow(TypeVisitor[Convert]):
    """A non-null Python value to what ``pa.array`` takes for the type's Arrow type: structs
    from dicts (a ``Row`` is not a sequence to Arrow), maps from dicts."""

    format = _FORMAT

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> Convert:
        fields = list(zip(names, [_nullable(self.visit(f)) for f in types], strict=True))
        return lambda row: {n: f(v) for (n, f), v in zip(fields, row, strict=True)}

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> Convert:
        return self.visit_row(t, _tuple_names(types), types)

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> Convert:
        each = _nullable(self.visit(element))
        return _same if each is _same else lambda values: [each(v) for v in values]

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> Convert:
        keys, values = self.visit(key), _nullable(self.visit(value))
        if keys is _same and values is _same:
            return _same
        return lambda mapping: {keys(k): values(v) for k, v in mapping.items()}

    def visit_bytes(self, t: TypeInformation) -> Convert:
        return _same

    def visit_scalar(self, t: TypeInformation) -> Convert:
        return _same


class _FromArrow(TypeVisitor[Convert]):
    """A non-null value of ``to_pylist`` to the Python value of the type: structs to named
    ``Row``s (tuples for ``TUPLE``), maps (lists of pairs) to dicts."""

    format = _FORMAT

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> Convert:
        fields = list(zip(names, [_nullable(self.visit(f)) for f in types], strict=True))

        def to_row(struct: dict[str, Any]) -> Row:
            row = Row(*(f(struct[n]) for n, f in fields))
            row.set_field_names(names)
            return row

        return to_row

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> Convert:
        fields = list(
            zip(_tuple_names(types), [_nullable(self.visit(f)) for f in types], strict=True)
        )
        return lambda struct: tuple(f(struct[n]) for n, f in fields)

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> Convert:
        each = _nullable(self.visit(element))
        return _same if each is _same else lambda values: [each(v) for v in values]

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> Convert:
        keys, values = self.visit(key), _nullable(self.visit(value))
        return lambda pairs: {keys(k): values(v) for k, v in pairs}

    def visit_bytes(self, t: TypeInformation) -> Convert:
        return _same

    def visit_timestamp(self, t: TypeInformation) -> Convert:
        return _pydatetime

    visit_instant = visit_timestamp

    def visit_scalar(self, t: TypeInformation) -> Convert:
        return _same


def _pydatetime(value: Any) -> Any:
    """A ``datetime``: pyarrow gives nanosecond timestamps (ORC's) as ``pandas.Timestamp``
    when pandas is installed."""
    to_datetime = getattr(value, "to_pydatetime", None)
    return to_datetime() if to_datetime is not None else value


class ArrowRows:
    """Records of a ``RowTypeInfo`` into an Arrow table and back, converters built once.

    >>> from cairn.common import Types
    >>> codec = ArrowRows(Types.ROW_NAMED(["k", "m"], [Types.TUPLE([Types.INT()]),
    ...     Types.MAP(Types.STRING(), Types.LONG())]))
    >>> codec.rows(codec.table([((1,), {"a": 2})]))
    [Row(k=(1,), m={'a': 2})]
    """

    def __init__(self, row_type: RowTypeInfo) -> None:
        self.schema = arrow_schema(row_type)
        types = row_type.get_field_types()
        self._to = [_nullable(_ToArrow().visit(t)) for t in types]
        self._from = [_nullable(_FromArrow().visit(t)) for t in types]
        self.names = row_type.get_field_names()

    def columns(self, records: Sequence[Sequence[Any]]) -> list[pa.Array]:
        """The Arrow columns of records given as value sequences in field order."""
        columns = list(zip(*records, strict=True)) if records else [() for _ in self._to]
        return [
            pa.array(col if f is _same else [f(v) for v in col], type=field.type)
            for col, f, field in zip(columns, self._to, self.schema, strict=True)
        ]

    def table(self, records: Sequence[Sequence[Any]]) -> pa.Table:
        return pa.Table.from_arrays(self.columns(records), schema=self.schema)

    def rows(self, batch: pa.RecordBatch | pa.Table) -> list[Row]:
        """The records of ``batch`` (with this schema's columns) as named ``Row``s."""
        columns = [
            col if f is _same else [f(v) for v in col]
            for col, f in zip((c.to_pylist() for c in batch.columns), self._from, strict=True)
        ]
        out = []
        for values in zip(*columns, strict=True):
            row = Row(*values)
            row.set_field_names(self.names)
            out.append(row)
        return out


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


def rows_from(table: pa.Table, offset: int, limit: int) -> tuple[list[Any], int]:
    """At most ``limit`` records of ``table`` from row ``offset`` (as :func:`rows`), and the
    offset after them (``table.num_rows`` once the table is read): a source reading a file in
    batches keeps that offset in its checkpoint.

    >>> rows_from(pa.table({"a": [1, 2, 3]}), 1, 5)
    ([Row(a=2), Row(a=3)], 3)
    """
    end = min(table.num_rows, offset + limit)
    return rows(table.slice(offset, end - offset)), end


def rows(batch: pa.RecordBatch | pa.Table, as_dicts: bool = False) -> list[Any]:
    """The records of ``batch``: named ``Row``s (nested structs too), or plain dicts."""
    records: list[Any] = batch.to_pylist()
    if as_dicts:
        return records
    return [_named(r) for r in records]
