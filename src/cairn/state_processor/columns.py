"""Spark column types for state values, and the conversions between state and Spark values.

Invariant: a state value becomes a Spark value only if it fits the column exactly (an ``int``
in ``LongType`` within 64 bits, a ``str`` in ``StringType``, ...); anything else raises
``ValueTypeError`` naming the value, never a silent ``null``. Type infos that have no Spark
type (``None``, ``Types.PICKLED_BYTE_ARRAY()``, ``Types.LOCAL_TIME()``...) give a *pickled*
``BinaryType`` column: the value's pickle, which ``unpickle`` reads back and a writer given
the same descriptor unpickles, so reading and writing such state round-trips losslessly.
The column type comes from a ``TypeVisitor`` over the type info; a ``Column`` builds its
conversions once, so no value is converted by walking its type.

>>> from cairn.common.typeinfo import Types
>>> spark_column(Types.LONG()).data_type.simpleString()
'bigint'
>>> c = spark_column(None); c.pickled, c.data_type.simpleString()
(True, 'binary')
>>> to_spark(7, spark_column(Types.INT()), "value")
7
>>> to_spark("7", spark_column(Types.INT()), "value")
Traceback (most recent call last):
...
cairn.state_processor.errors.ValueTypeError: value '7' (str) does not fit Spark type int
"""

from __future__ import annotations

import datetime as _dt
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pyspark.sql import types as T

from cairn.common.type_visitor import TypeKind, TypeVisitor, scalar_name
from cairn.common.typeinfo import TypeInformation
from cairn.common.types import Row
from cairn.state.snapshot_format import dumps
from cairn.state_processor.errors import ValueTypeError

__all__ = ["Column", "from_spark", "spark_column", "to_spark", "unpickle"]

_BASIC: dict[str, T.DataType] = {
    "String": T.StringType(),
    "Character": T.StringType(),
    "Byte": T.ByteType(),
    "Boolean": T.BooleanType(),
    "Short": T.ShortType(),
    "Integer": T.IntegerType(),
    "Long": T.LongType(),
    "Float": T.FloatType(),
    "Double": T.DoubleType(),
    "BigInteger": T.DecimalType(38, 0),
    "BigDecimal": T.DecimalType(38, 18),
    "Date": T.DateType(),
    "LocalDate": T.DateType(),
    "Timestamp": T.TimestampType(),
    "LocalDateTime": T.TimestampNTZType(),
    "Instant": T.TimestampType(),
}

_INT_BITS = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}

Convert = Callable[[Any], Any]


@dataclass(frozen=True)
class Column:
    """How one state field is shown in Spark: its type, and whether it holds pickles.

    Its conversions (``to_spark``, ``from_spark``) are built once, with the column.
    """

    data_type: T.DataType
    pickled: bool = False
    type_info: TypeInformation | None = None
    _to: Convert = field(init=False, repr=False, compare=False)
    _from: Convert = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        to: Convert
        from_: Convert
        if self.pickled:
            to, from_ = dumps, unpickle
        else:
            to, from_ = _fitter(self.data_type), _nativer(self.data_type, self.type_info)
        object.__setattr__(self, "_to", to)
        object.__setattr__(self, "_from", from_)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Column, (self.data_type, self.pickled, self.type_info))  # converters rebuilt


class _SparkTypes(TypeVisitor["T.DataType | None"]):
    """The Spark type of a type info, or None when it has none (then the column is pickled)."""

    format = "Spark"

    def unsupported(self, t: TypeInformation, why: str = "") -> T.DataType | None:
        return None  # pickled, losslessly

    def visit_scalar(self, t: TypeInformation) -> T.DataType | None:
        return _BASIC.get(scalar_name(t))

    def visit_bytes(self, t: TypeInformation) -> T.DataType | None:
        return T.BinaryType()  # byte[]: Python bytes

    def visit_array(self, t: TypeInformation, element: TypeInformation) -> T.DataType | None:
        e = self.visit(element)
        return None if e is None else T.ArrayType(e)

    def visit_map(
        self, t: TypeInformation, key: TypeInformation, value: TypeInformation
    ) -> T.DataType | None:
        k, v = self.visit(key), self.visit(value)
        return None if k is None or v is None else T.MapType(k, v)

    def visit_row(
        self, t: TypeInformation, names: list[str], types: list[TypeInformation]
    ) -> T.DataType | None:
        struct = []
        for n, f in zip(names, types, strict=True):
            data_type = self.visit(f)
            if data_type is None:
                return None
            struct.append(T.StructField(n, data_type))
        return T.StructType(struct)

    def visit_tuple(self, t: TypeInformation, types: list[TypeInformation]) -> T.DataType | None:
        return self.visit_row(t, [f"f{i}" for i in range(len(types))], types)


