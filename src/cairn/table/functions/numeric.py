"""Flink's built-in numeric functions (``SQRT``, ``LOG``, ``TRUNCATE``, ``RAND``, ``HEX``...).

Invariant: each implementation is a pure function of non-NULL arguments (the registry's NULL
rule runs first), except the random ones (``RAND``, ``RAND_INTEGER``, ``UUID``), which are
marked non-deterministic. The transcendental functions return DOUBLE; ``ABS``, ``SIGN``,
``CEIL``, ``FLOOR``, ``ROUND`` and ``TRUNCATE`` keep their argument's type (a DECIMAL stays a
``Decimal``, an integer an ``int``). The arithmetic operators themselves (``+``, ``%``,
``POWER``...) are generated inline by the code generator and listed here for the docs.

>>> truncate(42.324, 2), truncate(decimal.Decimal("-1.29"), 1), hex_(20), bin_(12)
(42.32, Decimal('-1.2'), '14', '1100')
"""

from __future__ import annotations

import decimal
import math
import random
import uuid
from typing import Any

from cairn.table.functions.definition import BuiltinFunction, returns, same_as
from cairn.table.types import DataType, DataTypes

__all__ = ["FUNCTIONS", "bin_", "hex_", "truncate"]


def _as_float(x: Any) -> float:
    return float(x)


def _domain(f: Any) -> Any:
    """``f`` of a float, NaN where Java's ``Math`` gives NaN (Python raises)."""

    def call(*args: Any) -> float:
        try:
            return float(f(*(float(a) for a in args)))
        except ValueError:
            return math.nan
        except ZeroDivisionError:
            return math.inf

    call.__name__ = getattr(f, "__name__", "function")
    return call


def _ln(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.log(x)


def log(a: Any, b: Any = None) -> float:
    """``LOG(x)`` natural, ``LOG(base, x)``."""
    if b is None:
        return float(_domain(_ln)(a))
    return float(_domain(lambda base, x: math.log(x) / math.log(base))(a, b))


def floor(x: Any) -> Any:
    if isinstance(x, float):
        return float(math.floor(x))
    if isinstance(x, decimal.Decimal):
        return x.to_integral_value(rounding=decimal.ROUND_FLOOR)
    return x


def ceil(x: Any) -> Any:
    if isinstance(x, float):
        return float(math.ceil(x))
    if isinstance(x, decimal.Decimal):
        return x.to_integral_value(rounding=decimal.ROUND_CEILING)
    return x


def round_(x: Any, places: int = 0) -> Any:
    """HALF_UP to ``places`` decimals (negative: left of the point), keeping the type."""
    exact = decimal.Decimal(str(x)) if isinstance(x, float) else decimal.Decimal(x)
    q = exact.quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP)
    if isinstance(x, int):
        return int(q)
    if isinstance(x, float):
        return float(q)
    return q if places >= 0 else q.quantize(decimal.Decimal(1))


def truncate(x: Any, places: int = 0) -> Any:
    """``x`` cut (toward zero) to ``places`` decimals (negative: left of the point)."""
    exact = decimal.Decimal(str(x)) if isinstance(x, float) else decimal.Decimal(x)
    q = exact.quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_DOWN)
    if isinstance(x, int):
        return int(q)
    if isinstance(x, float):
        return float(q)
    return q


def sign(x: Any) -> Any:
    s = (x > 0) - (x < 0)
    if isinstance(x, float):
        return float(s)
    if isinstance(x, decimal.Decimal):
        return decimal.Decimal(s)
    return s


def bin_(x: int) -> str:
    """Java's ``Long.toBinaryString``: two's complement for a negative number."""
    return format(x & 0xFFFFFFFFFFFFFFFF if x < 0 else x, "b")


def hex_(x: Any) -> str:
    """An integer in hex (two's complement when negative), a string's UTF-8 bytes in hex."""
    if isinstance(x, str):
        return x.encode("utf-8").hex().upper()
    if isinstance(x, bytes | bytearray):
        return bytes(x).hex().upper()
    n = int(x)
    return format(n & 0xFFFFFFFFFFFFFFFF if n < 0 else n, "X")


def unhex(s: str) -> bytes | None:
    text = s if len(s) % 2 == 0 else "0" + s
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


_SEEDED: dict[tuple[str, int], random.Random] = {}


def rand(seed: int | None = None) -> float:
    if seed is None:
        return random.random()
    return _SEEDED.setdefault(("rand", seed), random.Random(seed)).random()


def rand_integer(a: int, b: int | None = None) -> int:
    """``RAND_INTEGER(bound)``, ``RAND_INTEGER(seed, bound)``: in ``[0, bound)``."""
    if b is None:
        return random.randrange(a)
    return _SEEDED.setdefault(("rand_integer", a), random.Random(a)).randrange(b)


