"""Python values as PyFlink's operators see them after a ``TypeInformation`` (``from_collection``).

Invariant: ``convert(value, type_info)`` returns what a PyFlink job reads from a collection
declared with ``type_info`` (the value goes through ``to_internal_type``, Java, and the row and
tuple coders back): ``ROW``/``ROW_NAMED`` make a ``Row`` carrying the type's field names
(``f0``, ``f1``... for ``ROW``) from a tuple, list, ``Row``, dict (by name) or object (its
attributes); ``TUPLE`` makes a tuple; ``LIST`` and the arrays a list (``bytes`` stay ``bytes`` for
``PRIMITIVE_ARRAY(BYTE())``, Java's ``byte[]``); ``MAP`` a dict; fields
convert recursively; ``None`` stays ``None``. A value that does not fit (wrong arity, a string
for ``INT``, an int outside ``Types.INT()``'s 32 bits...) raises a ``TypeError`` naming the
path to it, so ``from_collection`` fails when the job is defined, not on a worker. Without a
type (or ``PICKLED_BYTE_ARRAY``) values are kept as they are.

>>> from cairn.common.typeinfo import Types
>>> convert(("flink", 2), Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()]))
Row(word='flink', count=2)
>>> convert([1, 2.5], Types.TUPLE([Types.LONG(), Types.DOUBLE()]))
(1, 2.5)
>>> convert(("a", "x"), Types.ROW([Types.STRING(), Types.INT()]))
Traceback (most recent call last):
...
TypeError: .f1: 'x' (str) is not of type Integer
"""

from __future__ import annotations

import datetime
import decimal
import functools
from collections.abc import Callable, Iterable
from typing import Any

from cairn.common.time import Instant
from cairn.common.type_visitor import INTEGER_BITS, TypeVisitor, scalar_name
from cairn.common.typeinfo import BasicTypeInfo, TypeInformation
from cairn.common.types import Row

__all__ = ["Converter", "convert", "convert_elements", "converter"]

Converter = Callable[[Any, str], Any]
"""A value and its path in the record (for errors) to the value of one type."""


def convert(value: Any, type_info: TypeInformation | None, path: str = "") -> Any:
    """``value`` as a record (or field) of type ``type_info``; ``path`` (``[1].word``...) is
    where it sits in the record, for errors."""
    if value is None or type_info is None:
        return value
    return converter(type_info)(value, path)


@functools.lru_cache(maxsize=256)
def converter(type_info: TypeInformation) -> Converter:
    """The conversion of ``type_info``, built once per type (types are hashable values).

    >>> from cairn.common.typeinfo import Types
    >>> converter(Types.LIST(Types.SHORT()))([1, 2], "")
    [1, 2]
    """
    return _Converters().visit(type_info)


def _nullable(convert_value: Converter) -> Converter:
    def convert_or_none(value: Any, path: str) -> Any:
        return None if value is None else convert_value(value, path)

    return convert_or_none


def _identity(value: Any, path: str) -> Any:
    return value


class _Converters(TypeVisitor[Converter]):
    """Builds the converter of a type; every kind converts, hints without a kind keep values."""

    format = "from_collection"

    def unsupported(self, t: TypeInformation, why: str = "") -> Converter:
        return _identity  # PICKLED_BYTE_ARRAY and other hints: any Python object

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> Converter:
        fields = [_nullable(self.visit(f)) for f in types]
        pairs = list(zip(fields, names, strict=True))

        def to_row(value: Any, path: str) -> Row:
            if isinstance(value, dict):
                missing = [n for n in names if n not in value]
                if missing:
                    raise TypeError(f"{_at(path)}{_shown(value)} lacks fields {missing} of {t!r}")
                values = [value[n] for n in names]
            elif isinstance(value, tuple | list | Row):
                values = _fields(value, len(names), t, path)
            elif hasattr(value, "__dict__"):
                attrs = vars(value)
                values = [attrs.get(n) for n in names]
            else:
                raise TypeError(f"{_at(path)}{_shown(value)} does not fit {t!r}")
            row = Row(*(f(v, f"{path}.{n}") for v, (f, n) in zip(values, pairs, strict=True)))
            row.set_field_names(names)
            if isinstance(value, Row):
                row.set_row_kind(value.get_row_kind())
            return row

        return to_row

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> Converter:
        fields = [_nullable(self.visit(f)) for f in types]

        def to_tuple(value: Any, path: str) -> tuple[Any, ...]:
            values = _fields(value, len(fields), t, path)
            return tuple(
                f(v, f"{path}[{i}]") for i, (v, f) in enumerate(zip(values, fields, strict=True))
            )

        return to_tuple

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> Converter:
        each = _nullable(self.visit(element))

        def to_list(value: Any, path: str) -> list[Any]:
            if isinstance(value, str | bytes | dict) or not hasattr(value, "__iter__"):
                raise TypeError(f"{_at(path)}{_shown(value)} is not of type {t!r}")
            return [each(v, f"{path}[{i}]") for i, v in enumerate(value)]

        return to_list

    def visit_bytes(self, t: TypeInformation) -> Converter:
        as_list = self.visit_array(t, BasicTypeInfo("Byte"))

        def to_bytes(value: Any, path: str) -> Any:
            if isinstance(value, bytes | bytearray):
                return bytes(value)  # PyFlink: a byte[] field is Python bytes both ways
            return as_list(value, path)

        return to_bytes

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> Converter:
        keys, values = _nullable(self.visit(key)), _nullable(self.visit(value))

        def to_dict(mapping: Any, path: str) -> dict[Any, Any]:
            if not isinstance(mapping, dict):
                raise TypeError(f"{_at(path)}{_shown(mapping)} is not of type {t!r}")
            return {
                keys(k, f"{path}.keys()"): values(v, f"{path}[{k!r}]") for k, v in mapping.items()
            }

        return to_dict

    def visit_scalar(self, t: TypeInformation) -> Converter:
        name = scalar_name(t)
        check = _BASIC[name]
        return lambda value, path: check(value, name, path)

    def visit_pickled(self, t: TypeInformation) -> Converter:
        return _identity


