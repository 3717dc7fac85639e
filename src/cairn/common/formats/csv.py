"""CSV rows with PyFlink's names (``CsvRowSerializationSchema`` / ``CsvRowDeserializationSchema``).

Invariant: a ``CsvDialect`` is a picklable value; parsing the line a schema formats gives the
row back, for every type Flink's CSV takes: scalars (dates and times in ISO 8601, bytes in
base64), arrays of scalars and nested rows of scalars (both joined by the array delimiter).
A row type with a field CSV cannot take (a map, an array of arrays, a pickled object) is
refused when the schema is built, naming the type. A line that does not fit the row type
fails naming the field and the value, or is skipped and counted
(``set_ignore_parse_errors(True)``). Each schema builds its field parsers and formatters once.

>>> from cairn.common.typeinfo import Types
>>> row = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
>>> ser = CsvRowSerializationSchema.Builder(row).build()
>>> ser.serialize((1, "hi, there"))
b'1,"hi, there"\\n'
>>> CsvRowDeserializationSchema.Builder(row).build().deserialize(b'1,"hi, there"\\n')
Row(id=1, name='hi, there')
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass, replace
from typing import Any

from cairn.common.formats.values import ParseErrors, text_formatter, text_parser, value_checker
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.type_kind import TypeKind
from cairn.common.typeinfo import RowTypeInfo, TypeInformation
from cairn.common.types import Row

__all__ = [
    "CsvDialect",
    "CsvRowDeserializationSchema",
    "CsvRowDeserializationSchemaBuilder",
    "CsvRowSerializationSchema",
    "CsvRowSerializationSchemaBuilder",
]


def _char(value: str, what: str) -> str:
    if not isinstance(value, str) or len(value) != 1:
        raise ValueError(f"{what} must be a single character, got {value!r}")
    return value


@dataclass(frozen=True)
class CsvDialect:
    """How fields are separated, quoted and escaped, and how nulls and arrays are written."""

    field_delimiter: str = ","
    quote_character: str | None = '"'
    escape_character: str | None = None
    array_element_delimiter: str = ";"
    null_literal: str | None = None
    line_delimiter: str = "\n"
    allow_comments: bool = False

    def _csv_args(self) -> dict[str, Any]:
        quoting = csv.QUOTE_MINIMAL if self.quote_character else csv.QUOTE_NONE
        return {
            "delimiter": self.field_delimiter,
            "quotechar": self.quote_character or '"',
            "escapechar": self.escape_character,
            "quoting": quoting,
            "doublequote": self.escape_character is None,
            "strict": False,
        }

    def split(self, line: str) -> list[str]:
        """The fields of one line (without its line break)."""
        return next(csv.reader([line], **self._csv_args()), [])

    def join(self, fields: list[str | None]) -> str:
        out = io.StringIO()
        csv.writer(out, lineterminator=self.line_delimiter, **self._csv_args()).writerow(
            "" if f is None else f for f in fields
        )
        return out.getvalue()


class RowCodec:
    """A row type's fields to and from the texts of one CSV line, built once per schema: a
    parser and a formatter per field (``values.text_parser``/``text_formatter``)."""

    def __init__(self, row_type: RowTypeInfo, dialect: CsvDialect) -> None:
        self.names = row_type.get_field_names()
        types = row_type.get_field_types()
        delimiter = dialect.array_element_delimiter
        self.null_literal = dialect.null_literal
        # "" is null, except for strings and arrays (an empty array); bytes "" is null too
        self.parsers = [
            (text_parser(t, n, delimiter), t.kind not in (TypeKind.STRING, TypeKind.ARRAY))
            for n, t in zip(self.names, types, strict=True)
        ]
        self.formatters = [text_formatter(t, delimiter) for t in types]
        self.check = value_checker(row_type)

    def parse(self, fields: list[str], where: str = "") -> Row:
        """A ``Row`` from the texts of one line; ``ValueError`` names the field and value."""
        if len(fields) != len(self.parsers):
            raise ValueError(
                f"{where}a CSV line of {len(fields)} field(s) {fields!r} does not fit the row "
                f"type's {len(self.names)} {self.names}"
            )
        null = self.null_literal
        row = Row(
            *(
                None if text == null or (empty_is_null and text == "") else parse(text)
                for text, (parse, empty_is_null) in zip(fields, self.parsers, strict=True)
            )
        )
        row.set_field_names(self.names)
        return row

    def format(self, row: Any) -> list[str | None]:
        """The texts of a row's fields (``ValueError`` naming a field that does not fit)."""
        names = self.names
        if isinstance(row, dict):
            row = tuple(row.get(n) for n in names)
        if len(row) != len(names):
            raise ValueError(
                f"{row!r} has {len(row)} fields, the CSV row type {len(names)} {names}"
            )
        checked = self.check(tuple(row), "")
        null = self.null_literal
        return [null if v is None else f(v) for f, v in zip(self.formatters, checked, strict=True)]


