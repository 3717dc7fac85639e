"""Avro with PyFlink's names (``AvroSchema``, ``AvroRowSerializationSchema``,
``AvroRowDeserializationSchema``), on fastavro.

Invariant: an ``AvroSchema`` is a picklable value holding the schema's JSON text (parsed once
per process); the row schemas write and read Avro's binary encoding of one record without a
header (Flink's ``AvroRowSerializationSchema``), so ``deserialize(serialize(row))`` gives the
row back. A record that does not fit fails naming the field and the value; with
``ignore_parse_errors`` an unreadable message is skipped and counted.

>>> schema = '''{"type": "record", "name": "TestRecord", "fields": [
...     {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}'''
>>> ser = AvroRowSerializationSchema(avro_schema_string=schema)
>>> AvroRowDeserializationSchema(avro_schema_string=schema).deserialize(ser.serialize((1, "hi")))
Row(id=1, name='hi')
>>> ser.serialize(("one", "hi"))
Traceback (most recent call last):
...
ValueError: field 'id': 'one' (str) does not fit Avro type int
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import fastavro
from fastavro.validation import ValidationError, validate

from cairn.common.formats.values import ParseErrors
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.types import Row

__all__ = ["AvroRowDeserializationSchema", "AvroRowSerializationSchema", "AvroSchema"]


class AvroSchema:
    """An Avro schema (PyFlink's ``AvroSchema``): ``parse_string(json)`` or ``parse_file(path)``.

    >>> AvroSchema.parse_string('{"type": "record", "name": "R", "fields": []}').name
    'R'
    """

    def __init__(self, schema_json: str) -> None:
        self.schema_string = schema_json
        self._parsed: Any = None
        self.parsed  # noqa: B018 - an invalid schema fails here, on the driver

    @staticmethod
    def parse_string(json_schema: str) -> AvroSchema:
        return AvroSchema(json_schema)

    @staticmethod
    def parse_file(file_path: str) -> AvroSchema:
        return AvroSchema(Path(file_path).read_text(encoding="utf-8"))

    @property
    def parsed(self) -> Any:
        """fastavro's parsed schema."""
        if self._parsed is None:
            try:
                self._parsed = fastavro.parse_schema(json.loads(self.schema_string))
            except (ValueError, fastavro.schema.SchemaParseException) as exc:
                raise ValueError(f"not a valid Avro schema: {exc}") from None
        return self._parsed

    @property
    def name(self) -> str | None:
        parsed = self.parsed
        return parsed.get("name") if isinstance(parsed, dict) else None

    @property
    def field_names(self) -> list[str]:
        parsed = self.parsed
        if not (isinstance(parsed, dict) and parsed.get("type") == "record"):
            return []
        return [f["name"] for f in parsed["fields"]]

    def __getstate__(self) -> dict[str, Any]:
        return {"schema_string": self.schema_string, "_parsed": None}

    def __str__(self) -> str:
        return self.schema_string

    def __repr__(self) -> str:
        return f"AvroSchema.parse_string({self.schema_string!r})"


def to_avro(value: Any, schema: Any) -> Any:
    """A Python record as the dicts fastavro writes: dicts, and ``Row``s having every field
    name of the record, by name; other ``Row``s and tuples by position (Flink's way, so
    ``Types.ROW``'s ``f0, f1...`` fit any record); nested rows become nested records."""
    if isinstance(schema, list):  # a union: a row goes into its record branch
        if isinstance(value, Row | tuple):
            for branch in schema:
                if isinstance(branch, dict) and branch.get("type") == "record":
                    return to_avro(value, branch)
        return value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind == "record" and value is not None:
        fields = schema["fields"]
        names = value.get_field_names() if isinstance(value, Row) else None
        if names is not None and {f["name"] for f in fields} <= set(names):
            value = value.as_dict()  # else by position, as Flink's Row (f0, f1... too)
        if isinstance(value, Mapping):
            return {f["name"]: to_avro(value.get(f["name"]), f["type"]) for f in fields}
        values = list(value)
        if len(values) != len(fields):
            names = [f["name"] for f in fields]
            raise ValueError(f"{value!r} has {len(values)} fields, the Avro record {names}")
        return {f["name"]: to_avro(v, f["type"]) for f, v in zip(fields, values, strict=True)}
    if kind == "array" and isinstance(value, list | tuple):
        return [to_avro(v, schema["items"]) for v in value]
    if kind == "map" and isinstance(value, Mapping):
        return {k: to_avro(v, schema["values"]) for k, v in value.items()}
    return value


def to_row(value: Any) -> Any:
    """fastavro's dicts of records as named ``Row``s (Flink's ``AvroRowDeserializationSchema``)."""
    if isinstance(value, dict):
        row = Row(*(to_row(v) for v in value.values()))
        row.set_field_names(list(value))
        return row
    if isinstance(value, list):
        return [to_row(v) for v in value]
    return value


def describe_mismatch(record: Any, schema: Any, top: str | None) -> str:
    """Which field and value of ``record`` do not fit ``schema`` (fastavro's validation)."""
    try:
        validate(record, schema, raise_errors=True)
    except ValidationError as exc:
        for error in exc.errors:
            field = str(error.field)
            if top and field.startswith(top + "."):
                field = field[len(top) + 1 :]
            datum = error.datum
            kind = error.schema if isinstance(error.schema, str) else json.dumps(error.schema)
            return (
                f"field {field!r}: {datum!r} ({type(datum).__name__}) does not fit Avro type {kind}"
            )
    return f"{record!r} does not fit the Avro schema"


def _schema(record_class: str | None, avro_schema_string: str | None, who: str) -> AvroSchema:
    if record_class is not None:
        raise ValueError(
            f"{who}(record_class=...) names a Java class; Cairn has no JVM: pass "
            "avro_schema_string (the class's schema as JSON)"
        )
    if avro_schema_string is None:
        raise TypeError("record_class or avro_schema_string should be specified.")
    return AvroSchema(avro_schema_string)


class AvroRowSerializationSchema(SerializationSchema):
    """Rows to Avro's binary encoding of one record (no header, no schema registry)."""

    def __init__(
        self, record_class: str | None = None, avro_schema_string: str | None = None
    ) -> None:
        self.schema = _schema(record_class, avro_schema_string, "AvroRowSerializationSchema")

    def serialize(self, element: Any) -> bytes:
        parsed = self.schema.parsed
        record = to_avro(element, parsed)
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, record)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError):
            raise ValueError(describe_mismatch(record, parsed, self.schema.name)) from None
        return out.getvalue()


