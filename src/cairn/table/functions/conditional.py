"""Flink's conditional and comparison functions (``NULLIF``, ``IFNULL``, ``GREATEST``...),
the type functions (``TYPEOF``) and the comparison operators, listed for the docs.

Invariant: the implementations here decide their own NULL handling (``strict=False`` where
Flink's differs from NULL in, NULL out: ``IFNULL``, ``IS_ALPHA``, ``IS DISTINCT FROM``); the
operators with ``implementation`` ``None`` (``CASE``, ``IF``, ``COALESCE``, comparisons,
``AND``/``OR``/``NOT``, ``IS NULL``...) are generated inline by the code generator.

>>> greatest(1, 3, 2), is_decimal("-1.5e3"), is_decimal("1.2.3"), nullif(5, 5)
(3, True, False, None)
"""

from __future__ import annotations

import decimal
import re
from typing import Any

from cairn.table.functions.definition import (
    BuiltinFunction,
    common_of,
    returns,
    same_as,
)
from cairn.table.type_merging import wider
from cairn.table.types import DataTypes

__all__ = ["FUNCTIONS", "greatest", "is_decimal", "nullif"]


def greatest(*values: Any) -> Any:
    return max(values)


def least(*values: Any) -> Any:
    return min(values)


def nullif(a: Any, b: Any) -> Any:
    return None if a is not None and b is not None and a == b else a


def if_null(value: Any, replacement: Any) -> Any:
    return replacement if value is None else value


def is_alpha(s: Any) -> bool:
    return isinstance(s, str) and s != "" and all(c.isalpha() for c in s)


def is_digit(s: Any) -> bool:
    return isinstance(s, str) and s != "" and all(c.isdigit() for c in s)


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def is_decimal(s: Any) -> bool:
    return isinstance(s, str) and _DECIMAL.fullmatch(s.strip()) is not None


