"""Row formats for messages with PyFlink's names: bytes as they are, one Row field as bytes,
CSV and Avro rows (round trips, the field and value named when a record does not fit,
skipped and counted with ignore-parse-errors), and the exports at PyFlink's import paths."""

from __future__ import annotations

import datetime
import logging
import pickle

import pytest

from cairn.common import (
    ByteArraySchema,
    Row,
    RowFieldExtractorSchema,
    Types,
)
from cairn.datastream.formats.avro import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
    AvroSchema,
)
from cairn.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from cairn.datastream.formats.json import JsonRowDeserializationSchema

AVRO = """{"type": "record", "name": "Click", "fields": [
  {"name": "id", "type": "int"},
  {"name": "user", "type": "string"},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "where", "type": ["null", {"type": "record", "name": "Place",
      "fields": [{"name": "city", "type": "string"}]}]}]}"""


def test_byte_array_schema_passes_bytes_through_and_refuses_other_values() -> None:
    schema = pickle.loads(pickle.dumps(ByteArraySchema()))
    assert schema.serialize(bytearray(b"\x00\xff")) == b"\x00\xff"
    assert schema.deserialize(b"\x01") == b"\x01"
    with pytest.raises(TypeError, match="str 'text'"):
        schema.serialize("text")


def test_row_field_extractor_takes_one_bytes_field_as_flink_does() -> None:
    row = Row(b"user-1", b'{"n": 1}', 3)
    assert RowFieldExtractorSchema(0).serialize(row) == b"user-1"
    assert RowFieldExtractorSchema(1).serialize((b"k", b"v")) == b"v"
    assert RowFieldExtractorSchema(0).serialize(None) == b""
    assert RowFieldExtractorSchema(0).serialize(Row(None, b"v")) == b""
    with pytest.raises(TypeError, match="field 2 must be of type bytes, got int 3"):
        RowFieldExtractorSchema(2).serialize(row)
    with pytest.raises(IndexError, match="out of range"):
        RowFieldExtractorSchema(5).serialize(row)
    with pytest.raises(ValueError, match="non-negative"):
        RowFieldExtractorSchema(-1)


CSV_TYPE = Types.ROW_NAMED(
    ["id", "name", "scores", "ok", "day", "raw"],
    [
        Types.INT(),
        Types.STRING(),
        Types.LIST(Types.DOUBLE()),
        Types.BOOLEAN(),
        Types.LOCAL_DATE(),
        Types.PRIMITIVE_ARRAY(Types.BYTE()),
    ],
)


def test_csv_rows_round_trip_with_quotes_arrays_dates_bytes_and_nulls() -> None:
    out = CsvRowSerializationSchema.Builder(CSV_TYPE).build()
    back = pickle.loads(pickle.dumps(CsvRowDeserializationSchema.Builder(CSV_TYPE).build()))
    row = (7, 'say "hi", then go', [1.5, 2.0], True, datetime.date(2026, 1, 2), b"\x00\x01")
    data = out.serialize(row)
    assert data == b'7,"say ""hi"", then go",1.5;2.0,true,2026-01-02,AAE=\n'
    assert tuple(back.deserialize(data)) == row
    nulls = back.deserialize(out.serialize((None, "x", None, None, None, None)))
    assert tuple(nulls) == (None, "x", [], None, None, None)  # an empty array reads as []
    assert out.serialize({"id": 1, "name": "d", "scores": [], "ok": False}) == (
        b"1,d,,false,,\n"  # a dict by name, missing fields null
    )


def test_csv_builders_set_delimiters_quotes_and_null_literals() -> None:
    t = Types.ROW([Types.INT(), Types.STRING()])
    out = (
        CsvRowSerializationSchema.Builder(t)
        .set_field_delimiter("|")
        .set_line_delimiter("")
        .set_null_literal("NULL")
        .disable_quote_character()
        .set_escape_character("\\")
        .build()
    )
    assert out.serialize((1, None)) == b"1|NULL"
    assert out.serialize((2, "a|b")) == b"2|a\\|b"
    back = (
        CsvRowDeserializationSchema.Builder(t)
        .set_field_delimiter("|")
        .set_null_literal("NULL")
        .set_escape_character("\\")
        .set_allow_comments(True)
        .build()
    )
    assert tuple(back.deserialize(b"2|a\\|b")) == (2, "a|b")
    assert tuple(back.deserialize(b"3|NULL\r\n")) == (3, None)
    assert back.deserialize(b"# a comment") is None
    with pytest.raises(ValueError, match="single character"):
        CsvRowSerializationSchema.Builder(t).set_field_delimiter("||")
    with pytest.raises(TypeError, match="RowTypeInfo"):
        CsvRowSerializationSchema.Builder(Types.STRING())