@functools.lru_cache(maxsize=64)
def row_codec(row_type: RowTypeInfo, dialect: CsvDialect) -> RowCodec:
    """The codec of a row type and dialect (built once; both are hashable values)."""
    return RowCodec(row_type, dialect)


def parse_fields(
    fields: list[str], row_type: RowTypeInfo, dialect: CsvDialect, where: str = ""
) -> Row:
    """A ``Row`` of ``row_type`` from the texts of one CSV line; ``ValueError`` names the
    field and the value that do not fit."""
    return row_codec(row_type, dialect).parse(fields, where)


def format_fields(row: Any, row_type: RowTypeInfo, dialect: CsvDialect) -> list[str | None]:
    """The texts of a row's fields (``ValueError`` naming a field whose value does not fit)."""
    return row_codec(row_type, dialect).format(row)


def _row_type(type_info: TypeInformation) -> RowTypeInfo:
    if not isinstance(type_info, RowTypeInfo):
        raise TypeError(f"CSV needs a RowTypeInfo (Types.ROW / Types.ROW_NAMED), got {type_info}")
    return type_info


class CsvRowSerializationSchemaBuilder:
    """PyFlink's ``CsvRowSerializationSchema.Builder(type_info)``."""

    def __init__(self, type_info: TypeInformation) -> None:
        self._type_info = _row_type(type_info)
        self._dialect = CsvDialect()

    def set_field_delimiter(self, c: str) -> CsvRowSerializationSchemaBuilder:
        self._dialect = replace(self._dialect, field_delimiter=_char(c, "field delimiter"))
        return self

    def set_line_delimiter(self, delimiter: str) -> CsvRowSerializationSchemaBuilder:
        if delimiter not in ("\n", "\r", "\r\n", ""):
            raise ValueError(f"line delimiter must be \\n, \\r, \\r\\n or '', got {delimiter!r}")
        self._dialect = replace(self._dialect, line_delimiter=delimiter)
        return self

    def set_array_element_delimiter(self, delimiter: str) -> CsvRowSerializationSchemaBuilder:
        self._dialect = replace(self._dialect, array_element_delimiter=delimiter)
        return self

    def disable_quote_character(self) -> CsvRowSerializationSchemaBuilder:
        self._dialect = replace(self._dialect, quote_character=None)
        return self

    def set_quote_character(self, c: str) -> CsvRowSerializationSchemaBuilder:
        self._dialect = replace(self._dialect, quote_character=_char(c, "quote character"))
        return self

    def set_escape_character(self, c: str) -> CsvRowSerializationSchemaBuilder:
        self._dialect = replace(self._dialect, escape_character=_char(c, "escape character"))
        return self

    def set_null_literal(self, s: str) -> CsvRowSerializationSchemaBuilder:
        self._dialect = replace(self._dialect, null_literal=s)
        return self

    def build(self) -> CsvRowSerializationSchema:
        return CsvRowSerializationSchema(self._type_info, self._dialect)


