"""SQL function calls by name: ``SUM(a)``, ``UPPER(s)``, ``my_udf(x)``, ``COUNT(DISTINCT a)``,
``SUM(a) FILTER (WHERE b > 1)``, to the Table API's calls.

Invariant: a name resolves in one order: the aggregates the planner adds to the DSL's
(``STDDEV_POP``, ``LISTAGG``...), the planner's own calls (``COUNT`` ... ``MAX``, ``IF``,
``COALESCE``, ``PROCTIME``), the built-in registry's functions, then the user's functions
registered by name; a planner or built-in call's number of arguments is checked before any
argument converts, ``DISTINCT`` and ``FILTER`` apply to aggregates only, and every failure
names the call's position in the SQL text.

>>> from cairn.table.sql.expressions import parse_expression
>>> str(parse_expression("SUM(DISTINCT a) FILTER (WHERE b > 1)"))
'agg_filter(distinct(sum(a)), greater_than(b, 1))'
>>> "LISTAGG" in call_names()
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from cairn.table.expressions import AGGREGATE_MODIFIERS, AGGREGATES, Expression, coalesce, lit
from cairn.table.functions import registry
from cairn.table.sql.dialect import TableArg
from cairn.table.sql.errors import SqlErrors

__all__ = ["NILADIC", "FunctionCalls", "call_names"]

#: SQL functions by name: how many arguments, and the DSL call they become.
_FUNCTIONS: dict[str, tuple[range, Callable[..., Expression]]] = {
    "COUNT": (range(1, 2), lambda a: a.count),
    "SUM": (range(1, 2), lambda a: a.sum),
    "AVG": (range(1, 2), lambda a: a.avg),
    "MIN": (range(1, 2), lambda a: a.min),
    "MAX": (range(1, 2), lambda a: a.max),
    "PROCTIME": (range(0, 1), lambda: Expression("call", "proctime")),
    "IF": (range(3, 4), lambda c, t, f: c.if_then_else(t, f)),
    "COALESCE": (range(1, 64), coalesce),
}

#: SQL aggregate functions beyond ``_FUNCTIONS``'s: how many arguments, the DSL call.
_AGGREGATE_FUNCTIONS: dict[str, tuple[range, Callable[..., Expression]]] = {
    "STDDEV_POP": (range(1, 2), lambda a: a.stddev_pop),
    "STDDEV_SAMP": (range(1, 2), lambda a: a.stddev_samp),
    "STDDEV": (range(1, 2), lambda a: a.stddev_samp),
    "VAR_POP": (range(1, 2), lambda a: a.var_pop),
    "VAR_SAMP": (range(1, 2), lambda a: a.var_samp),
    "VARIANCE": (range(1, 2), lambda a: a.var_samp),
    "FIRST_VALUE": (range(1, 2), lambda a: a.first_value),
    "LAST_VALUE": (range(1, 2), lambda a: a.last_value),
    "LISTAGG": (range(1, 3), lambda a, sep=None: a.list_agg("," if sep is None else sep.value)),
}

#: The aggregates ``AGG(DISTINCT ...)`` may name.
_DISTINCT_AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", *_AGGREGATE_FUNCTIONS}


def call_names() -> list[str]:
    """The calls the converter plans itself (aggregates, ``IF``, ``COALESCE``, ``PROCTIME``),
    beside the registry's functions (``SHOW FUNCTIONS`` lists them)."""
    return [*_FUNCTIONS, *_AGGREGATE_FUNCTIONS, *NILADIC]


#: Calls whose first argument is a unit written as a name (``TIMESTAMPADD(HOUR, 1, t)``).
_UNIT_FIRST = frozenset({"TIMESTAMPADD", "TIMESTAMPDIFF"})


#: Niladic functions written without parentheses, read as names when no column has them.
NILADIC = {"LOCALTIME": "localtime", "LOCALTIMESTAMP": "localtimestamp"}


