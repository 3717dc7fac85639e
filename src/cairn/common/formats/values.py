"""Field values of the row formats: text to a typed value and back, and bad-record counting.

Invariant: the parser of a type (``text_parser``) returns exactly what
``type_conversion.convert`` accepts for it, or raises ``ValueError`` naming the field and
the value; its formatter (``text_formatter``) writes what the parser reads back. Both are
built once per field, by a ``TypeVisitor``; text takes scalars, arrays of scalars (joined by
the array delimiter) and rows of scalars (likewise), as Flink's CSV does, and refuses maps
and deeper nesting by name. ``ParseErrors`` counts every record a schema skipped
(``ignore_parse_errors``) and logs the first and each 10**n-th.

>>> from cairn.common.typeinfo import Types
>>> parse_text("42", Types.INT(), "id"), parse_text("true", Types.BOOLEAN(), "ok")
(42, True)
>>> parse_text("4x", Types.INT(), "id")
Traceback (most recent call last):
...
ValueError: field 'id': '4x' is not a valid Integer
>>> text_formatter(Types.LIST(Types.BOOLEAN()))([True, False])
'true;false'
"""

from __future__ import annotations

import base64
import datetime
import decimal
import logging
from collections.abc import Callable
from typing import Any

from cairn.common.type_conversion import Converter, converter
from cairn.common.type_visitor import TypeKind, TypeVisitor, scalar_name
from cairn.common.typeinfo import TypeInformation
from cairn.common.types import Row

__all__ = [
    "ParseErrors",
    "TextFormatter",
    "TextParser",
    "check_value",
    "parse_text",
    "text_formatter",
    "text_parser",
    "value_checker",
]

_LOG = logging.getLogger("cairn.formats")

TextParser = Callable[[str], Any]
TextFormatter = Callable[[Any], str]


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(text)


def _timestamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.strip())


_PARSERS: dict[str, Callable[[str], Any]] = {
    "Byte": int,
    "Short": int,
    "Integer": int,
    "Long": int,
    "BigInteger": int,
    "Float": float,
    "Double": float,
    "BigDecimal": decimal.Decimal,
    "Boolean": _bool,
    "String": str,
    "Character": str,
    "Date": datetime.date.fromisoformat,
    "LocalDate": datetime.date.fromisoformat,
    "Time": datetime.time.fromisoformat,
    "LocalTime": datetime.time.fromisoformat,
    "Timestamp": _timestamp,
    "LocalDateTime": _timestamp,
    "Instant": _timestamp,
}


def parse_text(
    text: str, type_info: TypeInformation, field: str, array_delimiter: str = ";"
) -> Any:
    """The value of ``text`` as ``type_info`` (arrays split on ``array_delimiter``; byte
    arrays in base64, as Flink's CSV writes them). Formats build ``text_parser`` once."""
    return text_parser(type_info, field, array_delimiter)(text)


def text_parser(type_info: TypeInformation, field: str, array_delimiter: str = ";") -> TextParser:
    """The parser of one field's text; ``UnsupportedTypeError`` for a type text cannot take."""
    return _TextParsers(field, array_delimiter, nested=False).visit(type_info)


def text_formatter(type_info: TypeInformation, array_delimiter: str = ";") -> TextFormatter:
    """The text of a (checked, non-null) value of ``type_info``, as ``text_parser`` reads it."""
    return _TextFormatters(array_delimiter, nested=False).visit(type_info)


def _invalid(field: str, text: str, t: TypeInformation) -> ValueError:
    return ValueError(f"field {field!r}: {text!r} is not a valid {t!r}")


_FLAT = "text takes scalars, and arrays and rows of scalars"


