"""JSON rows with PyFlink's names (``pyflink.datastream.formats.json``).

Invariant: both schemas are small picklable values described by a ``RowTypeInfo``; a
deserialized record is a ``Row`` with the type's field names (``f0``, ``f1``... for
``Types.ROW``), each value converted to its field's type (numbers, booleans, strings, nested
rows; anything else as JSON gives it); a value that does not fit fails naming the field and
the value, or, with ``ignore_parse_errors``, the record is skipped (``None``) and counted.

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

import json
from collections.abc import Callable
from typing import Any

from cairn.common.formats.values import ParseErrors, check_value
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.typeinfo import BasicTypeInfo, RowTypeInfo, TypeInformation
from cairn.common.types import Row

__all__ = [
    "JsonRowDeserializationSchema",
    "JsonRowDeserializationSchemaBuilder",
    "JsonRowSerializationSchema",
    "JsonRowSerializationSchemaBuilder",
]

_CASTS: dict[str, Callable[[Any], Any]] = {
    "Byte": int,
    "Short": int,
    "Integer": int,
    "Long": int,
    "BigInteger": int,
    "Float": float,
    "Double": float,
    "Boolean": bool,
    "String": str,
    "Char": str,
}


def _converter(
    type_info: TypeInformation, fail_on_missing: bool, path: str = ""
) -> Callable[[Any], Any]:
    if isinstance(type_info, RowTypeInfo):
        names = type_info.get_field_names()
        fields = [
            _converter(t, fail_on_missing, f"{path}.{n}" if path else n)
            for n, t in zip(names, type_info.get_field_types(), strict=True)
        ]

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
            row = Row(*(f(value.get(n)) for n, f in zip(names, fields, strict=True)))
            row.set_field_names(names)
            return row

        return to_row
    cast = _CASTS.get(type_info.name) if isinstance(type_info, BasicTypeInfo) else None
    if cast is None:
        return lambda value: value

    def to_value(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, dict | list) or (cast is not str and value == ""):
            raise ValueError(f"field {path!r}: {value!r} is not a valid {type_info!r}")
        try:
            return cast(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"field {path!r}: {value!r} is not a valid {type_info!r}") from None

    return to_value


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
        self._convert = _converter(type_info, fail_on_missing_field)
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
        self._convert = _converter(self.type_info, self.fail_on_missing_field)


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        names = value.get_field_names()
        if names is None:
            return [_plain(v) for v in value]
        return {n: _plain(v) for n, v in zip(names, value, strict=True)}
    return value


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

    @staticmethod
    def builder() -> JsonRowSerializationSchemaBuilder:
        return JsonRowSerializationSchemaBuilder()

    def serialize(self, element: Any) -> bytes:
        names = self.type_info.get_field_names()
        if len(element) != len(names):
            raise ValueError(f"{element!r} has {len(element)} fields, the type {len(names)}")
        row = check_value(tuple(element), self.type_info, "")
        values = [_plain(v) for v in row]
        try:
            text = json.dumps(dict(zip(names, values, strict=True)), separators=(",", ":"))
        except TypeError as exc:
            raise ValueError(f"{element!r} is not JSON-serializable: {exc}") from None
        return text.encode()
