"""File formats with PyFlink's names, as jobs on the in-process executor: CSV, Avro, Parquet
and ORC written by a FileSink and read back by a FileSource (or create_input); a bulk
reader resumes after the records it returned; a bad line fails naming file, line, field and
value, or is skipped and counted."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from cairn.common import Row, Types, WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.file_system import FileSink, FileSource
from cairn.datastream.formats.avro import AvroInputFormat, AvroSchema, AvroWriters
from cairn.datastream.formats.csv import CsvBulkWriters, CsvReaderFormat, CsvSchema
from cairn.datastream.formats.orc import OrcBulkWriters
from cairn.datastream.formats.parquet import (
    AvroParquetReaders,
    AvroParquetWriters,
    ParquetBulkWriters,
    ParquetColumnarRowInputFormat,
)

USER = AvroSchema.parse_string(
    """{"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}"""
)
ROW = Types.ROW_NAMED(["name", "age"], [Types.STRING(), Types.INT()])


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(parallelism)
    return env


def _write(records: list[Any], factory: Any, out: Path, parallelism: int = 1) -> list[Path]:
    env = _env(parallelism)
    sink = FileSink.for_bulk_format(str(out), factory).build()
    env.from_collection(records).sink_to(sink)
    env.execute("write")
    return sorted(p for p in out.rglob("*") if p.is_file() and not p.name.startswith("."))


def _read(source: FileSource) -> list[Any]:
    env = _env(2)
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "files")
    with ds.execute_and_collect() as results:
        return list(results)


def test_csv_files_round_trip_through_sink_and_source_with_a_header(tmp_path: Path) -> None:
    schema = (
        CsvSchema.builder()
        .add_string_column("name")
        .add_number_column("age", number_type=Types.INT())
        .add_array_column("tags", separator="#", element_type=Types.STRING())
        .set_column_separator("|")
        .set_use_header()
        .set_strict_headers()
        .build()
    )
    people = [("ada", 36, ["x", "y"]), ("bo", 7, []), ("cy", 51, ["z"])]
    files = _write(people, CsvBulkWriters.for_schema(schema), tmp_path / "out")
    assert files[0].read_text().splitlines()[:2] == ["name|age|tags", "ada|36|x#y"]
    fmt = pickle.loads(pickle.dumps(CsvReaderFormat.for_schema(schema)))
    rows = _read(FileSource.for_record_stream_format(fmt, str(tmp_path / "out")).build())
    assert sorted(tuple(r) for r in rows) == [
        ("ada", 36, ["x", "y"]),
        ("bo", 7, []),
        ("cy", 51, ["z"]),
    ]
    assert rows[0].get_field_names() == ["name", "age", "tags"]


def test_a_bad_csv_line_names_file_line_field_and_value_or_is_skipped(tmp_path: Path) -> None:
    schema = CsvSchema.builder().add_string_column("name").add_number_column("age").build()
    data = tmp_path / "people.csv"
    data.write_text("ada,36\nbo,seven\ncy,51\n")
    strict = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), str(data))
    reader = strict.build().create_reader(strict.build().create_splits(1), _ctx())
    with pytest.raises(ValueError, match=r"people\.csv: line 2: field 'age': 'seven' is not a"):
        reader.poll_batch(10)
    lenient = CsvReaderFormat.for_schema(schema).with_ignore_parse_errors()
    source = FileSource.for_record_stream_format(lenient, str(data)).build()
    reader = source.create_reader(source.create_splits(1), _ctx())
    assert [tuple(r) for r in reader.poll_batch(10) or []] == [("ada", 36), ("cy", 51)]
    assert reader._format.skipped_records == 1  # type: ignore[attr-defined]


def _ctx() -> Any:
    from tests.unit._sources import ctx

    return ctx(0, 1)


