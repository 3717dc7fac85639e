"""A column of SQL values as a ``pandas.Series``, and a pandas function's result back.

Invariant: pure; a value survives the round trip with its SQL type. An argument column
becomes the Series PyFlink gives (``to_series``): integers as numpy ints of the type's width
(``int8`` ... ``int64``) — or, when the batch holds a NULL, pandas' nullable ``Int8`` ...
``Int64``, never floats; ``FLOAT``/``DOUBLE`` as ``float32``/``float64`` with NULL as NaN;
``BOOLEAN`` as ``bool`` (``boolean`` with NULLs); ``TIMESTAMP``/``TIMESTAMP_LTZ`` as
``datetime64[ns]`` with NULL as NaT; a ``ROW`` as a ``pandas.DataFrame`` of its fields;
anything else (``DECIMAL``, strings, dates, arrays...) as ``object`` holding the Python
values, NULL as ``None``. A result (``from_series``) must be a ``pandas.Series`` (a
``pandas.DataFrame`` for a ``ROW`` result type) and gives one Python value of the declared
type per element — ``int``, ``float``, ``str``, ``Decimal``, ``datetime``... — with NaN, NaT,
``pd.NA`` and ``None`` as NULL; a value of another type, or out of the type's range, fails
naming the function, the position and the value.

>>> from cairn.table.types import DataTypes
>>> s = to_series([1, None, 3], DataTypes.BIGINT())
>>> str(s.dtype), from_series(s + 1, DataTypes.BIGINT(), "inc")
('Int64', [2, None, 4])
>>> from_series(to_series([1.5], DataTypes.DOUBLE()), DataTypes.BIGINT(), "f")
Traceback (most recent call last):
...
TypeError: pandas function f returned 1.5 (float) at row 0, not a BIGINT value
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable, Sequence
from typing import Any

from cairn.common.types import Row
from cairn.table.types import DataType, RowType

__all__ = ["from_series", "to_series"]

_INTEGERS = {
    "TINYINT": ("int8", "Int8", 7),
    "SMALLINT": ("int16", "Int16", 15),
    "INT": ("int32", "Int32", 31),
    "BIGINT": ("int64", "Int64", 63),
}
_TIMESTAMPS = ("TIMESTAMP", "TIMESTAMP_LTZ")


def to_series(values: Sequence[Any], data_type: DataType) -> Any:
    """``values`` (of ``data_type``, ``None`` for NULL) as a Series (a DataFrame for a row)."""
    import pandas as pd

    root = data_type.root
    has_null = any(v is None for v in values)
    if isinstance(data_type, RowType):
        fields = data_type.fields
        return pd.DataFrame(
            {
                f.name: to_series([None if v is None else v[i] for v in values], f.data_type)
                for i, f in enumerate(fields)
            },
            index=pd.RangeIndex(len(values)),
        )
    if root in _INTEGERS:
        numpy_dtype, nullable_dtype, _ = _INTEGERS[root]
        return pd.Series(values, dtype=nullable_dtype if has_null else numpy_dtype)
    if root in ("FLOAT", "DOUBLE"):
        return pd.Series(values, dtype="float32" if root == "FLOAT" else "float64")
    if root == "BOOLEAN":
        return pd.Series(values, dtype="boolean" if has_null else "bool")
    if root in _TIMESTAMPS:
        try:
            return pd.Series(values, dtype="datetime64[ns]")
        except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
            return pd.Series(values, dtype=object)  # beyond datetime64[ns]: the datetimes
    return pd.Series(values, dtype=object)


def from_series(result: Any, data_type: DataType, name: str) -> list[Any]:
    """The Python values of ``result``, a pandas function's (named ``name``) result, as
    ``data_type`` says (see the module docstring)."""
    import pandas as pd

    if isinstance(data_type, RowType) and isinstance(result, pd.DataFrame):
        if len(result.columns) != len(data_type.fields):
            raise TypeError(
                f"pandas function {name} returned a DataFrame of {len(result.columns)} columns"
                f" for a ROW of {len(data_type.fields)} fields"
            )
        columns = [
            from_series(result.iloc[:, i], f.data_type, name)
            for i, f in enumerate(data_type.fields)
        ]
        names = data_type.field_names()
        return [_row(values, names) for values in zip(*columns, strict=True)]
    if not isinstance(result, pd.Series):
        expected = (
            "pandas.Series or pandas.DataFrame"
            if isinstance(data_type, RowType)
            else ("pandas.Series")
        )
        raise TypeError(
            f"The result type of pandas function {name} must be {expected},"
            f" got {type(result).__name__}"
        )
    convert = _converter(data_type)
    out: list[Any] = []
    append = out.append
    for position, value in enumerate(result.tolist()):
        if _is_null(value):
            append(None)
            continue
        try:
            append(convert(value))
        except (TypeError, ValueError, ArithmeticError) as error:
            detail = f": {error}" if str(error) else ""
            raise TypeError(
                f"pandas function {name} returned {value!r} ({type(value).__name__}) at row"
                f" {position}, not a {data_type.nullable_()} value{detail}"
            ) from None
    return out


def _row(values: tuple[Any, ...], names: list[str]) -> Row:
    row = Row(*values)
    row.set_field_names(names)
    return row


def _is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    kind = type(value).__name__
    if kind in ("NAType", "NaTType"):
        return True
    if kind.startswith("float") or kind == "datetime64":  # numpy scalars kept by object Series
        import pandas as pd

        return bool(pd.isna(value))
    return False


def _converter(data_type: DataType) -> Callable[[Any], Any]:
    root = data_type.root
    if root in _INTEGERS:
        bits = _INTEGERS[root][2]
        return lambda v: _integer(v, bits)
    if root in ("FLOAT", "DOUBLE"):
        return _float
    if root == "DECIMAL":
        precision, scale = data_type.params
        return lambda v: _decimal(v, precision, scale)
    if root in ("CHAR", "VARCHAR"):
        return _string
    if root == "BOOLEAN":
        return _boolean
    if root in _TIMESTAMPS:
        return _timestamp
    if root == "DATE":
        return _date
    if root == "TIME":
        return _time
    if root in ("BINARY", "VARBINARY"):
        return _bytes
    if isinstance(data_type, RowType):
        return lambda v: _row(tuple(v), data_type.field_names())
    return _plain


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool) or type(v).__name__ == "bool_"


def _integer(v: Any, bits: int) -> int:
    if _is_bool(v):
        raise TypeError
    if isinstance(v, float | decimal.Decimal) or type(v).__name__.startswith("float"):
        if not float(v).is_integer():
            raise TypeError
        v = int(v)
    if not hasattr(v, "__index__"):  # int, numpy ints
        raise TypeError
    number = int(v)
    if not -(1 << bits) <= number < (1 << bits):
        raise ValueError("out of range")
    return number


def _float(v: Any) -> float:
    if _is_bool(v) or isinstance(v, str | bytes) or not hasattr(v, "__float__"):
        raise TypeError
    return float(v)


def _decimal(v: Any, precision: int, scale: int) -> decimal.Decimal:
    if _is_bool(v):
        raise TypeError
    if isinstance(v, decimal.Decimal):
        d = v
    elif hasattr(v, "__index__"):
        d = decimal.Decimal(int(v))
    elif isinstance(v, float) or type(v).__name__.startswith("float"):
        d = decimal.Decimal(repr(float(v)))
    else:
        raise TypeError
    q = d.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
    if q.adjusted() >= precision - scale:
        raise ValueError("out of range")
    return q


def _string(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError
    return str(v)


def _boolean(v: Any) -> bool:
    if not _is_bool(v):
        raise TypeError
    return bool(v)


def _timestamp(v: Any) -> datetime.datetime:
    if type(v).__name__ == "Timestamp":  # pandas: UTC when it has a zone, as microseconds
        if v.tzinfo is not None:
            v = v.tz_convert("UTC").tz_localize(None)
        result: datetime.datetime = v.to_pydatetime(warn=False)
        return result
    if type(v).__name__ == "datetime64":
        import pandas as pd

        return _timestamp(pd.Timestamp(v))
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            return v
        utc: datetime.datetime = v.astimezone(datetime.timezone.utc)
        return utc.replace(tzinfo=None)
    raise TypeError


def _date(v: Any) -> datetime.date:
    if isinstance(v, datetime.datetime) or type(v).__name__ == "Timestamp":
        return v.date()  # type: ignore[no-any-return]
    if isinstance(v, datetime.date):
        return v
    raise TypeError


def _time(v: Any) -> datetime.time:
    if not isinstance(v, datetime.time):
        raise TypeError
    return v


def _bytes(v: Any) -> bytes:
    if not isinstance(v, bytes | bytearray):
        raise TypeError
    return bytes(v)


def _plain(v: Any) -> Any:
    """Arrays, maps...: numpy arrays as lists, the rest as it is."""
    return v.tolist() if type(v).__name__ == "ndarray" else v