class AvroRowDeserializationSchema(DeserializationSchema):
    """Avro's binary encoding of one record to a named ``Row`` (nested records: ``Row``s).

    ``ignore_parse_errors=True`` (a Cairn extension) skips and counts unreadable messages.
    """

    def __init__(
        self,
        record_class: str | None = None,
        avro_schema_string: str | None = None,
        ignore_parse_errors: bool = False,
    ) -> None:
        self.schema = _schema(record_class, avro_schema_string, "AvroRowDeserializationSchema")
        self.ignore_parse_errors = ignore_parse_errors
        self.errors = ParseErrors("AvroRowDeserializationSchema")

    @property
    def skipped_records(self) -> int:
        return self.errors.skipped

    def deserialize(self, message: bytes) -> Any:
        stream = io.BytesIO(message)
        try:
            record = fastavro.schemaless_reader(stream, self.schema.parsed, None)
            if stream.tell() != len(message):
                raise ValueError(f"{len(message) - stream.tell()} byte(s) after the record")
        except (EOFError, ValueError, TypeError, IndexError, UnicodeDecodeError) as exc:
            error = ValueError(
                f"not an Avro record of schema {self.schema.name!r} "
                f"({len(message)} bytes): {type(exc).__name__}: {exc}"
            )
            if self.ignore_parse_errors:
                self.errors.skip(error)
                return None
            raise error from None
        return to_row(record)