def test_avro_files_round_trip_and_read_with_create_input(tmp_path: Path) -> None:
    users = [
        {"name": "ada", "age": 36, "tags": ["x"]},
        Row(name="bo", age=7, tags=[]),  # a named Row, by name
        ("cy", 51, ["y", "z"]),  # a tuple, by position
    ]
    files = _write(users, AvroWriters.for_generic_record(USER, codec="deflate"), tmp_path / "o")
    with files[0].open("rb") as f:
        assert [r["name"] for r in fastavro.reader(f)] == ["ada", "bo", "cy"]
    env = _env()
    ds = env.create_input(AvroInputFormat(str(files[0]), USER))
    with ds.execute_and_collect() as results:
        records = list(results)
    assert records == [
        {"name": "ada", "age": 36, "tags": ["x"]},
        {"name": "bo", "age": 7, "tags": []},
        {"name": "cy", "age": 51, "tags": ["y", "z"]},
    ]
    with pytest.raises(Exception, match=r"field 'age': 'old' \(str\) does not fit Avro type int"):
        _write([("dan", "old", [])], AvroWriters.for_generic_record(USER), tmp_path / "bad")


def test_a_bulk_reader_resumes_after_the_records_it_returned(tmp_path: Path) -> None:
    path = tmp_path / "users.avro"
    with path.open("wb") as f:
        records = [{"name": f"u{i}", "age": i, "tags": []} for i in range(2500)]
        fastavro.writer(f, USER.parsed, records, sync_interval=1000)
    source = FileSource.for_bulk_file_format(AvroInputFormat(str(path), USER), str(path)).build()
    reader = source.create_reader(source.create_splits(1), _ctx())
    first = (reader.poll_batch(700) or []) + (reader.poll_batch(700) or [])
    state = pickle.loads(pickle.dumps(reader.snapshot_state(1)))
    reader.close()
    assert state[0].offset == len(first) > 700 and not state[0].finished
    again = source.create_reader(state, _ctx())
    rest: list[Any] = []
    while (batch := again.poll_batch(1000)) is not None:
        rest += batch
    assert [r["age"] for r in first + rest] == list(range(2500))


def test_parquet_and_orc_from_row_types_read_back_as_rows(tmp_path: Path) -> None:
    people = [Row(name="ada", age=36), ("bo", 7), {"name": "cy", "age": None}]
    files = _write(people, ParquetBulkWriters.for_row_type(ROW), tmp_path / "pq")
    assert pq.read_table(files[0]).schema.field("age").type == pa.int32()
    fmt = ParquetColumnarRowInputFormat(row_type=ROW, batch_size=2, is_case_sensitive=False)
    rows = _read(FileSource.for_bulk_file_format(fmt, str(tmp_path / "pq")).build())
    assert sorted(tuple(r) for r in rows) == [("ada", 36), ("bo", 7), ("cy", None)]
    assert rows[0].get_field_names() == ["name", "age"]
    (orc_file,) = _write(people, OrcBulkWriters.for_row_type(ROW), tmp_path / "orc")
    assert orc.read_table(str(orc_file)).to_pylist() == [
        {"name": "ada", "age": 36},
        {"name": "bo", "age": 7},
        {"name": "cy", "age": None},
    ]
    with pytest.raises(Exception, match=r"part-.*: the Parquet file has no column 'height'"):
        other = Types.ROW_NAMED(["height"], [Types.DOUBLE()])
        _read(
            FileSource.for_bulk_file_format(
                ParquetColumnarRowInputFormat(row_type=other), str(tmp_path / "pq")
            ).build()
        )


def test_avro_records_in_parquet_files(tmp_path: Path) -> None:
    users = [{"name": "ada", "age": 36, "tags": ["x"]}, {"name": "bo", "age": 7, "tags": []}]
    _write(users, AvroParquetWriters.for_generic_record(USER), tmp_path / "apq")
    fmt = AvroParquetReaders.for_generic_record(USER)
    records = _read(FileSource.for_bulk_file_format(fmt, str(tmp_path / "apq")).build())
    assert sorted(records, key=lambda r: r["name"]) == users