class FunctionCalls:
    """The function calls of one statement's expressions: ``convert`` converts an argument,
    ``functions`` looks up the user-defined functions registered by name."""

    def __init__(
        self,
        errors: SqlErrors,
        convert: Callable[[exp.Expr], Expression],
        functions: Callable[[str], Any] | None,
    ) -> None:
        self._errors = errors
        self._convert = convert
        self._functions = functions

    def call(self, node: exp.Anonymous) -> Expression:
        """``NAME(args...)``, by the name's order (see the module's invariant)."""
        name = str(node.this).upper()
        args_nodes = list(node.expressions)
        if name == "COUNT" and len(args_nodes) == 1 and isinstance(args_nodes[0], exp.Star):
            return Expression("call", "count", (Expression("star"),))
        if args_nodes and isinstance(args_nodes[0], exp.Distinct):
            return self._distinct(node, name, args_nodes)
        if name in _AGGREGATE_FUNCTIONS:
            arity, build = _AGGREGATE_FUNCTIONS[name]
            if len(args_nodes) not in arity:
                raise self._errors.at(
                    node, f"Invalid number of arguments to function '{name}': {len(args_nodes)}"
                )
            if name == "LISTAGG" and len(args_nodes) == 2:
                separator = args_nodes[1]
                if not isinstance(separator, exp.Literal) or not separator.is_string:
                    raise self._errors.at(separator, "LISTAGG's separator is a string literal")
            return build(*(self._convert(a) for a in args_nodes))
        for a in args_nodes:
            if isinstance(a, exp.Distinct):
                raise self._errors.at(node, f"{name}(DISTINCT ...) is not supported yet")
            if isinstance(a, TableArg):
                raise self._errors.at(node, f"Table function {name}(TABLE ...) is not supported")
        builtin = None if name in _FUNCTIONS else registry.by_sql_name(name)
        known = _FUNCTIONS.get(name)
        user = None
        if known is None and builtin is None and self._functions is not None:
            user = self._functions(name)
        if user is not None:
            if getattr(user, "kind", "") == "table":
                raise self._errors.at(
                    node,
                    f"Table function {node.this!s} is called in FROM ..., LATERAL TABLE(...),"
                    " not in an expression",
                )
            result: Expression = user(*(self._convert(a) for a in args_nodes))
            return result
        if builtin is not None:
            if not builtin.accepts(len(args_nodes)):
                raise self._errors.at(
                    node,
                    f"Invalid number of arguments to function '{name}': {len(args_nodes)}"
                    f" (it is {builtin.signature})",
                )
            if name in _UNIT_FIRST and isinstance(args_nodes[0], exp.Column):
                unit = lit(args_nodes[0].name.upper())
                return _call(builtin.name, unit, *(self._convert(a) for a in args_nodes[1:]))
            return _call(builtin.name, *(self._convert(a) for a in args_nodes))
        if known is None:
            raise self._errors.at(node, f"No match found for function signature {node.this!s}(...)")
        arity, build = known
        if len(args_nodes) not in arity:
            raise self._errors.at(
                node, f"Invalid number of arguments to function '{name}': {len(args_nodes)}"
            )
        return build(*(self._convert(a) for a in args_nodes))

    def _distinct(self, node: exp.Anonymous, name: str, args_nodes: list[exp.Expr]) -> Expression:
        """``AGG(DISTINCT a)``: the aggregate of ``a`` wrapped in ``distinct``."""
        inner = args_nodes[0].expressions
        if name not in _DISTINCT_AGGREGATES:
            raise self._errors.at(node, f"{name}(DISTINCT ...) is not supported")
        if len(inner) != 1 or (len(args_nodes) != 1 and name != "LISTAGG"):
            raise self._errors.at(node, f"{name}(DISTINCT ...) takes one column here")
        plain = exp.Anonymous(this=node.this, expressions=[inner[0], *args_nodes[1:]])
        for key in ("start", "end"):
            if key in node.meta:
                plain.meta[key] = node.meta[key]
        return self.call(plain).distinct

    def filtered(self, node: exp.Filter) -> Expression:
        """``AGG(...) FILTER (WHERE condition)``."""
        aggregate = self._convert(node.this)
        if not _is_aggregate(aggregate):
            raise self._errors.at(node, "FILTER applies to an aggregate call only", "FILTER")
        where = node.expression
        condition = self._convert(where.this if isinstance(where, exp.Where) else where)
        return Expression("call", "agg_filter", (aggregate, condition))


def _is_aggregate(expr: Expression) -> bool:
    if expr.kind != "call":
        return False
    if expr.name == "udf":
        return bool(expr.value.kind == "aggregate")
    if expr.name in AGGREGATE_MODIFIERS:
        return _is_aggregate(expr.args[0])
    return expr.name in AGGREGATES


def _call(name: str, *args: Expression) -> Expression:
    return Expression("call", name, args)
