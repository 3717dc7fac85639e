"""Every kind of type through every format: a round trip, or the format's named refusal.

One table of types with a sample value (``TYPES``) and one of formats (``FORMATS``); each
pair either gives the value back (as ``convert`` makes it) or raises ``UnsupportedTypeError``
naming the type and the format, exactly where ``REFUSED`` says so (as Flink: CSV takes no
maps and no nesting below arrays and rows; JSON, Arrow take no pickled objects). A new
kind of type, or a format that starts or stops taking one, must change these tables.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import types as T

from cairn.common.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from cairn.common.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from cairn.common.type_conversion import convert
from cairn.common.type_kind import TypeKind
from cairn.common.type_visitor import TypeVisitor, UnsupportedTypeError
from cairn.common.typeinfo import RowTypeInfo, TypeInformation, Types
from cairn.common.types import Row
from cairn.datastream.connectors.formats import ParquetBulkWriters
from cairn.datastream.formats.arrow import ArrowRows, arrow_type
from cairn.datastream.formats.orc import OrcBulkWriters
from cairn.datastream.formats.parquet import ParquetColumnarRowInputFormat
from cairn.state_processor.columns import from_spark, spark_column, to_spark

UTC = dt.timezone.utc


@dataclass(frozen=True)
class Sample:
    name: str
    type_info: TypeInformation
    value: Any  # as a job gives it; read back as ``convert(value, type_info)``


def _row(**fields: Any) -> Row:
    row = Row(*fields.values())
    row.set_field_names(list(fields))
    return row


TYPES = [
    Sample("STRING", Types.STRING(), 'a, "quoted";\tline'),
    Sample("CHAR", Types.CHAR(), "c"),
    Sample("BOOLEAN", Types.BOOLEAN(), False),
    Sample("BYTE", Types.BYTE(), -128),
    Sample("SHORT", Types.SHORT(), 32767),
    Sample("INT", Types.INT(), -70000),
    Sample("LONG", Types.LONG(), 2**40),
    Sample("FLOAT", Types.FLOAT(), 1.5),
    Sample("DOUBLE", Types.DOUBLE(), 0.1),
    Sample("BIG_INT", Types.BIG_INT(), 12345678901234),
    Sample("BIG_DEC", Types.BIG_DEC(), Decimal("12.25")),
    Sample("SQL_DATE", Types.SQL_DATE(), dt.date(2024, 2, 29)),
    Sample("LOCAL_DATE", Types.LOCAL_DATE(), dt.date(1970, 1, 1)),
    Sample("SQL_TIME", Types.SQL_TIME(), dt.time(12, 30, 15)),
    Sample("LOCAL_TIME", Types.LOCAL_TIME(), dt.time(23, 59, 59, 250000)),
    Sample("SQL_TIMESTAMP", Types.SQL_TIMESTAMP(), dt.datetime(2024, 2, 29, 12, 30, 15, 123456)),
    Sample("LOCAL_DATE_TIME", Types.LOCAL_DATE_TIME(), dt.datetime(1999, 12, 31, 23, 59)),
    Sample("INSTANT", Types.INSTANT(), dt.datetime(2024, 1, 1, 8, 0, tzinfo=UTC)),
    Sample("BYTES", Types.PRIMITIVE_ARRAY(Types.BYTE()), b"\x00\xff;,ab"),
    Sample("LIST", Types.LIST(Types.INT()), [1, 2, 3]),
    Sample("EMPTY_LIST", Types.LIST(Types.STRING()), []),
    Sample("BASIC_ARRAY", Types.BASIC_ARRAY(Types.STRING()), ["a", "b c"]),
    Sample("PRIMITIVE_ARRAY", Types.PRIMITIVE_ARRAY(Types.DOUBLE()), [1.5, -2.0]),
    Sample("OBJECT_ARRAY", Types.OBJECT_ARRAY(Types.SQL_DATE()), [dt.date(2024, 1, 2)]),
    Sample("LIST_OF_ROWS", Types.LIST(Types.ROW_NAMED(["x"], [Types.INT()])), [(1,), (2,)]),
    Sample("LIST_OF_LISTS", Types.LIST(Types.LIST(Types.LONG())), [[1], [2, 3]]),
    Sample("MAP", Types.MAP(Types.STRING(), Types.LONG()), {"a": 1, "b": None}),
    Sample("MAP_INT_KEYS", Types.MAP(Types.INT(), Types.LIST(Types.STRING())), {7: ["x"]}),
    Sample("ROW", Types.ROW([Types.INT(), Types.STRING()]), (1, "one")),
    Sample(
        "ROW_NAMED",
        Types.ROW_NAMED(["id", "when", "ok"], [Types.LONG(), Types.SQL_DATE(), Types.BOOLEAN()]),
        (5, dt.date(2020, 5, 17), True),
    ),
    Sample(
        "NESTED_ROW",
        Types.ROW_NAMED(["inner"], [Types.ROW_NAMED(["tags"], [Types.LIST(Types.STRING())])]),
        ((["t"],),),
    ),
    Sample("TUPLE", Types.TUPLE([Types.INT(), Types.DOUBLE()]), (1, 2.5)),
    Sample("PICKLED", Types.PICKLED_BYTE_ARRAY(), {"any": frozenset({1, 2})}),
]

REFUSED = {
    # Flink's CSV: scalars, arrays of scalars and rows of scalars; no maps (CsvRowSchemaConverter).
    ("csv", "LIST_OF_ROWS"),
    ("csv", "LIST_OF_LISTS"),
    ("csv", "MAP"),
    ("csv", "MAP_INT_KEYS"),
    ("csv", "NESTED_ROW"),
    ("csv", "PICKLED"),
    # Flink's JSON and Parquet/ORC take no generic (pickled) types.
    ("json", "PICKLED"),
    ("arrow", "PICKLED"),
    ("parquet", "PICKLED"),
    ("orc", "PICKLED"),
    # ORC has no time of day (Flink's ORC format maps no TIME either).
    ("orc", "SQL_TIME"),
    ("orc", "LOCAL_TIME"),
}
"""(format, sample) pairs the format refuses with ``UnsupportedTypeError``."""


def _record_type(sample: Sample) -> RowTypeInfo:
    return Types.ROW_NAMED(["v"], [sample.type_info])


def _values(record: Any) -> Any:
    return record


def through_values(sample: Sample) -> Any:
    once = convert(sample.value, sample.type_info)
    assert convert(once, sample.type_info) == once  # converting is idempotent
    return once


def through_json(sample: Sample) -> Any:
    row = _record_type(sample)
    data = (
        JsonRowSerializationSchema.builder().with_type_info(row).build().serialize((sample.value,))
    )
    return JsonRowDeserializationSchema.builder().type_info(row).build().deserialize(data)[0]


def through_csv(sample: Sample, null_literal: str | None = None) -> Any:
    row = _record_type(sample)
    write, read = CsvRowSerializationSchema.Builder(row), CsvRowDeserializationSchema.Builder(row)
    if null_literal is not None:
        write.set_null_literal(null_literal)
        read.set_null_literal(null_literal)
    data = write.build().serialize((sample.value,))
    return read.build().deserialize(data)[0]


def through_arrow(sample: Sample) -> Any:
    codec = ArrowRows(_record_type(sample))
    table = codec.table([(sample.value,)])
    assert table.schema.field("v").type == arrow_type(sample.type_info)
    return codec.rows(table)[0][0]


def through_parquet(sample: Sample) -> Any:
    row = _record_type(sample)
    buffer = io.BytesIO()
    writer = ParquetBulkWriters.for_row_type(row).create(buffer)
    writer.add_element((sample.value,))
    writer.finish()
    buffer.seek(0)
    (batch,) = ParquetColumnarRowInputFormat(row_type=row).iterate(buffer)
    return batch[0][0]


def through_orc(sample: Sample) -> Any:
    import pyarrow.orc as orc

    row = _record_type(sample)
    buffer = io.BytesIO()
    writer = OrcBulkWriters.for_row_type(row).create(buffer)
    writer.add_element((sample.value,))
    writer.finish()
    buffer.seek(0)
    return ArrowRows(row).rows(orc.read_table(buffer))[0][0]


def through_spark(sample: Sample) -> Any:
    column = spark_column(sample.type_info)
    spark_value = to_spark(sample.value, column, "value")
    verify = getattr(T, "_make_type_verifier", None)  # what createDataFrame checks
    if verify is not None:
        verify(column.data_type)(spark_value)
    return from_spark(spark_value, column)


FORMATS: dict[str, Callable[[Sample], Any]] = {
    "values": through_values,
    "json": through_json,
    "csv": through_csv,
    "arrow": through_arrow,
    "parquet": through_parquet,
    "orc": through_orc,
    "spark": through_spark,
}

_FORMAT_NAMES = {"json": "JSON", "csv": "CSV", "arrow": "Arrow", "parquet": "Arrow", "orc": "ORC"}


@pytest.mark.parametrize("sample", TYPES, ids=lambda s: s.name)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_type_round_trips_or_is_refused_by_name(fmt: str, sample: Sample) -> None:
    through = FORMATS[fmt]
    if (fmt, sample.name) in REFUSED:
        with pytest.raises(UnsupportedTypeError) as refused:
            through(sample)
        assert _FORMAT_NAMES[fmt] in str(refused.value)
        return
    got = through(sample)
    expected = convert(sample.value, sample.type_info)
    assert _typed(got) == _typed(expected)


def _typed(value: Any) -> Any:
    """``value`` with the type of every part beside it: 5 and Decimal(5) differ, as do a
    tuple and a list, or rows with other field names."""
    if isinstance(value, Row):
        return ("Row", value.get_field_names(), [_typed(v) for v in value])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_typed(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    return (type(value).__name__, value)


@pytest.mark.parametrize(
    ("fmt", "sample"),
    [
        pytest.param(fmt, sample, id=f"{fmt}-{sample.name}")
        for fmt in FORMATS
        if fmt not in ("values", "spark")
        for sample in TYPES
        if (fmt, sample.name) not in REFUSED  # the refusal is the round trip's test
    ],
)
def test_a_null_field_round_trips(fmt: str, sample: Sample) -> None:
    null = Sample(sample.name, sample.type_info, None)
    # In CSV "" is an empty string or array, so their null needs a null literal.
    got = through_csv(null, null_literal="NULL") if fmt == "csv" else FORMATS[fmt](null)
    assert got is None


def test_the_table_covers_every_kind_and_every_type_factory() -> None:
    assert {s.type_info.kind for s in TYPES} == set(TypeKind)
    factories = {name for name in vars(Types) if name.isupper()}
    named = {s.name for s in TYPES} | {"ROW_NAMED", "PICKLED_BYTE_ARRAY", "BIG_INT", "BIG_DEC"}
    named |= {"LIST", "MAP", "TUPLE", "BASIC_ARRAY", "PRIMITIVE_ARRAY", "OBJECT_ARRAY"}
    assert factories - named == set(), "add a sample for each new Types factory"
    assert {f for f, _ in REFUSED} <= set(FORMATS)
    assert {s for _, s in REFUSED} <= {s.name for s in TYPES}


def test_every_kind_dispatches_to_exactly_one_method() -> None:
    class Named(TypeVisitor[str]):
        """Answers with the name of the method that was called."""

    methods = [m for m in vars(TypeVisitor) if m.startswith("visit_") and m != "visit_scalar"]
    for method in methods:
        setattr(Named, method, lambda self, t, *parts, _name=method: _name)
    called = {s.type_info.kind: Named().visit(s.type_info) for s in TYPES}
    assert len(called) == len(TypeKind)
    assert sorted(called.values()) == sorted(methods)


def test_a_refusal_names_the_type_the_format_and_the_field() -> None:
    row = Types.ROW_NAMED(["scores"], [Types.MAP(Types.STRING(), Types.INT())])
    with pytest.raises(UnsupportedTypeError, match=r"CSV does not take Map<String, Integer> "):
        CsvRowSerializationSchema.Builder(row).build()
    with pytest.raises(UnsupportedTypeError, match=r"field 'scores'"):
        CsvRowDeserializationSchema.Builder(row).build()
    pickled = Types.ROW_NAMED(["blob"], [Types.PICKLED_BYTE_ARRAY()])
    with pytest.raises(UnsupportedTypeError, match=r"JSON does not take Pickled.*field 'blob'"):
        JsonRowDeserializationSchema.builder().type_info(pickled).build()


@pytest.mark.spark
def test_every_type_round_trips_through_a_spark_data_frame(spark: Any) -> None:
    columns = [spark_column(s.type_info) for s in TYPES]
    schema = T.StructType(
        [T.StructField(s.name, c.data_type) for s, c in zip(TYPES, columns, strict=True)]
    )
    row = tuple(to_spark(s.value, c, s.name) for s, c in zip(TYPES, columns, strict=True))
    (back,) = spark.createDataFrame([row], schema).collect()
    for sample, column, value in zip(TYPES, columns, back, strict=True):
        expected = convert(sample.value, sample.type_info)
        assert from_spark(value, column) == expected, sample.name
