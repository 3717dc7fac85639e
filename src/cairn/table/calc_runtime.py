"""The functions generated calc code calls: SQL's NULL-safe operators, casts, and the calls of
user-defined functions that name them in an error (the built-in functions are the registry's,
``cairn.table.functions``, added to ``RUNTIME``).

Invariant: every function here is the value of one SQL operator or cast with Flink's NULL
semantics (NULL in, NULL out, unless the operator says otherwise: ``AND``/``OR`` are
three-valued) and has no state; ``RUNTIME`` maps the names generated code uses (``_cast``,
``_and``...) to them, and is the whole namespace a calc is compiled in besides its UDFs.

>>> RUNTIME["_and"](True, None), RUNTIME["_cast"]("7", "INT", False), java_double_text(1e20)
(None, 7, '1.0E20')
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from typing import Any

from cairn.table.functions import registry
from cairn.table.time_attributes import proctime_now

__all__ = ["RUNTIME", "cast_function", "java_double_text", "sql_text"]


def _rerun_rows(calc: Callable[[tuple[Any, ...]], Any], records: list[Any]) -> None:
    """Run a failed batch's rows through the row path (which names the function and its
    arguments in an error) and raise the first row's error, without the batch's; return
    when no row fails again (the caller then raises the batch's own error)."""
    for _kind, row in records:
        try:
            calc(row)
        except Exception as e:
            raise e from None


async def _call_async_udf(wrapper: Any, args: tuple[Any, ...]) -> Any:
    """Await an async scalar function; its error names the function and the arguments."""
    try:
        return await wrapper.function.eval(*args)
    except Exception as e:
        if hasattr(e, "add_note"):  # Python 3.11+
            e.add_note(f"in user-defined function {wrapper.name}{args!r}")
        raise


def _call_udf(wrapper: Any, args: tuple[Any, ...]) -> Any:
    """Call a user-defined function; its error names the function and the arguments."""
    try:
        return wrapper.function.eval(*args)
    except Exception as e:
        if hasattr(e, "add_note"):  # Python 3.11+
            e.add_note(f"in user-defined function {wrapper.name}{args!r}")
        raise


def _nullsafe1(f: Callable[[Any], Any], a: Any) -> Any:
    return None if a is None else f(a)


def _nullsafe2(f: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    return None if a is None or b is None else f(a, b)


def _neg(a: Any) -> Any:
    return None if a is None else -a


def _div(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if b == 0:
        raise ArithmeticError(f"Division by zero: {a} / {b}")
    return a / b


def _idiv(a: Any, b: Any) -> Any:
    """Java's integer division: truncates toward zero."""
    if a is None or b is None:
        return None
    if b == 0:
        raise ArithmeticError(f"Division by zero: {a} / {b}")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _mod(a: Any, b: Any) -> Any:
    """Java's remainder: the sign of the dividend."""
    if a is None or b is None:
        return None
    return int(math.fmod(a, b))


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not(a: Any) -> Any:
    return None if a is None else not a


def _in(a: Any, values: tuple[Any, ...]) -> Any:
    if a is None:
        return None
    return a in values


def _between(a: Any, lo: Any, hi: Any) -> Any:
    if a is None or lo is None or hi is None:
        return None
    return bool(lo <= a <= hi)


def _get_field(row: Any, index: int) -> Any:
    return row[index]


def _coalesce(values: tuple[Any, ...]) -> Any:
    return next((v for v in values if v is not None), None)


def _plus_interval(t: Any, millis: Any) -> Any:
    if t is None or millis is None:
        return None
    return t + datetime.timedelta(milliseconds=millis)


def cast_function(target: str) -> Callable[[Any], Any]:
    """The conversion of a value to the SQL type named ``target`` (``str(DataType)``)."""
    root = target.split("(")[0].split(" ")[0].split("<")[0]
    if root in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return _to_int
    if root in ("FLOAT", "DOUBLE"):
        return float
    if root == "DECIMAL":
        scale = int(target.split(",")[1].split(")")[0]) if "," in target else 0
        quantum = decimal.Decimal(1).scaleb(-scale)
        return lambda v: decimal.Decimal(str(v).strip()).quantize(
            quantum, rounding=decimal.ROUND_HALF_UP
        )
    if root in ("STRING", "VARCHAR", "CHAR"):
        return sql_text
    if root == "BOOLEAN":
        return _to_bool
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _to_timestamp
    if root == "DATE":
        return lambda v: (
            v.date()
            if isinstance(v, datetime.datetime)
            else (
                v if isinstance(v, datetime.date) else datetime.date.fromisoformat(str(v).strip())
            )
        )
    return lambda v: v


_CASTS: dict[str, Callable[[Any], Any]] = {}


def _cast(value: Any, target: str, try_: bool) -> Any:
    if value is None:
        return None
    f = _CASTS.get(target)
    if f is None:
        f = _CASTS[target] = cast_function(target)
    try:
        return f(value)
    except (ValueError, TypeError, ArithmeticError, decimal.InvalidOperation) as e:
        if try_:
            return None
        raise ValueError(f"Cannot cast {value!r} to {target}: {e}") from None


def _to_int(v: Any) -> int:
    if isinstance(v, str):
        return int(v.strip())
    if isinstance(v, bool):
        return int(v)
    return int(v)


def _to_bool(v: Any) -> bool:
    if isinstance(v, str):
        text = v.strip().lower()
        if text in ("true", "t", "yes", "y", "1"):
            return True
        if text in ("false", "f", "no", "n", "0"):
            return False
        raise ValueError(f"not a boolean: {v!r}")
    return bool(v)


_EPOCH = datetime.datetime(1970, 1, 1)


def _timestamp_of_millis(v: int | None) -> datetime.datetime | None:
    """``CAST(<integer> AS TIMESTAMP)``: epoch milliseconds as a naive UTC timestamp, the
    value ``_to_timestamp`` gives an int.

    >>> _timestamp_of_millis(1_500), _timestamp_of_millis(None)
    (datetime.datetime(1970, 1, 1, 0, 0, 1, 500000), None)
    """
    return None if v is None else _EPOCH + datetime.timedelta(milliseconds=v)


def _to_timestamp(v: Any) -> datetime.datetime:
    if isinstance(v, datetime.datetime):
        return v
    if hasattr(v, "to_epoch_milli"):  # cairn.common.time.Instant
        v = v.to_epoch_milli()
    if isinstance(v, int | float):
        utc = datetime.datetime.fromtimestamp(v / 1000, datetime.timezone.utc)
        return utc.replace(tzinfo=None)
    return datetime.datetime.fromisoformat(str(v).strip())


def java_double_text(x: float) -> str:
    """Java's ``Double.toString``: plain between 1e-3 and 1e7, else ``1.0E10``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0.0" if math.copysign(1, x) > 0 else "-0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if "." in text or "e" in text else text + ".0"
    sign, digits, exponent = decimal.Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    power = len(text) - 1 + exponent
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def sql_text(v: Any) -> str:
    """A value as Flink's ``CAST(v AS STRING)`` prints it."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float):
        return java_double_text(v)
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, list | tuple):
        return "[" + ", ".join("NULL" if x is None else sql_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{sql_text(k)}={sql_text(x)}" for k, x in v.items()) + "}"
    return str(v)


RUNTIME: dict[str, Any] = {
    name: value
    for name, value in globals().items()
    if name.startswith("_") and not name.startswith("__") and callable(value)
}
RUNTIME["_Decimal"] = decimal.Decimal
RUNTIME["_datetime"] = datetime
RUNTIME.update(registry.RUNTIME)  # the built-in functions: _fn_<name>, _fnn_<name>
RUNTIME["_proctime_now"] = proctime_now