def test_a_csv_line_that_does_not_fit_names_the_field_and_value_or_is_skipped_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    strict = CsvRowDeserializationSchema.Builder(CSV_TYPE).build()
    with pytest.raises(ValueError, match=r"field 'id': 'seven' is not a valid Integer"):
        strict.deserialize(b"seven,a,,true,,")
    with pytest.raises(ValueError, match=r"field 'scores\[1\]': 'x' is not a valid Double"):
        strict.deserialize(b"1,a,1.0;x,true,,")
    with pytest.raises(ValueError, match=r"field 'ok': 'yes' is not a valid Boolean"):
        strict.deserialize(b"1,a,,yes,,")
    with pytest.raises(ValueError, match=r"2 field\(s\)"):
        strict.deserialize(b"1,a")
    with pytest.raises(ValueError, match=r"field 'id': 3000000000 is outside Integer"):
        CsvRowSerializationSchema.Builder(CSV_TYPE).build().serialize(
            (3_000_000_000, "a", [], True, None, None)
        )
    lenient = CsvRowDeserializationSchema.Builder(CSV_TYPE).set_ignore_parse_errors(True).build()
    with caplog.at_level(logging.WARNING, logger="cairn.formats"):
        kept = [lenient.deserialize(m) for m in (b"1,a,,true,,", b"x,a,,,,", b"2", b"3,c,,,,")]
    assert [r.id for r in kept if r is not None] == [1, 3]
    assert lenient.skipped_records == 2
    assert "field 'id': 'x'" in caplog.text  # the first skip is logged with its reason


def test_avro_rows_round_trip_nested_records_and_unions() -> None:
    out = pickle.loads(pickle.dumps(AvroRowSerializationSchema(avro_schema_string=AVRO)))
    back = AvroRowDeserializationSchema(avro_schema_string=AVRO)
    row = back.deserialize(out.serialize((1, "ada", ["a", "b"], Row(city="Oslo"))))
    assert tuple(row) == (1, "ada", ["a", "b"], Row(city="Oslo"))
    assert row.where.city == "Oslo" and row.get_field_names() == ["id", "user", "tags", "where"]
    by_name = {"id": 2, "user": "bo", "tags": [], "where": None}
    assert back.deserialize(out.serialize(by_name)).where is None


def test_avro_names_the_field_and_value_that_do_not_fit_or_skips_and_counts() -> None:
    out = AvroRowSerializationSchema(avro_schema_string=AVRO)
    with pytest.raises(ValueError, match=r"field 'id': 'one' \(str\) does not fit Avro type int"):
        out.serialize(("one", "ada", [], None))
    with pytest.raises(ValueError, match="has 2 fields"):
        out.serialize((1, "ada"))
    back = AvroRowDeserializationSchema(avro_schema_string=AVRO)
    with pytest.raises(ValueError, match="not an Avro record of schema 'Click'"):
        back.deserialize(b"\x02")
    with pytest.raises(ValueError, match="byte"):
        back.deserialize(out.serialize((1, "a", [], None)) + b"\x00")
    lenient = AvroRowDeserializationSchema(avro_schema_string=AVRO, ignore_parse_errors=True)
    assert lenient.deserialize(b"\x02") is None and lenient.skipped_records == 1
    with pytest.raises(ValueError, match="Java class"):
        AvroRowSerializationSchema(record_class="com.example.Click")
    with pytest.raises(ValueError, match="not a valid Avro schema"):
        AvroSchema.parse_string('{"type": "record"}')


def test_json_rows_name_the_field_and_value_and_count_skips() -> None:
    t = Types.ROW_NAMED(["n", "inner"], [Types.INT(), Types.ROW_NAMED(["x"], [Types.LONG()])])
    strict = JsonRowDeserializationSchema.builder().type_info(t).build()
    with pytest.raises(ValueError, match=r"field 'inner.x': 'q' is not a valid Long"):
        strict.deserialize(b'{"n": 1, "inner": {"x": "q"}}')
    lenient = JsonRowDeserializationSchema.builder().type_info(t).ignore_parse_errors().build()
    assert lenient.deserialize(b'{"n": "two"}') is None and lenient.skipped_records == 1


def test_the_schemas_import_from_pyflinks_paths() -> None:
    import cairn.common as common
    import cairn.datastream.formats.csv as csv_module

    assert common.CsvRowSerializationSchema is csv_module.CsvRowSerializationSchema
    assert common.AvroRowDeserializationSchema is AvroRowDeserializationSchema
    assert common.JsonRowDeserializationSchema is JsonRowDeserializationSchema
    from cairn.common.serialization import ByteArraySchema as B
    from cairn.common.serialization import RowFieldExtractorSchema as R

    assert (ByteArraySchema, RowFieldExtractorSchema) == (B, R)