def _data_type(info: Any) -> T.DataType | None:
    return None if info is None else _SparkTypes().visit(info)


def spark_column(info: Any) -> Column:
    """The column for values described by ``info`` (a ``TypeInformation`` or None)."""
    data_type = _data_type(info)
    if data_type is None:
        return Column(T.BinaryType(), pickled=True)
    return Column(data_type, pickled=False, type_info=info)


def unpickle(data: bytes | bytearray | None) -> Any:
    """A value of a pickled column (only for data you trust: unpickling runs code).

    >>> unpickle(to_spark({"a": 1}, spark_column(None), "value"))
    {'a': 1}
    """
    return None if data is None else pickle.loads(bytes(data))


# --------------------------------------------------------------------- state -> Spark


def to_spark(value: Any, column: Column, what: str) -> Any:
    """``value`` as a Spark value of ``column`` (``what`` names it in errors)."""
    return column._to(value)


def _mismatch(value: Any, data_type: T.DataType) -> ValueTypeError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ValueTypeError(
        f"value {shown} ({type(value).__name__}) does not fit Spark type {data_type.simpleString()}"
    )


def _fitter(dt: T.DataType) -> Convert:
    """The check and conversion of a state value to a Spark value of ``dt`` (None stays)."""
    fit = _fitter_of(dt)

    def fit_or_none(value: Any) -> Any:
        return None if value is None else fit(value)

    return fit_or_none


def _fitter_of(dt: T.DataType) -> Convert:
    t = type(dt)

    def accept(ok: Callable[[Any], bool], convert: Convert = lambda v: v) -> Convert:
        def fit(value: Any) -> Any:
            if ok(value):
                return convert(value)
            raise _mismatch(value, dt)

        return fit

    if t in _INT_BITS:
        low, high = -(1 << (_INT_BITS[t] - 1)), 1 << (_INT_BITS[t] - 1)
        return accept(lambda v: type(v) is int and low <= v < high)
    if t is T.StringType:
        return accept(lambda v: isinstance(v, str))
    if t is T.BooleanType:
        return accept(lambda v: isinstance(v, bool))
    if t in (T.DoubleType, T.FloatType):
        return accept(lambda v: isinstance(v, float) or type(v) is int, float)
    if t is T.DecimalType:
        return accept(lambda v: isinstance(v, Decimal) or type(v) is int, Decimal)
    if t is T.BinaryType:
        return accept(lambda v: isinstance(v, bytes | bytearray), bytes)
    if t is T.DateType:
        return accept(lambda v: isinstance(v, _dt.date) and not isinstance(v, _dt.datetime))
    if t in (T.TimestampType, T.TimestampNTZType):
        return accept(lambda v: isinstance(v, _dt.datetime))
    if isinstance(dt, T.ArrayType):
        each = _fitter(dt.elementType)
        return accept(lambda v: isinstance(v, list | tuple), lambda v: [each(e) for e in v])
    if isinstance(dt, T.MapType):
        keys, values = _fitter(dt.keyType), _fitter(dt.valueType)
        return accept(
            lambda v: isinstance(v, dict), lambda v: {keys(k): values(e) for k, e in v.items()}
        )
    if isinstance(dt, T.StructType):
        fields = [_fitter(f.dataType) for f in dt.fields]

        def fit_struct(value: Any) -> tuple[Any, ...]:
            values = list(value) if isinstance(value, tuple | list) else _row_values(value)
            if values is None or len(values) != len(fields):
                raise _mismatch(value, dt)
            return tuple(f(v) for f, v in zip(fields, values, strict=True))

        return fit_struct
    return accept(lambda v: False)


