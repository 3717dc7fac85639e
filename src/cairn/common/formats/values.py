"""Field values of the row formats: text to a typed value and back, and bad-record counting.

Invariant: ``parse_text`` returns exactly what ``type_conversion.convert`` accepts for the
type, or raises ``ValueError`` naming the field and the value; ``ParseErrors`` counts every
record a schema skipped (``ignore_parse_errors``) and logs the first and each 10**n-th.

>>> from cairn.common.typeinfo import Types
>>> parse_text("42", Types.INT(), "id"), parse_text("true", Types.BOOLEAN(), "ok")
(42, True)
>>> parse_text("4x", Types.INT(), "id")
Traceback (most recent call last):
...
ValueError: field 'id': '4x' is not a valid Integer
"""

from __future__ import annotations

import base64
import datetime
import decimal
import logging
from collections.abc import Callable
from typing import Any

from cairn.common.type_conversion import convert
from cairn.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    ObjectArrayTypeInfo,
    PrimitiveArrayTypeInfo,
    TypeInformation,
)

__all__ = ["ParseErrors", "check_value", "format_text", "parse_text"]

_LOG = logging.getLogger("cairn.formats")


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
}


def _is_bytes(type_info: TypeInformation) -> bool:
    element = getattr(type_info, "element_type", None)
    return (
        isinstance(type_info, PrimitiveArrayTypeInfo)
        and isinstance(element, BasicTypeInfo)
        and element.name == "Byte"
    )


def _is_array(type_info: TypeInformation) -> bool:
    return isinstance(
        type_info, ListTypeInfo | BasicArrayTypeInfo | PrimitiveArrayTypeInfo | ObjectArrayTypeInfo
    )


def parse_text(
    text: str, type_info: TypeInformation, field: str, array_delimiter: str = ";"
) -> Any:
    """The value of ``text`` as ``type_info`` (arrays split on ``array_delimiter``; byte
    arrays in base64, as Flink's CSV writes them)."""
    try:
        if _is_bytes(type_info):
            return base64.b64decode(text, validate=True)
        if _is_array(type_info):
            element = type_info.element_type  # type: ignore[attr-defined]
            parts = text.split(array_delimiter) if text else []
            return [parse_text(p, element, f"{field}[{i}]") for i, p in enumerate(parts)]
        parse = _PARSERS.get(type_info.name) if isinstance(type_info, BasicTypeInfo) else None
        if parse is None:
            raise ValueError(f"field {field!r}: type {type_info!r} is not supported in text")
        value = parse(text.strip() if parse is not str else text)
        return convert(value, type_info, field)
    except ValueError as exc:
        if str(exc).startswith("field "):
            raise
        raise ValueError(f"field {field!r}: {text!r} is not a valid {type_info!r}") from None
    except (TypeError, decimal.InvalidOperation, ArithmeticError):
        raise ValueError(f"field {field!r}: {text!r} is not a valid {type_info!r}") from None


def format_text(value: Any, array_delimiter: str = ";") -> str:
    """The text of a value, as ``parse_text`` reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list | tuple):
        return array_delimiter.join(format_text(v, array_delimiter) for v in value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def check_value(value: Any, type_info: TypeInformation, field: str) -> Any:
    """``value`` converted to ``type_info``, or ``ValueError`` naming the field and value."""
    try:
        return convert(value, type_info, field)
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
