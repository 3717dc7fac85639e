"""Compiling resolved expressions to Python source, once per operator.

Invariant: a projection and a filter over a row become one Python function of the row tuple,
generated as source text from typed ``Rex`` trees and compiled once where it runs (the source
travels in the job, the code object is built on first use); no tree is walked per row. SQL's
NULL semantics hold: an operator over a nullable operand is NULL when an operand is NULL
(a helper checks it; an operand typed NOT NULL is used directly), ``AND``/``OR`` are
three-valued, and a filter keeps a row only when its condition is TRUE.

>>> from cairn.table.analysis import Columns, resolve
>>> from cairn.table.expressions import col, lit
>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("a", DataTypes.INT()), ("b", DataTypes.INT(False))])
>>> calc = CompiledCalc(calc_source([resolve(col("b") * 2, cols)], resolve(col("a") > 1, cols)))
>>> calc((5, 3)), calc((None, 3)), calc((0, 3))
((6,), None, None)
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from cairn.table.analysis import Rex
from cairn.table.errors import ValidationError
from cairn.table.time_attributes import proctime_now
from cairn.table.types import DataType
from cairn.table.udf import direct_callable, is_async, is_pandas

__all__ = ["RUNTIME", "CompiledCalc", "calc_source", "cast_function", "expression_source"]

_BINARY = {
    "plus": "+",
    "minus": "-",
    "times": "*",
    "mod": "%",
    "power": "**",
    "equals": "==",
    "not_equals": "!=",
    "less_than": "<",
    "less_than_or_equal": "<=",
    "greater_than": ">",
    "greater_than_or_equal": ">=",
}


_FLOATING = {"plus", "minus", "times", "divide", "mod", "power"}


def _as_type(operand: Rex, source: str, target: DataType) -> str:
    """``source`` cast to ``target`` when ``operand`` has another numeric type."""
    same = (operand.data_type.root, operand.data_type.params) == (target.root, target.params)
    if same or not (operand.data_type.is_numeric and target.is_numeric):
        return source
    return f"_cast({source}, {str(target.nullable_())!r}, False)"


def expression_source(
    rex: Rex, row: str = "r", functions: list[Any] | None = None, direct: bool = False
) -> str:
    """Python source computing ``rex`` from the tuple named ``row``; user-defined functions
    it calls are appended to ``functions`` and called as ``_udf<i>`` (through
    ``_call_udf``, which names the function and its arguments in an error), or, ``direct``,
    as ``_udf<i>_eval`` (the function itself: the batch path, whose errors are named by
    running the failed batch again row by row)."""
    if rex.kind == "input":
        return f"{row}[{rex.index}]"
    if rex.kind == "literal":
        if rex.data_type.root == "DECIMAL":
            return f"_Decimal({str(rex.value)!r})"
        return repr(rex.value)
    if rex.kind == "cast":
        inner = expression_source(rex.operands[0], row, functions, direct)
        if _integral(rex.operands[0].data_type) and rex.data_type.root in (
            "TIMESTAMP",
            "TIMESTAMP_LTZ",
        ):  # the hot cast of event times: epoch milliseconds, no lookup, no float
            return f"_timestamp_of_millis({inner})"
        return f"_cast({inner}, {str(rex.data_type)!r}, {rex.op == 'try'})"
    ops = [expression_source(o, row, functions, direct) for o in rex.operands]
    op = rex.op
    if op == "udf":
        if functions is None:
            raise ValueError("a user-defined function needs a functions list to be compiled")
        if is_pandas(rex.value):  # a Calc's are split out (pandas_split); others are refused
            raise ValidationError(
                f"The pandas function {rex.value.name} can only be called in a projection or"
                " a filter (select, where), not in a join condition or a table function's"
                " arguments"
            )
        functions.append(rex.value)
        name = f"_udf{len(functions) - 1}"
        if direct and not is_async(rex.value):
            return f"{name}_eval({''.join(o + ', ' for o in ops)})"
        call = "(await _call_async_udf" if is_async(rex.value) else "(_call_udf"
        return f"{call}({name}, ({''.join(o + ', ' for o in ops)})))"
    if op in _FLOATING and rex.data_type.root in ("FLOAT", "DOUBLE"):
        # Python refuses float + Decimal: a DECIMAL operand of a DOUBLE result becomes float
        ops = [
            f"_nullsafe1(float, {s})" if o.data_type.root == "DECIMAL" else s
            for o, s in zip(rex.operands, ops, strict=True)
        ]
    direct = not any(o.data_type.nullable for o in rex.operands)
    if op in _BINARY:
        if op == "plus" and rex.operands[1].data_type.root == "INTERVAL":
            return f"_plus_interval({ops[0]}, {ops[1]})"
        if op == "minus" and rex.operands[1].data_type.root == "INTERVAL":
            return f"_plus_interval({ops[0]}, -({ops[1]}))"
        if op == "mod" and _integral(rex.data_type):
            return f"_mod({ops[0]}, {ops[1]})"
        text = f"({ops[0]} {_BINARY[op]} {ops[1]})"
        return text if direct else f"_nullsafe2(lambda x, y: x {_BINARY[op]} y, {ops[0]}, {ops[1]})"
    if op == "divide":
        fn = "_idiv" if _integral(rex.data_type) else "_div"
        if rex.data_type.root == "DECIMAL":  # Flink rounds a quotient to its type's scale
            return f"_cast({fn}({ops[0]}, {ops[1]}), {str(rex.data_type.nullable_())!r}, False)"
        return f"{fn}({ops[0]}, {ops[1]})"
    if op == "minus_prefix":
        return f"(-{ops[0]})" if direct else f"_neg({ops[0]})"
    if op == "and":
        return f"_and({ops[0]}, {ops[1]})"
    if op == "or":
        return f"_or({ops[0]}, {ops[1]})"
    if op == "not":
        return f"_not({ops[0]})"
    if op == "is_null":
        return f"({ops[0]} is None)"
    if op == "is_not_null":
        return f"({ops[0]} is not None)"
    if op == "is_true":
        return f"({ops[0]} is True)"
    if op == "is_false":
        return f"({ops[0]} is False)"
    if op == "in":
        return f"_in({ops[0]}, ({', '.join(ops[1:])},))"
    if op == "between":
        return f"_between({ops[0]}, {ops[1]}, {ops[2]})"
    if op == "not_between":
        return f"_not(_between({ops[0]}, {ops[1]}, {ops[2]}))"
    if op == "if":
        # each branch as the result's type: CASE ... THEN 1 ELSE 2.5 END gives Decimal('1')
        then, otherwise = (
            _as_type(o, s, rex.data_type) for o, s in zip(rex.operands[1:], ops[1:], strict=True)
        )
        return f"({then} if {ops[0]} is True else {otherwise})"
    if op in ("upper", "lower", "trim", "abs", "floor", "ceil", "char_length"):
        return f"_nullsafe1(_{op}, {ops[0]})"
    if op == "round":
        return f"_nullsafe2(_round, {ops[0]}, {ops[1]})"
    if op == "concat":
        return f"_concat(({', '.join(ops)},))"
    if op == "substring":
        length = ops[2] if len(ops) > 2 else "None"
        return f"_substring({ops[0]}, {ops[1]}, {length})"
    if op == "like":
        return f"_like({ops[0]}, {ops[1]})"
    if op == "get_field":
        return f"_nullsafe2(_get_field, {ops[0]}, {rex.value})"
    if op == "json_value":
        return f"_json_value({ops[0]}, {ops[1]})"
    if op == "proctime":
        return "_proctime_now()"
    if op == "coalesce":
        cast = [_as_type(o, s, rex.data_type) for o, s in zip(rex.operands, ops, strict=True)]
        return f"_coalesce(({', '.join(cast)},))"
    raise NotImplementedError(f"no code for {op}")


def _integral(t: DataType) -> bool:
    return t.root in ("TINYINT", "SMALLINT", "INT", "BIGINT")


def calc_source(
    projections: Sequence[Rex] | None,
    condition: Rex | None,
    functions: list[Any] | None = None,
) -> str:
    """Source of ``calc(r)``: the projected tuple of row ``r``, or ``None`` when the condition
    is not TRUE. ``projections`` ``None`` keeps the row as it is. The user-defined functions
    it calls are appended to ``functions``, in the order of their ``_udf<i>`` names.

    A calc without async functions also gets ``calc_batch(records, stamps)``: the outputs of
    a batch of ``(kind, row)`` records in one comprehension (kinds kept, filtered records
    dropped) and the timestamps of the kept ones (``stamps`` ``None``: a plain batch).
    The operands of a top-level ``AND`` are checked in order and stop at the first that is
    not TRUE, so a merged calc evaluates its upper condition only on rows its lower one kept.
    """
    is_async = functions is not None and _calls_async(projections, condition)
    conjuncts = _conjuncts(condition)
    checks = [f"({expression_source(c, 'r', functions)}) is True" for c in conjuncts]
    value = "r" if projections is None else _tuple_source(projections, functions, False)
    lines = ["async def calc(r):" if is_async else "def calc(r):"]
    if checks:
        lines.append(f"    if not ({' and '.join(checks)}):")
        lines.append("        return None")
    lines.append(f"    return {value}")
    if is_async:
        return "\n".join(lines)
    # The batch path calls the functions directly: the same ones, in the same order.
    direct: list[Any] = []
    checks = [f"({expression_source(c, 'r', direct, True)}) is True" for c in conjuncts]
    value = "r" if projections is None else _tuple_source(projections, direct, True)
    assert functions is None or direct == functions, "one order of functions for both paths"
    lines.append("def calc_batch(records, stamps):")
    lines.append("    try:")
    if not checks:
        lines.append(f"        return [(k, {value}) for k, r in records], stamps")
    else:
        kept = " and ".join(checks)
        lines.append("        if stamps is None:")
        lines.append(f"            return [(k, {value}) for k, r in records if {kept}], None")
        lines.append(f"        outs = [((k, {value}) if {kept} else None) for k, r in records]")
        lines.append(
            "        return [o for o in outs if o is not None],"
            " [t for o, t in zip(outs, stamps) if o is not None]"
        )
    lines.append("    except Exception:")
    lines.append("        _rerun_rows(calc, records)  # raises the failing row's named error")
    lines.append("        raise")
    return "\n".join(lines)


def _tuple_source(rexes: Sequence[Rex], functions: list[Any] | None, direct: bool) -> str:
    return "(" + "".join(f"{expression_source(p, 'r', functions, direct)}, " for p in rexes) + ")"


def _rerun_rows(calc: Callable[[tuple[Any, ...]], Any], records: list[Any]) -> None:
    """Run a failed batch's rows through the row path (which names the function and its
    arguments in an error) and raise the first row's error, without the batch's; return
    when no row fails again (the caller then raises the batch's own error)."""
    for _kind, row in records:
        try:
            calc(row)
        except Exception as e:
            raise e from None


def _conjuncts(condition: Rex | None) -> list[Rex]:
    """A condition's top-level ``AND`` operands, in order (none for no condition)."""
    if condition is None:
        return []
    if condition.kind == "call" and condition.op == "and":
        return [c for o in condition.operands for c in _conjuncts(o)]
    return [condition]


def _calls_async(projections: Sequence[Rex] | None, condition: Rex | None) -> bool:
    """Whether any expression calls an async scalar function (the calc is then async)."""

    def walk(rex: Rex) -> bool:
        if rex.op == "udf" and is_async(rex.value):
            return True
        return any(walk(o) for o in rex.operands)

    rexes = [*(projections or ()), *([condition] if condition is not None else [])]
    return any(walk(r) for r in rexes)


def is_async_calc(projections: Sequence[Rex] | None, condition: Rex | None) -> bool:
    """A calc that must run on an event loop (it awaits an async scalar function)."""
    return _calls_async(projections, condition)


class CompiledCalc:
    """A generated function, pickled as its source (and the user-defined functions it calls)
    and compiled on first call."""

    __slots__ = ("_compiled", "functions", "source")

    def __init__(self, source: str, functions: Sequence[Any] = ()) -> None:
        self.source = source
        self.functions = tuple(functions)
        self._compiled: dict[str, Any] | None = None  # the compiled source's namespace

    def __getstate__(self) -> tuple[str, tuple[Any, ...]]:
        return (self.source, self.functions)

    def __setstate__(self, state: tuple[str, tuple[Any, ...]]) -> None:
        self.source, self.functions = state
        self._compiled = None

    def function(self) -> Callable[[tuple[Any, ...]], tuple[Any, ...] | None]:
        """``calc(row)``: the projected row, or ``None`` when filtered out."""
        return self._namespace()["calc"]  # type: ignore[no-any-return]

    def batch_function(self) -> Callable[..., tuple[list[Any], list[int | None] | None]] | None:
        """``calc_batch(records, stamps)`` (see ``calc_source``), ``None`` for an async calc."""
        return self._namespace().get("calc_batch")

    def _namespace(self) -> dict[str, Any]:
        if self._compiled is None:
            namespace = dict(RUNTIME)
            for i, wrapper in enumerate(self.functions):
                namespace[f"_udf{i}"] = wrapper
                namespace[f"_udf{i}_eval"] = direct_callable(wrapper)
            exec(compile(self.source, "<cairn-table-calc>", "exec"), namespace)
            self._compiled = namespace
        return self._compiled

    def __call__(self, row: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return self.function()(row)


# -- the runtime the generated code calls ------------------------------------------------------


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


def _upper(s: str) -> str:
    return s.upper()


def _lower(s: str) -> str:
    return s.lower()


def _trim(s: str) -> str:
    return s.strip(" ")


def _abs(x: Any) -> Any:
    return abs(x)


def _floor(x: Any) -> Any:
    return math.floor(x) if isinstance(x, float) else x


def _ceil(x: Any) -> Any:
    return math.ceil(x) if isinstance(x, float) else x


def _round(x: Any, places: int) -> Any:
    if isinstance(x, int):
        return x
    q = decimal.Decimal(str(x)).quantize(
        decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP
    )
    return type(x)(q) if isinstance(x, float) else q


def _char_length(s: str) -> int:
    return len(s)


def _concat(parts: tuple[Any, ...]) -> Any:
    if any(p is None for p in parts):
        return None
    return "".join(str(p) for p in parts)


def _substring(s: Any, begin: Any, length: Any) -> Any:
    if s is None or begin is None:
        return None
    start = max(begin - 1, 0) if begin > 0 else max(len(s) + begin, 0)
    return s[start:] if length is None else s[start : start + length]


_LIKE_CACHE: dict[str, re.Pattern[str]] = {}


def _like(s: Any, pattern: Any) -> Any:
    if s is None or pattern is None:
        return None
    compiled = _LIKE_CACHE.get(pattern)
    if compiled is None:
        regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
        compiled = _LIKE_CACHE[pattern] = re.compile(regex, re.S)
    return compiled.fullmatch(s) is not None


def _json_value(text: Any, path: Any) -> Any:
    """``JSON_VALUE`` over ``$.a.b`` / ``$.a[0]`` paths: the scalar there as text, else NULL."""
    if text is None or path is None:
        return None
    try:
        node = json.loads(text)
    except (TypeError, ValueError):
        return None
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path[1:]):
        if name:
            if not isinstance(node, dict) or name not in node:
                return None
            node = node[name]
        else:
            if not isinstance(node, list) or int(index) >= len(node):
                return None
            node = node[int(index)]
    if isinstance(node, dict | list) or node is None:
        return None
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


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
RUNTIME["_proctime_now"] = proctime_now