def _row_values(value: Any) -> list[Any] | None:
    values = getattr(value, "_values", None)  # cairn.common.types.Row
    return list(values) if isinstance(values, list) else None


# --------------------------------------------------------------------- Spark -> state


def from_spark(value: Any, column: Column) -> Any:
    """A Spark value of ``column`` as the state value a job would have kept.

    Structs become tuples (or ``Row``\\ s for a ``RowTypeInfo``), arrays lists; a pickled
    column is unpickled.

    >>> from cairn.common.typeinfo import Types
    >>> from_spark([1, 2], spark_column(Types.LIST(Types.LONG())))
    [1, 2]
    """
    return column._from(value)


def _nativer(dt: T.DataType, info: Any) -> Convert:
    """A Spark value of ``dt`` to the state value (``info``: the type info, for row names)."""
    native = _nativer_of(dt, info)
    return lambda value: None if value is None else native(value)


def _same(value: Any) -> Any:
    return value


def _instant(value: _dt.datetime) -> _dt.datetime:
    """PySpark gives timestamps back in local time without a zone; an INSTANT has UTC's."""
    return value.astimezone(_dt.timezone.utc)


def _nativer_of(dt: T.DataType, info: Any) -> Convert:
    kind = getattr(info, "kind", None)
    if isinstance(dt, T.StructType):
        types = getattr(info, "field_types", None) or [None] * len(dt.fields)
        fields = [_nativer(f.dataType, i) for f, i in zip(dt.fields, types, strict=True)]
        if kind is not TypeKind.ROW:
            return lambda value: tuple(f(v) for f, v in zip(fields, value, strict=True))
        names = list(info.field_names)

        def to_row(value: Any) -> Row:
            row = Row(*(f(v) for f, v in zip(fields, value, strict=True)))
            row.set_field_names(names)
            return row

        return to_row
    if isinstance(dt, T.ArrayType):
        each = _nativer(dt.elementType, getattr(info, "element_type", None))
        return lambda value: [each(v) for v in value]
    if isinstance(dt, T.MapType):
        keys = _nativer(dt.keyType, getattr(info, "key_type", None))
        values = _nativer(dt.valueType, getattr(info, "value_type", None))
        return lambda value: {keys(k): values(v) for k, v in value.items()}
    if isinstance(dt, T.BinaryType):
        return bytes
    if isinstance(dt, T.DecimalType) and kind is TypeKind.BIG_INTEGER:
        return int  # BIG_INT's column is decimal(38,0); its state holds ints
    if isinstance(dt, T.TimestampType) and kind is TypeKind.INSTANT:
        return _instant
    return _same


def column_accepts(expected: T.DataType, actual: T.DataType) -> bool:
    """Whether a DataFrame column of type ``actual`` can hold values of type ``expected``
    (integral columns fit integral state of any width, every row is range-checked then).

    >>> column_accepts(T.LongType(), T.IntegerType()), column_accepts(T.LongType(), T.StringType())
    (True, False)
    """
    if type(expected) in _INT_BITS and type(actual) in _INT_BITS:
        return True
    numeric = (T.FloatType, T.DoubleType)
    if isinstance(expected, numeric) and isinstance(actual, (*numeric, *_INT_BITS)):
        return True
    if isinstance(expected, T.DecimalType) and isinstance(actual, (T.DecimalType, *_INT_BITS)):
        return True
    if isinstance(expected, T.ArrayType) and isinstance(actual, T.ArrayType):
        return column_accepts(expected.elementType, actual.elementType)
    if isinstance(expected, T.MapType) and isinstance(actual, T.MapType):
        return column_accepts(expected.keyType, actual.keyType) and column_accepts(
            expected.valueType, actual.valueType
        )
    if isinstance(expected, T.StructType) and isinstance(actual, T.StructType):
        return len(expected.fields) == len(actual.fields) and all(
            column_accepts(e.dataType, a.dataType)
            for e, a in zip(expected.fields, actual.fields, strict=True)
        )
    if isinstance(expected, (T.TimestampType, T.TimestampNTZType)):
        return isinstance(actual, (T.TimestampType, T.TimestampNTZType))
    return type(expected) is type(actual)
