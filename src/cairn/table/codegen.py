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
from collections.abc import Callable, Sequence
from typing import Any

from cairn.table.analysis import Rex, conjuncts
from cairn.table.calc_runtime import RUNTIME
from cairn.table.errors import ValidationError
from cairn.table.functions import registry
from cairn.table.types import DataType
from cairn.table.udf import direct_callable, is_async, is_pandas

__all__ = ["RUNTIME", "CompiledCalc", "calc_source", "expression_source", "is_async_calc"]

_BINARY = {
    "plus": "+",
    "minus": "-",
    "times": "*",
    "mod": "%",
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
        if isinstance(rex.value, datetime.date | datetime.time):
            return "_datetime." + repr(rex.value).removeprefix("datetime.")
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
    if op == "get_field":
        return f"_nullsafe2(_get_field, {ops[0]}, {rex.value})"
    if op == "proctime":
        return "_proctime_now()"
    if op == "coalesce":
        cast = [_as_type(o, s, rex.data_type) for o, s in zip(rex.operands, ops, strict=True)]
        return f"_coalesce(({', '.join(cast)},))"
    builtin = registry.lookup(op)
    if builtin is not None and builtin.implementation is not None:
        # the implementation itself when no operand can be NULL (or it handles NULL)
        wrapped = builtin.strict and any(o.data_type.nullable for o in rex.operands)
        if builtin.coerce_arguments:  # GREATEST(2.5, 1): each argument as the result's type
            ops = [_as_type(o, s, rex.data_type) for o, s in zip(rex.operands, ops, strict=True)]
        return f"{'_fnn_' if wrapped else '_fn_'}{op}({', '.join(ops)})"
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
    parts = conjuncts(condition)
    checks = [f"({expression_source(c, 'r', functions)}) is True" for c in parts]
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
    checks = [f"({expression_source(c, 'r', direct, True)}) is True" for c in parts]
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