class CsvRowSerializationSchema(SerializationSchema):
    """Rows (or tuples, dicts by name) of a row type to one CSV line each, UTF-8."""

    Builder = CsvRowSerializationSchemaBuilder

    def __init__(self, type_info: TypeInformation, dialect: CsvDialect = CsvDialect()) -> None:
        self.type_info = _row_type(type_info)
        self.dialect = dialect
        self._codec = row_codec(self.type_info, dialect)

    def serialize(self, element: Any) -> bytes:
        return self.dialect.join(self._codec.format(element)).encode()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_codec"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._codec = row_codec(self.type_info, self.dialect)


class CsvRowDeserializationSchemaBuilder:
    """PyFlink's ``CsvRowDeserializationSchema.Builder(type_info)``."""

    def __init__(self, type_info: TypeInformation) -> None:
        self._type_info = _row_type(type_info)
        self._dialect = CsvDialect()
        self._ignore = False

    def set_field_delimiter(self, delimiter: str) -> CsvRowDeserializationSchemaBuilder:
        self._dialect = replace(self._dialect, field_delimiter=_char(delimiter, "delimiter"))
        return self

    def set_allow_comments(self, allow_comments: bool) -> CsvRowDeserializationSchemaBuilder:
        self._dialect = replace(self._dialect, allow_comments=bool(allow_comments))
        return self

    def set_array_element_delimiter(self, delimiter: str) -> CsvRowDeserializationSchemaBuilder:
        self._dialect = replace(self._dialect, array_element_delimiter=delimiter)
        return self

    def set_quote_character(self, c: str) -> CsvRowDeserializationSchemaBuilder:
        self._dialect = replace(self._dialect, quote_character=_char(c, "quote character"))
        return self

    def set_escape_character(self, c: str) -> CsvRowDeserializationSchemaBuilder:
        self._dialect = replace(self._dialect, escape_character=_char(c, "escape character"))
        return self

    def set_null_literal(self, null_literal: str) -> CsvRowDeserializationSchemaBuilder:
        self._dialect = replace(self._dialect, null_literal=null_literal)
        return self

    def set_ignore_parse_errors(
        self, ignore_parse_errors: bool
    ) -> CsvRowDeserializationSchemaBuilder:
        self._ignore = bool(ignore_parse_errors)
        return self

    def build(self) -> CsvRowDeserializationSchema:
        return CsvRowDeserializationSchema(self._type_info, self._dialect, self._ignore)


class CsvRowDeserializationSchema(DeserializationSchema):
    """One CSV line (UTF-8, trailing line break optional) to a ``Row`` of the row type.

    A line that does not fit raises ``ValueError`` naming the field and the value; with
    ``set_ignore_parse_errors(True)`` it becomes ``None`` (the Kafka source drops it) and is
    counted in ``skipped_records``. Comment lines (``#``, with ``set_allow_comments``) give
    ``None`` too, uncounted.
    """

    Builder = CsvRowDeserializationSchemaBuilder

    def __init__(
        self,
        type_info: TypeInformation,
        dialect: CsvDialect = CsvDialect(),
        ignore_parse_errors: bool = False,
    ) -> None:
        self.type_info = _row_type(type_info)
        self.dialect = dialect
        self.ignore_parse_errors = ignore_parse_errors
        self.errors = ParseErrors("CsvRowDeserializationSchema")
        self._codec = row_codec(self.type_info, dialect)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_codec"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._codec = row_codec(self.type_info, self.dialect)

    @property
    def skipped_records(self) -> int:
        return self.errors.skipped

    def deserialize(self, message: bytes) -> Any:
        try:
            line = message.decode("utf-8").rstrip("\r\n")
            if self.dialect.allow_comments and line.startswith("#"):
                return None
            return self._codec.parse(self.dialect.split(line))
        except (ValueError, csv.Error) as exc:
            if self.ignore_parse_errors:
                self.errors.skip(exc)
                return None
            raise
