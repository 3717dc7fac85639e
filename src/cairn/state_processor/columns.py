"""Spark column types for state values, and the conversions between state and Spark values.

Invariant: a state value becomes a Spark value only if it fits the column exactly (an ``int``
in ``LongType`` within 64 bits, a ``str`` in ``StringType``, ...); anything else raises
``ValueTypeError`` naming the value, never a silent ``null``. Type infos that have no Spark
type (``None``, ``Types.PICKLED_BYTE_ARRAY()``, ``Types.LOCAL_TIME()``...) give a *pickled*
``BinaryType`` column: the value's pickle, which ``unpickle`` reads back and a writer given
the same descriptor unpickles, so reading and writing such state round-trips losslessly.

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
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import types as T

from cairn.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)
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


@dataclass(frozen=True)
class Column:
    """How one state field is shown in Spark: its type, and whether it holds pickles."""

    data_type: T.DataType
    pickled: bool = False
    type_info: TypeInformation | None = None


_PICKLED = Column(T.BinaryType(), pickled=True)


def _data_type(info: Any) -> T.DataType | None:
    """The Spark type of ``info``, or None when it has none (then the column is pickled)."""
    if isinstance(info, BasicTypeInfo):
        return _BASIC.get(info.name)
    if isinstance(info, PrimitiveArrayTypeInfo) and info.element_type == BasicTypeInfo("Byte"):
        return T.BinaryType()  # byte[]: Python bytes
    if isinstance(
        info, (ListTypeInfo, BasicArrayTypeInfo, PrimitiveArrayTypeInfo, ObjectArrayTypeInfo)
    ):
        element = _data_type(info.element_type)
        return None if element is None else T.ArrayType(element)
    if isinstance(info, MapTypeInfo):
        k, v = _data_type(info.key_type), _data_type(info.value_type)
        return None if k is None or v is None else T.MapType(k, v)
    if isinstance(info, (RowTypeInfo, TupleTypeInfo)):
        names = (
            info.field_names
            if isinstance(info, RowTypeInfo)
            else [f"f{i}" for i in range(len(info.field_types))]
        )
        struct = []
        for n, t in zip(names, info.field_types, strict=True):
            f = _data_type(t)
            if f is None:
                return None
            struct.append(T.StructField(n, f))
        return T.StructType(struct)
    return None


def spark_column(info: Any) -> Column:
    """The column for values described by ``info`` (a ``TypeInformation`` or None)."""
    data_type = _data_type(info)
    if data_type is None:
        return _PICKLED
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
    if column.pickled:
        return dumps(value)
    return _fit(value, column.data_type, what)


def _mismatch(value: Any, data_type: T.DataType) -> ValueTypeError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ValueTypeError(
        f"value {shown} ({type(value).__name__}) does not fit Spark type {data_type.simpleString()}"
    )


def _fit(value: Any, dt: T.DataType, what: str) -> Any:
    if value is None:
        return None
    t = type(dt)
    if t in _INT_BITS:
        bits = _INT_BITS[t]
        if type(value) is int and -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            return value
    elif t is T.StringType:
        if isinstance(value, str):
            return value
    elif t is T.BooleanType:
        if isinstance(value, bool):
            return value
    elif t in (T.DoubleType, T.FloatType):
        if isinstance(value, float) or type(value) is int:
            return float(value)
    elif t is T.DecimalType:
        if isinstance(value, Decimal) or type(value) is int:
            return Decimal(value)
    elif t is T.BinaryType:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
    elif t is T.DateType:
        if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
            return value
    elif t in (T.TimestampType, T.TimestampNTZType):
        if isinstance(value, _dt.datetime):
            return value
    elif isinstance(dt, T.ArrayType):
        if isinstance(value, (list, tuple)):
            return [_fit(v, dt.elementType, what) for v in value]
    elif isinstance(dt, T.MapType):
        if isinstance(value, dict):
            return {
                _fit(k, dt.keyType, what): _fit(v, dt.valueType, what) for k, v in value.items()
            }
    elif isinstance(dt, T.StructType):
        fields = list(value) if isinstance(value, (tuple, list)) else _row_values(value)
        if fields is not None and len(fields) == len(dt.fields):
            return tuple(_fit(v, f.dataType, what) for v, f in zip(fields, dt.fields, strict=True))
    raise _mismatch(value, dt)


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
    if value is None:
        return None
    if column.pickled:
        return unpickle(value)
    return _native(value, column.data_type, column.type_info)


def _native(value: Any, dt: T.DataType, info: Any) -> Any:
    if isinstance(dt, T.StructType):
        types = getattr(info, "field_types", [None] * len(dt.fields))
        fields = [
            _native(v, f.dataType, i) for v, f, i in zip(value, dt.fields, types, strict=True)
        ]
        if isinstance(info, RowTypeInfo):
            from cairn.common.types import Row

            row = Row(*fields)
            row.set_field_names(info.field_names)
            return row
        return tuple(fields)
    if isinstance(dt, T.ArrayType):
        element = getattr(info, "element_type", None)
        return [_native(v, dt.elementType, element) for v in value]
    if isinstance(dt, T.MapType):
        kt, vt = getattr(info, "key_type", None), getattr(info, "value_type", None)
        return {_native(k, dt.keyType, kt): _native(v, dt.valueType, vt) for k, v in value.items()}
    if isinstance(dt, T.BinaryType):
        return bytes(value)
    return value


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
