"""CSV rows with PyFlink's names (``CsvRowSerializationSchema`` / ``CsvRowDeserializationSchema``).

Invariant: a ``CsvDialect`` is a picklable value; ``parse_line`` of ``format_line(row)`` gives
the row back (for the types ``values.parse_text`` knows: numbers, booleans, strings, dates
and times, arrays joined by the array delimiter, bytes in base64). A line that does not fit
the row type fails naming the field and the value, or is skipped and counted
(``set_ignore_parse_errors(True)``).

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
import io
from dataclasses import dataclass, replace
from typing import Any

from cairn.common.formats.values import ParseErrors, check_value, format_text, parse_text
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.typeinfo import BasicTypeInfo, RowTypeInfo, TypeInformation
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


def _is_string(type_info: TypeInformation) -> bool:
    return isinstance(type_info, BasicTypeInfo) and type_info.name in ("String", "Character")


def _is_list(type_info: TypeInformation) -> bool:
    # Byte arrays are bytes, for which "" is null like any other non-string field.
    element = getattr(type_info, "element_type", None)
    return element is not None and getattr(element, "name", None) != "Byte"


def parse_fields(
    fields: list[str], row_type: RowTypeInfo, dialect: CsvDialect, where: str = ""
) -> Row:
    """A ``Row`` of ``row_type`` from the texts of one CSV line; ``ValueError`` names the
    field and the value that do not fit."""
    names = row_type.get_field_names()
    types = row_type.get_field_types()
    if len(fields) != len(names):
        raise ValueError(
            f"{where}a CSV line of {len(fields)} field(s) {fields!r} does not fit the row "
            f"type's {len(names)} {names}"
        )
    values: list[Any] = []
    for text, name, type_info in zip(fields, names, types, strict=True):
        if text == dialect.null_literal or (
            text == "" and not _is_string(type_info) and not _is_list(type_info)
        ):
            values.append(None)
        else:
            values.append(parse_text(text, type_info, name, dialect.array_element_delimiter))
    row = Row(*values)
    row.set_field_names(names)
    return row


def format_fields(row: Any, row_type: RowTypeInfo, dialect: CsvDialect) -> list[str | None]:
    """The texts of a row's fields (``ValueError`` naming a field whose value does not fit)."""
    names = row_type.get_field_names()
    if isinstance(row, dict):
        row = tuple(row.get(n) for n in names)
    if len(row) != len(names):
        raise ValueError(f"{row!r} has {len(row)} fields, the CSV row type {len(names)} {names}")
    checked = check_value(tuple(row), row_type, "")
    return [
        dialect.null_literal if v is None else format_text(v, dialect.array_element_delimiter)
        for v in checked
    ]


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

    def serialize(self, element: Any) -> bytes:
        return self.dialect.join(format_fields(element, self.type_info, self.dialect)).encode()


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

    @property
    def skipped_records(self) -> int:
        return self.errors.skipped

    def deserialize(self, message: bytes) -> Any:
        try:
            line = message.decode("utf-8").rstrip("\r\n")
            if self.dialect.allow_comments and line.startswith("#"):
                return None
            return parse_fields(self.dialect.split(line), self.type_info, self.dialect)
        except (ValueError, csv.Error) as exc:
            if self.ignore_parse_errors:
                self.errors.skip(exc)
                return None
            raise