def convert_elements(elements: Iterable[Any], type_info: TypeInformation) -> list[Any]:
    """Every element converted, or a ``TypeError`` naming the first that does not fit.

    >>> from cairn.common.typeinfo import Types
    >>> convert_elements([1, "2"], Types.LONG())
    Traceback (most recent call last):
    ...
    TypeError: from_collection: element 1: '2' (str) is not of type Long
    """
    out: list[Any] = []
    for i, element in enumerate(elements):
        try:
            out.append(convert(element, type_info))
        except TypeError as exc:
            raise TypeError(f"from_collection: element {i}{_join(str(exc))}") from None
    return out


def _join(message: str) -> str:
    """``.f1: ...``, ``[2]: ...`` follow the element directly; other messages after ``: ``."""
    return message if message[:1] in ".[" else ": " + message


def _fields(value: Any, arity: int, type_info: TypeInformation, path: str) -> list[Any]:
    if not isinstance(value, tuple | list | Row):
        raise TypeError(f"{_at(path)}{_shown(value)} does not fit {type_info!r}")
    if len(value) != arity:
        raise TypeError(
            f"{_at(path)}{_shown(value)} has {len(value)} fields, {type_info!r} has {arity}"
        )
    return list(value)


def _at(path: str) -> str:
    return f"{path}: " if path else ""


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _mismatch(value: Any, name: str, path: str) -> TypeError:
    return TypeError(f"{_at(path)}{_shown(value)} is not of type {name}")


def _integer(value: Any, name: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _mismatch(value, name, path)
    bits = INTEGER_BITS[name]
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise TypeError(f"{_at(path)}{value} is outside {name} ({bits}-bit signed)")
    return value


def _floating(value: Any, name: str, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch(value, name, path)
    return float(value)


def _instance(*kinds: type) -> Callable[[Any, str, str], Any]:
    def check(value: Any, name: str, path: str) -> Any:
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            raise _mismatch(value, name, path)
        return value

    return check


def _char(value: Any, name: str, path: str) -> str:
    if not isinstance(value, str) or len(value) != 1:
        raise _mismatch(value, name, path)
    return value


def _big_dec(value: Any, name: str, path: str) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise _mismatch(value, name, path)
    return value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))


_BASIC: dict[str, Callable[[Any, str, str], Any]] = {
    "String": _instance(str),
    "Boolean": _instance(bool),
    "Byte": _integer,
    "Short": _integer,
    "Integer": _integer,
    "Long": _integer,
    "Float": _floating,
    "Double": _floating,
    "Character": _char,
    "BigInteger": _instance(int),
    "BigDecimal": _big_dec,
    "Date": _instance(datetime.date),
    "LocalDate": _instance(datetime.date),
    "Time": _instance(datetime.time),
    "LocalTime": _instance(datetime.time),
    "Timestamp": _instance(datetime.datetime),
    "LocalDateTime": _instance(datetime.datetime),
    # PyFlink hands Types.INSTANT() values to Python as pyflink.common.time.Instant
    "Instant": _instance(Instant, datetime.datetime),
}