def _rounded_type(types: list[DataType] | Any) -> DataType:
    """``CEIL``/``FLOOR`` of a DECIMAL(p, s): DECIMAL(p - s + 1, 0) (room for a carry)."""
    t = types[0]
    if t.root == "DECIMAL" and t.params[1] > 0:
        p, s = t.params
        return DataTypes.DECIMAL(min(38, p - s + 1), 0, t.nullable)
    return t


def _fn(name: str, signature: str, description: str, **kwargs: Any) -> BuiltinFunction:
    sql = kwargs.pop("sql", (name.upper(),))
    result = kwargs.pop("result", returns(DataTypes.DOUBLE))
    kwargs.setdefault("inputs", "n")
    if "implementation" not in kwargs:
        kwargs["implementation"] = _domain(getattr(math, name))
    return BuiltinFunction(name, sql, signature, description, "numeric", result, **kwargs)


def _operator(name: str, signature: str, description: str, example: tuple[str, Any]) -> Any:
    return _fn(
        name,
        signature,
        description,
        sql=(),
        implementation=None,
        inputs="nn",
        result=same_as(0),
        examples=(example,),
    )


FUNCTIONS = [
    _operator("plus", "numeric1 + numeric2", "The sum.", ("1 + 2", 3)),
    _operator("minus", "numeric1 - numeric2", "The difference.", ("5 - 7", -2)),
    _operator("times", "numeric1 * numeric2", "The product.", ("1.5 * 2", decimal.Decimal("3.0"))),
    _operator(
        "divide", "numeric1 / numeric2", "The quotient (an integer one for integers).", ("7 / 2", 3)
    ),
    _operator("minus_prefix", "- numeric", "The negation.", ("-(3)", -3)),
    _fn(
        "mod",
        "MOD(numeric1, numeric2), numeric1 % numeric2",
        "The remainder, negative only when numeric1 is.",
        sql=("MOD",),
        implementation=None,
        inputs="nn",
        result=same_as(1),
        examples=(("MOD(-7, 3)", -1), ("7 % 3", 1)),
    ),
    _fn(
        "power",
        "POWER(numeric1, numeric2)",
        "numeric1 raised to numeric2, a DOUBLE.",
        implementation=lambda a, b: float(a) ** float(b),
        inputs="nn",
        method="power",
        examples=(("POWER(2, 10)", 1024.0), ("POWER(4, 0.5)", 2.0)),
    ),
    _fn(
        "abs",
        "ABS(numeric)",
        "The absolute value.",
        implementation=abs,
        result=same_as(0),
        method="abs",
        method_is_property=True,
        examples=(("ABS(-2.5)", decimal.Decimal("2.5")), ("ABS(CAST(NULL AS INT))", None)),
    ),
    _fn(
        "sqrt",
        "SQRT(numeric)",
        "The square root.",
        method="sqrt",
        method_is_property=True,
        examples=(("SQRT(16)", 4.0),),
    ),
    _fn(
        "ln",
        "LN(numeric)",
        "The natural logarithm.",
        implementation=_domain(_ln),
        method="ln",
        method_is_property=True,
        examples=(("LN(1)", 0.0),),
    ),
    _fn(
        "log10",
        "LOG10(numeric)",
        "The base 10 logarithm.",
        method="log10",
        method_is_property=True,
        examples=(("LOG10(1000)", 3.0),),
    ),
    _fn(
        "log2",
        "LOG2(numeric)",
        "The base 2 logarithm.",
        method="log2",
        method_is_property=True,
        examples=(("LOG2(8)", 3.0),),
    ),
    _fn(
        "log",
        "LOG(numeric) | LOG(base, numeric)",
        "The natural logarithm, or the logarithm to base.",
        implementation=log,
        inputs="nn",
        arity=(1, 2),
        method="log",
        examples=(("LOG(1)", 0.0), ("LOG(2, 8)", 3.0)),
    ),
    _fn(
        "exp",
        "EXP(numeric)",
        "e raised to numeric.",
        method="exp",
        method_is_property=True,
        examples=(("EXP(0)", 1.0),),
    ),
    _fn(
        "ceil",
        "CEIL(numeric), CEILING(numeric)",
        "The smallest integral value not below.",
        sql=("CEIL", "CEILING"),
        implementation=ceil,
        result=_rounded_type,
        method="ceil",
        method_is_property=True,
        examples=(("CEIL(1.2)", decimal.Decimal("2")), ("CEILING(CAST(-1.5 AS DOUBLE))", -1.0)),
    ),
    _fn(
        "floor",
        "FLOOR(numeric)",
        "The largest integral value not above.",
        implementation=floor,
        result=_rounded_type,
        method="floor",
        method_is_property=True,
        examples=(("FLOOR(1.7)", decimal.Decimal("1")), ("FLOOR(-3)", -3)),
    ),
    *(
        _fn(
            f,
            f"{f.upper()}(numeric)",
            what,
            method=f,
            method_is_property=True,
            examples=((f"{f.upper()}({arg})", value),),
        )
        for f, what, arg, value in (
            ("sin", "The sine.", "0", 0.0),
            ("cos", "The cosine.", "0", 1.0),
            ("tan", "The tangent.", "0", 0.0),
            ("asin", "The arc sine.", "0", 0.0),
            ("acos", "The arc cosine.", "1", 0.0),
            ("atan", "The arc tangent.", "0", 0.0),
            ("sinh", "The hyperbolic sine.", "0", 0.0),
            ("cosh", "The hyperbolic cosine.", "0", 1.0),
            ("tanh", "The hyperbolic tangent.", "0", 0.0),
            ("degrees", "Radians in degrees.", "PI()", 180.0),
            ("radians", "Degrees in radians.", "180", math.pi),
        )
    ),
    _fn(
        "cot",
        "COT(numeric)",
        "The cotangent.",
        implementation=_domain(lambda x: 1 / math.tan(x)),
        method="cot",
        method_is_property=True,
        examples=(("COT(PI() / 4) > 0.999", True),),
    ),
    _fn(
        "atan2",
        "ATAN2(numeric1, numeric2)",
        "The arc tangent of the point (numeric1, numeric2).",
        inputs="nn",
        examples=(("ATAN2(0, 1)", 0.0),),
    ),
    _fn(
        "sign",
        "SIGN(numeric)",
        "-1, 0 or 1 as the number's sign, in its type.",
        implementation=sign,
        result=same_as(0),
        method="sign",
        method_is_property=True,
        examples=(("SIGN(-5)", -1), ("SIGN(CAST(2.5 AS DOUBLE))", 1.0)),
    ),
    _fn(
        "round",
        "ROUND(numeric[, integer])",
        "Rounded half up to integer decimal places.",
        implementation=round_,
        inputs="ni",
        arity=(1, 2),
        result=same_as(0),
        method="round",
        examples=(("ROUND(1.25, 1)", decimal.Decimal("1.3")), ("ROUND(125, -1)", 130)),
    ),
    _fn(
        "truncate",
        "TRUNCATE(numeric[, integer])",
        "Cut toward zero to integer decimal places.",
        implementation=truncate,
        inputs="ni",
        arity=(1, 2),
        result=same_as(0),
        method="truncate",
        examples=(
            ("TRUNCATE(42.324, 2)", decimal.Decimal("42.32")),
            ("TRUNCATE(CAST(42.324 AS DOUBLE))", 42.0),
        ),
    ),
    _fn(
        "pi",
        "PI()",
        "The value closest to pi.",
        implementation=lambda: math.pi,
        inputs="",
        result=lambda _: DataTypes.DOUBLE(False),
        examples=(("PI()", math.pi),),
    ),
    _fn(
        "e",
        "E()",
        "The value closest to e.",
        implementation=lambda: math.e,
        inputs="",
        result=lambda _: DataTypes.DOUBLE(False),
        examples=(("E()", math.e),),
    ),
    _fn(
        "rand",
        "RAND([seed])",
        "A pseudorandom DOUBLE in [0, 1) (a sequence per seed).",
        implementation=rand,
        inputs="i",
        arity=(0, 1),
        deterministic=False,
        result=lambda t: DataTypes.DOUBLE(bool(t) and t[0].nullable),
        examples=(("RAND() < 1", True), ("RAND(7) >= 0", True)),
    ),
    _fn(
        "rand_integer",
        "RAND_INTEGER([seed, ] bound)",
        "A pseudorandom INT in [0, bound).",
        implementation=rand_integer,
        inputs="ii",
        arity=(1, 2),
        deterministic=False,
        result=returns(lambda n: DataTypes.INT(n)),
        examples=(("RAND_INTEGER(10) < 10", True), ("RAND_INTEGER(1, 1)", 0)),
    ),
    _fn(
        "uuid",
        "UUID()",
        "A random (version 4) UUID string.",
        implementation=lambda: str(uuid.uuid4()),
        inputs="",
        deterministic=False,
        result=lambda _: DataTypes.STRING(False),
        examples=(("CHAR_LENGTH(UUID())", 36),),
    ),
    _fn(
        "bin",
        "BIN(integer)",
        "The integer in binary.",
        implementation=bin_,
        inputs="i",
        result=returns(lambda n: DataTypes.STRING(n)),
        method="bin",
        method_is_property=True,
        examples=(("BIN(4)", "100"), ("BIN(12)", "1100")),
    ),
    _fn(
        "hex",
        "HEX(numeric | string)",
        "An integer, or a string's bytes, in hex.",
        implementation=hex_,
        inputs="x",
        result=returns(lambda n: DataTypes.STRING(n)),
        method="hex",
        method_is_property=True,
        examples=(("HEX(100)", "64"), ("HEX('hello,world')", "68656C6C6F2C776F726C64")),
    ),
    _fn(
        "unhex",
        "UNHEX(string)",
        "The bytes a hex string spells (NULL if it is not hex).",
        implementation=unhex,
        inputs="s",
        result=lambda t: DataTypes.BYTES(True),
        method="unhex",
        method_is_property=True,
        examples=(("UNHEX('466C696E6B')", b"Flink"), ("UNHEX('zz')", None)),
    ),
]
