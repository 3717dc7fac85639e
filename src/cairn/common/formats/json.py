"""JSON rows with PyFlink's names (``pyflink.datastream.formats.json``).

Invariant: both schemas are small picklable values described by a ``RowTypeInfo`` and build
their per-field converters once (``TypeVisitor``s), as Flink's JSON format takes types:
rows as objects, tuples and arrays (``LIST`` and the arrays) as JSON arrays, maps as objects
with scalar keys (written as text), bytes in base64, dates and times in ISO 8601, decimals
as strings (no digit lost; numbers are read too); a pickled object, as Flink's generic
types, is refused when the schema is built. A deserialized record is a ``Row`` with the
type's field names (``f0``, ``f1``... for ``Types.ROW``); a value that does not fit fails
naming the field and the value, or, with ``ignore_parse_errors``, the record is skipped
(``None``) and counted.

>>> from cairn.common import Types
>>> row = Types.ROW_NAMED(["user", "clicks"], [Types.STRING(), Types.INT()])
>>> schema = JsonRowDeserializationSchema.builder().type_info(row).build()
>>> schema.deserialize(b'{"user": "ada", "clicks": "3", "extra": 1}')
Row(user='ada', clicks=3)
>>> JsonRowSerializationSchema.builder().with_type_info(row).build().serialize(
...     schema.deserialize(b'{"user": "ada", "clicks": 3}'))
b'{"user":"ada","clicks":3}'
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Callable
from typing import Any

from cairn.common.formats.values import (
    ParseErrors,
    text_formatter,
    text_parser,
    value_checker,
)
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.type_visitor import TypeKind, TypeVisitor, scalar_name
from cairn.common.typeinfo import RowTypeInfo, TypeInformation
from cairn.common.types import Row

__all__ = [
    "JsonRowDeserializationSchema",
    "JsonRowDeserializationSchemaBuilder",
    "JsonRowSerializationSchema",
    "JsonRowSerializationSchemaBuilder",
]

Convert = Callable[[Any], Any]


def _boolean(value: Any) -> bool:
    if isinstance(value, str):  # Flink: Boolean.parseBoolean of the text
        return value.strip().lower() == "true"
    return bool(value)


def _iso(parse: Callable[[str], Any], naive: bool) -> Convert:
    def from_text(value: Any) -> Any:
        if not isinstance(value, str):
            raise TypeError(value)
        text = value.strip()
        parsed = parse(text[:-1] + "+00:00" if text.endswith("Z") else text)
        if naive and parsed.tzinfo is not None:  # Flink's RFC 3339 "...Z": UTC
            if isinstance(parsed, datetime.datetime):
                return parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            return parsed.replace(tzinfo=None)
        return parsed

    return from_text


def _char(value: Any) -> str:
    text = str(value)
    if len(text) != 1:
        raise ValueError(text)
    return text


def _decimal(value: Any) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(value)
    return decimal.Decimal(str(value).strip())


_CASTS: dict[str, Convert] = {
    "Byte": int,
    "Short": int,
    "Integer": int,
    "Long": int,
    "BigInteger": int,
    "Float": float,
    "Double": float,
    "Boolean": _boolean,
    "String": str,
    "Character": _char,
    "BigDecimal": _decimal,
    "Date": _iso(datetime.date.fromisoformat, naive=False),
    "LocalDate": _iso(datetime.date.fromisoformat, naive=False),
    "Time": _iso(datetime.time.fromisoformat, naive=True),
    "LocalTime": _iso(datetime.time.fromisoformat, naive=True),
    "Timestamp": _iso(datetime.datetime.fromisoformat, naive=True),
    "LocalDateTime": _iso(datetime.datetime.fromisoformat, naive=True),
    "Instant": _iso(datetime.datetime.fromisoformat, naive=False),
}

_SCALAR_KEYS = "JSON takes maps with scalar keys"


def _scalar_key(key: TypeInformation) -> bool:
    """A key written as text: a named scalar (not bytes, not a pickled object)."""
    return key.kind is not None and key.kind.is_scalar and key.kind not in _NOT_TEXT


_NOT_TEXT = (TypeKind.BYTES, TypeKind.PICKLED)


class _FromJson(TypeVisitor[Convert]):
    """A parsed JSON value to the value of a type; ``path`` names the field in errors."""

    format = "JSON"

    def __init__(self, fail_on_missing: bool, path: str = "") -> None:
        self.fail_on_missing = fail_on_missing
        self.path = path

    def _at(self, path: str) -> _FromJson:
        return _FromJson(self.fail_on_missing, path)

    def unsupported(self, t: TypeInformation, why: str = "") -> Convert:
        return super().unsupported(t, f"field {self.path!r}" + (why and f"; {why}"))

    def _invalid(self, value: Any, t: TypeInformation) -> ValueError:
        return ValueError(f"field {self.path!r}: {value!r} is not a valid {t!r}")

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> Convert:
        path, fail_on_missing = self.path, self.fail_on_missing
        fields = [
            self._at(f"{path}.{n}" if path else n).visit(f)
            for n, f in zip(names, types, strict=True)
        ]
        pairs = list(zip(names, fields, strict=True))

        def to_row(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, dict):
                where = f"field {path!r}: " if path else ""
                raise ValueError(f"{where}expected a JSON object for a row, got {value!r}")
            if fail_on_missing:
                missing = [n for n in names if n not in value]
                if missing:
                    prefix = f"{path}." if path else ""
                    raise ValueError(f"missing field(s) {[prefix + n for n in missing]}")
            row = Row(*(f(value.get(n)) for n, f in pairs))
            row.set_field_names(names)
            return row

        return to_row

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> Convert:
        fields = [self._at(f"{self.path}[{i}]").visit(f) for i, f in enumerate(types)]

        def to_tuple(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, list) or len(value) != len(fields):
                raise self._invalid(value, t)
            return tuple(f(v) for f, v in zip(fields, value, strict=True))

        return to_tuple

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> Convert:
        each = self._at(f"{self.path}[]").visit(element)

        def to_list(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, list):
                raise self._invalid(value, t)
            return [each(v) for v in value]

        return to_list

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> Convert:
        if not _scalar_key(key):
            return self.unsupported(t, _SCALAR_KEYS)
        keys = text_parser(key, f"{self.path}.keys()")
        values = self._at(f"{self.path}[]").visit(value)

        def to_dict(mapping: Any) -> Any:
            if mapping is None:
                return None
            if not isinstance(mapping, dict):
                raise self._invalid(mapping, t)
            return {keys(k): values(v) for k, v in mapping.items()}

        return to_dict

    def visit_bytes(self, t: TypeInformation) -> Convert:
        def to_bytes(value: Any) -> Any:
            if value is None:
                return None
            try:
                return base64.b64decode(value, validate=True)
            except (TypeError, ValueError):
                raise self._invalid(value, t) from None

        return to_bytes

    def visit_scalar(self, t: TypeInformation) -> Convert:
        cast = _CASTS[scalar_name(t)]

        def to_value(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, dict | list) or (cast is not str and value == ""):
                raise self._invalid(value, t)
            try:
                return cast(value)
            except (TypeError, ValueError, ArithmeticError):
                raise self._invalid(value, t) from None

        return to_value


def _same(value: Any) -> Any:
    return value


class _ToJson(TypeVisitor[Convert]):
    """A checked, non-null value of a type to what ``json.dumps`` writes for it."""

    format = "JSON"

    def __init__(self, path: str = "") -> None:
        self.path = path

    def unsupported(self, t: TypeInformation, why: str = "") -> Convert:
        return super().unsupported(t, f"field {self.path!r}" + (why and f"; {why}"))

    def _nullable(self, t: TypeInformation, path: str) -> Convert:
        convert = _ToJson(path).visit(t)
        if convert is _same:
            return _same
        return lambda value: None if value is None else convert(value)

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> Convert:
        path = f"{self.path}." if self.path else ""
        fields = [self._nullable(f, path + n) for n, f in zip(names, types, strict=True)]
        pairs = list(zip(names, fields, strict=True))
        return lambda row: {n: f(v) for (n, f), v in zip(pairs, row, strict=True)}

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> Convert:
        fields = [self._nullable(f, f"{self.path}[{i}]") for i, f in enumerate(types)]
        return lambda values: [f(v) for f, v in zip(fields, values, strict=True)]

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> Convert:
        each = self._nullable(element, f"{self.path}[]")
        if each is _same:
            return _same
        return lambda values: [each(v) for v in values]

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> Convert:
        if not _scalar_key(key):
            return self.unsupported(t, _SCALAR_KEYS)
        keys, values = text_formatter(key), self._nullable(value, f"{self.path}[]")
        return lambda mapping: {keys(k): values(v) for k, v in mapping.items()}

    def visit_bytes(self, t: TypeInformation) -> Convert:
        return lambda value: base64.b64encode(value).decode("ascii")

    def visit_scalar(self, t: TypeInformation) -> Convert:
        return _same  # numbers, booleans, strings

    def visit_decimal(self, t: TypeInformation) -> Convert:
        return str

    def _iso(self, t: TypeInformation) -> Convert:
        return lambda value: value.isoformat()

    visit_date = visit_time = visit_timestamp = visit_instant = _iso


class JsonRowDeserializationSchemaBuilder:
    """PyFlink's builder: ``type_info(...)``, ``fail_on_missing_field()``,
    ``ignore_parse_errors()``, ``build()``."""

    def __init__(self) -> None:
        self._type_info: RowTypeInfo | None = None
        self._fail_on_missing = False
        self._ignore = False

    def type_info(self, type_info: TypeInformation) -> JsonRowDeserializationSchemaBuilder:
        if not isinstance(type_info, RowTypeInfo):
            raise TypeError(f"type_info must be a RowTypeInfo (Types.ROW_NAMED), got {type_info}")
        self._type_info = type_info
        return self

    def fail_on_missing_field(self) -> JsonRowDeserializationSchemaBuilder:
        self._fail_on_missing = True
        return self

    def ignore_parse_errors(self) -> JsonRowDeserializationSchemaBuilder:
        self._ignore = True
        return self

    def build(self) -> JsonRowDeserializationSchema:
        if self._type_info is None:
            raise ValueError("JsonRowDeserializationSchema needs type_info(...)")
        return JsonRowDeserializationSchema(self._type_info, self._fail_on_missing, self._ignore)


class JsonRowDeserializationSchema(DeserializationSchema):
    """JSON objects to ``Row``s of a ``RowTypeInfo``; build with ``builder()``.

    A message that is not valid JSON (or lacks a field, with ``fail_on_missing_field``)
    raises, unless ``ignore_parse_errors``: then it becomes ``None``, which a Kafka source
    drops (Flink's behaviour).
    """

    Builder = JsonRowDeserializationSchemaBuilder  # PyFlink's examples spell it so

    def __init__(
        self, type_info: RowTypeInfo, fail_on_missing_field: bool, ignore_parse_errors: bool
    ) -> None:
        if not isinstance(type_info, RowTypeInfo):
            raise TypeError(f"type_info must be a RowTypeInfo (Types.ROW_NAMED), got {type_info}")
        if fail_on_missing_field and ignore_parse_errors:
            raise ValueError("fail_on_missing_field and ignore_parse_errors exclude each other")
        self.type_info = type_info
        self.fail_on_missing_field = fail_on_missing_field
        self.ignore_parse_errors = ignore_parse_errors
        self._convert = _FromJson(fail_on_missing_field).visit(type_info)
        self.errors = ParseErrors("JsonRowDeserializationSchema")

    @staticmethod
    def builder() -> JsonRowDeserializationSchemaBuilder:
        return JsonRowDeserializationSchemaBuilder()

    def deserialize(self, message: bytes) -> Any:
        try:
            return self._convert(json.loads(message))
        except (ValueError, TypeError) as exc:
            if self.ignore_parse_errors:
                self.errors.skip(exc)
                return None
            raise

    @property
    def skipped_records(self) -> int:
        """Records skipped by this instance (on this worker) with ``ignore_parse_errors``."""
        return self.errors.skipped

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_convert"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._convert = _FromJson(self.fail_on_missing_field).visit(self.type_info)


class JsonRowSerializationSchemaBuilder:
    """PyFlink's builder: ``with_type_info(...)``, ``build()``."""

    def __init__(self) -> None:
        self._type_info: RowTypeInfo | None = None

    def with_type_info(self, type_info: TypeInformation) -> JsonRowSerializationSchemaBuilder:
        if not isinstance(type_info, RowTypeInfo):
            raise TypeError(f"type_info must be a RowTypeInfo (Types.ROW_NAMED), got {type_info}")
        self._type_info = type_info
        return self

    def build(self) -> JsonRowSerializationSchema:
        if self._type_info is None:
            raise ValueError("JsonRowSerializationSchema needs with_type_info(...)")
        return JsonRowSerializationSchema(self._type_info)


class JsonRowSerializationSchema(SerializationSchema):
    """``Row``s (or tuples, in field order) to compact JSON objects with the type's names."""

    Builder = JsonRowSerializationSchemaBuilder

    def __init__(self, type_info: RowTypeInfo) -> None:
        if not isinstance(type_info, RowTypeInfo):
            raise TypeError(f"type_info must be a RowTypeInfo (Types.ROW_NAMED), got {type_info}")
        self.type_info = type_info
        self._build()

    def _build(self) -> None:
        self._check = value_checker(self.type_info)
        self._to_json = _ToJson().visit(self.type_info)

    @staticmethod
    def builder() -> JsonRowSerializationSchemaBuilder:
        return JsonRowSerializationSchemaBuilder()

    def serialize(self, element: Any) -> bytes:
        arity = len(self.type_info.field_types)
        if len(element) != arity:
            raise ValueError(f"{element!r} has {len(element)} fields, the type {arity}")
        record = self._to_json(self._check(tuple(element), ""))
        try:
            text = json.dumps(record, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{element!r} is not JSON-serializable: {exc}") from None
        return text.encode()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_check", "_to_json")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build()