class _TextParsers(TypeVisitor[TextParser]):
    format = "CSV"

    def __init__(self, field: str, delimiter: str, nested: bool) -> None:
        self.field = field
        self.delimiter = delimiter
        self.nested = nested

    def unsupported(self, t: TypeInformation, why: str = "") -> TextParser:
        return super().unsupported(t, f"field {self.field!r}" + (why and f"; {why}"))

    def _inner(self, field: str) -> _TextParsers:
        return _TextParsers(field, self.delimiter, nested=True)

    def visit_scalar(self, t: TypeInformation) -> TextParser:
        parse, check, field = _PARSERS[scalar_name(t)], converter(t), self.field
        strip = parse is not str

        def parse_scalar(text: str) -> Any:
            try:
                return check(parse(text.strip() if strip else text), field)
            except (TypeError, ValueError, ArithmeticError):
                raise _invalid(field, text, t) from None

        return parse_scalar

    def visit_bytes(self, t: TypeInformation) -> TextParser:
        field = self.field

        def parse_bytes(text: str) -> bytes:
            try:
                return base64.b64decode(text, validate=True)
            except ValueError:
                raise _invalid(field, text, t) from None

        return parse_bytes

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> TextParser:
        if self.nested:
            return self.unsupported(t, _FLAT)
        field, delimiter = self.field, self.delimiter
        each = self._inner(f"{field}[]").visit(element)

        def parse_array(text: str) -> list[Any]:
            out = []
            for i, part in enumerate(text.split(delimiter) if text else ()):
                try:
                    out.append(each(part))
                except ValueError:
                    raise _invalid(f"{field}[{i}]", part, element) from None
            return out

        return parse_array

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> TextParser:
        values = self._fields(t, [f".{n}" for n in names], types)

        def parse_row(text: str) -> Row:
            row = Row(*values(text))
            row.set_field_names(names)
            return row

        return parse_row

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> TextParser:
        values = self._fields(t, [f"[{i}]" for i in range(len(types))], types)
        return lambda text: tuple(values(text))

    def _fields(
        self, t: TypeInformation, paths: list[str], types: list[TypeInformation]
    ) -> Callable[[str], list[Any]]:
        """A nested row's fields, joined by the array delimiter as Flink's CSV writes them."""
        if self.nested:
            return self.unsupported(t, _FLAT)
        field, delimiter = self.field, self.delimiter
        fields = [
            (self._inner(field + p).visit(f), field + p, f, f.kind is not TypeKind.STRING)
            for p, f in zip(paths, types, strict=True)
        ]

        def parse_fields(text: str) -> list[Any]:
            parts = text.split(delimiter)
            if len(parts) != len(fields):
                raise ValueError(
                    f"field {field!r}: {text!r} has {len(parts)} of {t!r}'s {len(fields)} fields"
                )
            out = []
            for (parse, path, f, empty_is_null), part in zip(fields, parts, strict=True):
                try:
                    out.append(None if empty_is_null and part == "" else parse(part))
                except ValueError:
                    raise _invalid(path, part, f) from None
            return out

        return parse_fields


class _TextFormatters(TypeVisitor[TextFormatter]):
    format = "CSV"

    def __init__(self, delimiter: str, nested: bool) -> None:
        self.delimiter = delimiter
        self.nested = nested

    def visit_scalar(self, t: TypeInformation) -> TextFormatter:
        return str

    def visit_boolean(self, t: TypeInformation) -> TextFormatter:
        return lambda value: "true" if value else "false"

    def visit_timestamp(self, t: TypeInformation) -> TextFormatter:
        return lambda value: value.isoformat(sep=" ")

    visit_instant = visit_timestamp

    def visit_bytes(self, t: TypeInformation) -> TextFormatter:
        return lambda value: base64.b64encode(value).decode("ascii")

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> TextFormatter:
        if self.nested:
            return self.unsupported(t, _FLAT)
        each = _TextFormatters(self.delimiter, nested=True).visit(element)
        delimiter = self.delimiter
        return lambda values: delimiter.join("None" if v is None else each(v) for v in values)

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> TextFormatter:
        return self.visit_tuple(t, types)

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> TextFormatter:
        if self.nested:
            return self.unsupported(t, _FLAT)
        fields = [_TextFormatters(self.delimiter, nested=True).visit(f) for f in types]
        delimiter = self.delimiter
        return lambda values: delimiter.join(
            "" if v is None else f(v) for f, v in zip(fields, values, strict=True)
        )


def check_value(value: Any, type_info: TypeInformation, field: str) -> Any:
    """``value`` converted to ``type_info``, or ``ValueError`` naming the field and value."""
    return value_checker(type_info)(value, field)


def value_checker(type_info: TypeInformation) -> Converter:
    """``check_value`` for one type, built once."""
    convert_value = converter(type_info)

    def check(value: Any, field: str) -> Any:
        return None if value is None else _checked(convert_value, value, field)

    return check


def _checked(convert_value: Converter, value: Any, field: str) -> Any:
    try:
        return convert_value(value, field)
    except TypeError as exc:
        where, _, what = str(exc).partition(": ")
        if not what:
            raise ValueError(f"{field or 'record'}: {exc}") from None
        raise ValueError(f"field {where.lstrip('.')!r}: {what}") from None


class ParseErrors:
    """Counts the records a schema skipped; logs the 1st, 10th, 100th... with the reason.

    >>> errors = ParseErrors("CsvRowDeserializationSchema")
    >>> errors.skip(ValueError("field 'id': 'x' is not a valid Integer"))
    >>> errors.skipped
    1
    """

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.skipped = 0

    def skip(self, error: Exception) -> None:
        self.skipped += 1
        n = self.skipped
        if str(n).rstrip("0") == "1":  # the 1st, 10th, 100th...: visible, never a flood
            _LOG.warning(
                "%s skipped a record it could not read (%d so far, ignore_parse_errors): %s",
                self.schema,
                n,
                error,
            )