def is_distinct_from(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return bool(a != b)


def _fn(name: str, signature: str, description: str, **kwargs: Any) -> BuiltinFunction:
    sql = kwargs.pop("sql", (name.upper(),))
    result = kwargs.pop("result", returns(DataTypes.BOOLEAN))
    family = kwargs.pop("family", "conditional")
    return BuiltinFunction(name, sql, signature, description, family, result, **kwargs)


def _operator(
    name: str,
    signature: str,
    description: str,
    inputs: str,
    examples: tuple[tuple[str, Any], ...],
    **kwargs: Any,
) -> BuiltinFunction:
    return _fn(
        name,
        signature,
        description,
        sql=(),
        implementation=None,
        inputs=inputs,
        examples=examples,
        family="comparison",
        **kwargs,
    )


FUNCTIONS = [
    _operator(
        "equals",
        "value1 = value2",
        "TRUE when equal; NULL when either is NULL.",
        "**",
        (("1 = 1", True), ("1 = CAST(NULL AS INT)", None)),
    ),
    _operator("not_equals", "value1 <> value2", "TRUE when not equal.", "**", (("1 <> 2", True),)),
    _operator("greater_than", "value1 > value2", "TRUE when greater.", "**", (("2 > 1", True),)),
    _operator(
        "greater_than_or_equal",
        "value1 >= value2",
        "TRUE when not less.",
        "**",
        (("2 >= 2", True),),
    ),
    _operator("less_than", "value1 < value2", "TRUE when less.", "**", (("'a' < 'b'", True),)),
    _operator(
        "less_than_or_equal",
        "value1 <= value2",
        "TRUE when not greater.",
        "**",
        (("3 <= 2", False),),
    ),
    _operator(
        "is_null", "value IS NULL", "TRUE when NULL.", "*", (("CAST(NULL AS INT) IS NULL", True),)
    ),
    _operator(
        "is_not_null", "value IS NOT NULL", "TRUE when not NULL.", "*", (("1 IS NOT NULL", True),)
    ),
    _operator(
        "is_true",
        "boolean IS TRUE",
        "TRUE when TRUE (not NULL).",
        "b",
        (("CAST(NULL AS BOOLEAN) IS TRUE", False),),
    ),
    _operator(
        "is_false",
        "boolean IS FALSE",
        "TRUE when FALSE (not NULL).",
        "b",
        (("FALSE IS FALSE", True),),
    ),
    _operator(
        "and",
        "boolean1 AND boolean2",
        "Three-valued AND.",
        "bb",
        (("TRUE AND CAST(NULL AS BOOLEAN)", None), ("FALSE AND CAST(NULL AS BOOLEAN)", False)),
    ),
    _operator(
        "or",
        "boolean1 OR boolean2",
        "Three-valued OR.",
        "bb",
        (("TRUE OR CAST(NULL AS BOOLEAN)", True),),
    ),
    _operator("not", "NOT boolean", "Three-valued NOT.", "b", (("NOT FALSE", True),)),
    _operator(
        "in",
        "value IN (value1, value2, ...)",
        "TRUE when the value is in the list.",
        "*+",
        (("4 IN (1, 2, 3)", False), ("2 IN (1, 2, 3)", True)),
    ),
    _operator(
        "between",
        "value1 [NOT] BETWEEN value2 AND value3",
        "TRUE when value2 <= value1 <= value3.",
        "***",
        (("12 BETWEEN 10 AND 15", True), ("12 NOT BETWEEN 15 AND 12", True)),
    ),
    _fn(
        "is_distinct_from",
        "value1 IS [NOT] DISTINCT FROM value2",
        "TRUE when the values differ, NULL counting as a value.",
        sql=(),
        implementation=is_distinct_from,
        inputs="**",
        strict=False,
        result=lambda _: DataTypes.BOOLEAN(False),
        family="comparison",
        examples=(
            ("1 IS DISTINCT FROM CAST(NULL AS INT)", True),
            ("CAST(NULL AS INT) IS NOT DISTINCT FROM CAST(NULL AS INT)", True),
        ),
    ),
    _operator(
        "if",
        "CASE WHEN c THEN r [...] [ELSE e] END, IF(condition, a, b)",
        "The result of the first condition that is TRUE, else the ELSE (or NULL).",
        "b**",
        (
            ("IF(5 > 3, 5, 3)", 5),
            ("CASE WHEN 1 > 2 THEN 'a' ELSE 'b' END", "b"),
            ("CASE 2 WHEN 1 THEN 'x' WHEN 2 THEN 'y' END", "y"),
        ),
        result=common_of(wider),
    ),
    _operator(
        "coalesce",
        "COALESCE(value1, value2, ...)",
        "The first value that is not NULL.",
        "*+",
        (("COALESCE(CAST(NULL AS STRING), 'default')", "default"),),
        result=common_of(wider),
    ),
    _fn(
        "nullif",
        "NULLIF(value1, value2)",
        "NULL when the values are equal, else value1.",
        implementation=nullif,
        inputs="**",
        strict=False,
        result=same_as(0, True),
        examples=(("NULLIF(5, 5)", None), ("NULLIF(5, 0)", 5)),
    ),
    _fn(
        "if_null",
        "IFNULL(input, replacement)",
        "The replacement when input is NULL, else input (nullable only if the replacement is).",
        sql=("IFNULL",),
        implementation=if_null,
        inputs="**",
        strict=False,
        method="if_null",
        coerce_arguments=True,
        result=lambda t: (
            wider(t[0], t[1]).nullable_() if t[1].nullable else wider(t[0], t[1]).not_null()
        ),
        examples=(("IFNULL(CAST(NULL AS INT), 5)", 5), ("IFNULL(3, 5)", 3)),
    ),
    _fn(
        "is_alpha",
        "IS_ALPHA(string)",
        "TRUE when every character is a letter.",
        implementation=is_alpha,
        inputs="s",
        strict=False,
        result=lambda _: DataTypes.BOOLEAN(False),
        examples=(
            ("IS_ALPHA('abc')", True),
            ("IS_ALPHA('ab1')", False),
            ("IS_ALPHA(CAST(NULL AS STRING))", False),
        ),
    ),
    _fn(
        "is_decimal",
        "IS_DECIMAL(string)",
        "TRUE when the string is a number.",
        implementation=is_decimal,
        inputs="s",
        strict=False,
        result=lambda _: DataTypes.BOOLEAN(False),
        examples=(("IS_DECIMAL('-1.5')", True), ("IS_DECIMAL('1a')", False)),
    ),
    _fn(
        "is_digit",
        "IS_DIGIT(string)",
        "TRUE when every character is a digit.",
        implementation=is_digit,
        inputs="s",
        strict=False,
        result=lambda _: DataTypes.BOOLEAN(False),
        examples=(("IS_DIGIT('123')", True), ("IS_DIGIT('12.3')", False)),
    ),
    _fn(
        "greatest",
        "GREATEST(value1, value2, ...)",
        "The greatest value; NULL if any is NULL.",
        implementation=greatest,
        inputs="*+",
        arity=(1, None),
        result=common_of(wider),
        coerce_arguments=True,
        examples=(
            ("GREATEST(1, 5, 3)", 5),
            ("GREATEST('a', 'c', 'b')", "c"),
            ("GREATEST(1, CAST(NULL AS INT))", None),
        ),
    ),
    _fn(
        "least",
        "LEAST(value1, value2, ...)",
        "The least value; NULL if any is NULL.",
        implementation=least,
        inputs="*+",
        arity=(1, None),
        result=common_of(wider),
        coerce_arguments=True,
        examples=(("LEAST(1, 5, 3)", 1), ("LEAST(2.5, 1)", decimal.Decimal("1.0"))),
    ),
    _fn(
        "typeof",
        "TYPEOF(input)",
        "The input's data type, as text (known when planned).",
        implementation=None,
        inputs="*",
        strict=False,
        family="conversion",
        result=lambda _: DataTypes.STRING(False),
        examples=(("TYPEOF(1)", "INT NOT NULL"), ("TYPEOF(CAST(NULL AS STRING))", "STRING")),
    ),
    _operator(
        "cast",
        "CAST(value AS type), TRY_CAST(value AS type)",
        "The value converted; TRY_CAST gives NULL where CAST fails the job.",
        "*",
        (
            ("CAST('42' AS INT)", 42),
            ("TRY_CAST('x' AS INT)", None),
            ("CAST(NULL AS STRING)", None),
            ("COALESCE(TRY_CAST('x' AS INT), 0)", 0),
        ),
    ),
]
