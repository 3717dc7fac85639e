"""Table formats by name (``'format' = 'json'``): a table's rows to message bytes and back.

Invariant: a format is built from the table's physical columns and its own option keys
(``json.*``, ``csv.*``, ``raw.*``, prefixed by ``key.``/``value.`` where a connector has two
formats, as Flink's ``key.json.ignore-parse-errors``), and wraps the row formats of
``cairn.common.formats`` (one TypeVisitor per format), so a table reads and writes exactly what
a DataStream job with the same schema would.

>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("k", DataTypes.STRING()), ("n", DataTypes.BIGINT())])
>>> sorted(format_keys("json", ""))
['json.encode.decimal-as-plain-number', 'json.fail-on-missing-field', 'json.ignore-parse-errors']
>>> row_serializer("json", cols, {}).serialize(("a", 1))
b'{"k":"a","n":1}'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.common.formats.csv import (
    CsvRowDeserializationSchemaBuilder,
    CsvRowSerializationSchemaBuilder,
)
from cairn.common.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.typeinfo import RowTypeInfo, Types
from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.types import to_type_info

__all__ = [
    "FORMATS",
    "format_keys",
    "row_deserializer",
    "row_serializer",
]

_KEYS = {
    "json": ("fail-on-missing-field", "ignore-parse-errors", "encode.decimal-as-plain-number"),
    "csv": (
        "field-delimiter",
        "quote-character",
        "disable-quote-character",
        "allow-comments",
        "ignore-parse-errors",
        "array-element-delimiter",
        "escape-character",
        "null-literal",
    ),
    "raw": ("charset", "endianness"),
}
#: The formats a table connector may name.
FORMATS = tuple(sorted(_KEYS))


def format_keys(fmt: str, prefix: str) -> set[str]:
    """The option keys of format ``fmt`` under ``prefix`` (``''``, ``'key.'``, ``'value.'``)."""
    if fmt not in _KEYS:
        raise ValidationError(
            f"Could not find any factory for identifier '{fmt}' that implements"
            " 'org.apache.flink.table.factories.DeserializationFormatFactory' in the"
            f" classpath.\n\nAvailable factory identifiers are:\n\n{chr(10).join(FORMATS)}"
        )
    return {f"{prefix}{fmt}.{k}" for k in _KEYS[fmt]}


def _row_type(columns: Columns) -> RowTypeInfo:
    info = Types.ROW_NAMED(columns.names, [to_type_info(c.data_type) for c in columns.columns])
    assert isinstance(info, RowTypeInfo)
    return info


def _flag(options: Mapping[str, str], key: str) -> bool:
    value = options.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValidationError(
            f"Could not parse value '{options[key]}' for key '{key}'. Expected 'true' or 'false'"
        )
    return value == "true"


def _raw_column(columns: Columns) -> None:
    if len(columns.columns) != 1:
        raise ValidationError(
            "The 'raw' format only supports single physical column. However the defined"
            f" schema contains multiple physical columns: [{', '.join(columns.names)}]"
        )


class RawSerializationSchema(SerializationSchema):
    """The one column's value as bytes (strings in ``charset``); null stays null."""

    def __init__(self, charset: str) -> None:
        self.charset = charset

    def serialize(self, element: Any) -> Any:
        value = element[0]
        if value is None or isinstance(value, bytes):
            return value
        return str(value).encode(self.charset)


class RawDeserializationSchema(DeserializationSchema):
    """Message bytes as the one column (a string decoded with ``charset``, or bytes)."""

    def __init__(self, charset: str, as_text: bool) -> None:
        self.charset = charset
        self.as_text = as_text

    def deserialize(self, message: bytes) -> Any:
        if message is None or not self.as_text:
            return (message,)
        return (message.decode(self.charset),)


def row_serializer(
    fmt: str, columns: Columns, options: Mapping[str, str], prefix: str = ""
) -> SerializationSchema:
    """Rows (tuples in column order) to bytes in format ``fmt``."""
    key = f"{prefix}{fmt}."
    if fmt == "json":
        return JsonRowSerializationSchema(_row_type(columns))
    if fmt == "csv":
        builder = CsvRowSerializationSchemaBuilder(_row_type(columns))
        _csv_dialect(builder, options, key)
        if _flag(options, key + "disable-quote-character"):
            builder.disable_quote_character()
        return builder.build()
    _raw_column(columns)
    return RawSerializationSchema(options.get(key + "charset", "UTF-8"))


def row_deserializer(
    fmt: str, columns: Columns, options: Mapping[str, str], prefix: str = ""
) -> DeserializationSchema:
    """Bytes in format ``fmt`` to rows; a bad message raises, or is ``None`` (skipped) with
    ``<fmt>.ignore-parse-errors``."""
    key = f"{prefix}{fmt}."
    ignore = _flag(options, key + "ignore-parse-errors")
    if fmt == "json":
        fail = _flag(options, key + "fail-on-missing-field")
        if fail and ignore:
            raise ValidationError(
                f"{key}fail-on-missing-field and {key}ignore-parse-errors shouldn't both be true."
            )
        return JsonRowDeserializationSchema(_row_type(columns), fail, ignore)
    if fmt == "csv":
        builder = CsvRowDeserializationSchemaBuilder(_row_type(columns))
        _csv_dialect(builder, options, key)
        if key + "allow-comments" in options:
            builder.set_allow_comments(_flag(options, key + "allow-comments"))
        builder.set_ignore_parse_errors(ignore)
        return builder.build()
    _raw_column(columns)
    return RawDeserializationSchema(
        options.get(key + "charset", "UTF-8"), columns.columns[0].data_type.is_string
    )


def _csv_dialect(builder: Any, options: Mapping[str, str], key: str) -> None:
    setters = {
        "field-delimiter": builder.set_field_delimiter,
        "quote-character": builder.set_quote_character,
        "array-element-delimiter": builder.set_array_element_delimiter,
        "escape-character": builder.set_escape_character,
        "null-literal": builder.set_null_literal,
    }
    for name, setter in setters.items():
        value = options.get(key + name)
        if value is None:
            continue
        if name in ("field-delimiter", "quote-character", "escape-character") and len(value) != 1:
            raise ValidationError(f"Option '{key}{name}' must be a string with single character")
        setter(value)
