"""SQL expression trees to the Table API's ``Expression`` trees.

Invariant: pure and schema-free, except that a column name is checked against the names in
scope when they are given, so an unknown column fails with its SQL position. The result is the
tree the Table API's DSL builds for the same expression (``a > 1`` is ``col('a') > 1``), so SQL
and the DSL resolve and compile through the same code.

>>> str(parse_expression("a * 2 > 10 AND b IS NOT NULL"))
'and(greater_than(times(a, 2), 10), is_not_null(b))'
>>> str(parse_expression("CAST(a AS DECIMAL(10, 2)) + INTERVAL '3' SECOND"))
'plus(cast(a, DECIMAL(10, 2)), 3000)'
>>> str(parse_expression("CASE WHEN a > 1 THEN 'x' ELSE COALESCE(b, 'y') END"))
"if(greater_than(a, 1), 'x', coalesce(b, 'y'))"
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlglot import exp

from cairn.table.errors import ValidationError
from cairn.table.expressions import (
    AGGREGATE_MODIFIERS,
    AGGREGATES,
    Expression,
    coalesce,
    col,
    concat,
    lit,
)
from cairn.table.functions import registry
from cairn.table.sql.dialect import FlinkCast, FlinkJsonCall, TableArg
from cairn.table.sql.errors import SqlValidationError, position_of
from cairn.table.sql.parse import parse_expression_tree
from cairn.table.sql.type_names import parse_type
from cairn.table.types import DataType, DataTypes

__all__ = ["ExpressionConverter", "SqlErrors", "call_names", "parse_expression", "to_expression"]


def _start(node: exp.Expr) -> int | None:
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    return min(starts) if starts else None


def _end(node: exp.Expr) -> int | None:
    ends = [n.meta["end"] for n in node.walk() if "end" in n.meta]
    return max(ends) if ends else None


_T = TypeVar("_T")


class SqlErrors:
    """Errors positioned in one statement's text."""

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def run(self, node: exp.Expr, step: Callable[[], _T]) -> _T:
        """``step()`` (a Table API step); a ``ValidationError`` it raises gets ``node``'s
        position (one already positioned passes as it is)."""
        try:
            return step()
        except SqlValidationError:
            raise
        except ValidationError as error:
            raise self.at(node, str(error)) from None

    def at(self, node: exp.Expr, message: str, keyword: str = "") -> SqlValidationError:
        """An error at ``node`` (at the ``keyword`` before it, when given)."""
        start, end = _start(node), _end(node)
        if start is not None and keyword:
            found = self.sql.upper().rfind(keyword, 0, start + 1)
            start = found if found >= 0 else start
            end = start + len(keyword) - 1
        if start is None:
            return SqlValidationError(message, 1, 1)
        line, column = position_of(self.sql, start)
        end_line, end_column = position_of(self.sql, end if end is not None else start)
        return SqlValidationError(message, line, column, end_column if end_line == line else column)


_BINARY: dict[type[exp.Expr], str] = {
    exp.Add: "plus",
    exp.Sub: "minus",
    exp.Mul: "times",
    exp.Div: "divide",
    exp.Mod: "mod",
    exp.EQ: "equals",
    exp.NEQ: "not_equals",
    exp.LT: "less_than",
    exp.LTE: "less_than_or_equal",
    exp.GT: "greater_than",
    exp.GTE: "greater_than_or_equal",
    exp.And: "and",
    exp.Or: "or",
}

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
    return [*_FUNCTIONS, *_AGGREGATE_FUNCTIONS, *_NILADIC]


#: Calls whose first argument is a unit written as a name (``TIMESTAMPADD(HOUR, 1, t)``).
_UNIT_FIRST = frozenset({"TIMESTAMPADD", "TIMESTAMPDIFF"})

#: The time units of EXTRACT and FLOOR/CEIL(... TO unit).
_UNITS = frozenset(
    [
        "YEAR",
        "QUARTER",
        "MONTH",
        "WEEK",
        "DAY",
        "DOY",
        "DOW",
        "ISODOW",
        "ISOYEAR",
        "HOUR",
        "MINUTE",
        "SECOND",
        "MILLISECOND",
        "MICROSECOND",
        "NANOSECOND",
        "EPOCH",
        "DECADE",
        "CENTURY",
        "MILLENNIUM",
    ]
)

#: Niladic functions written without parentheses, read as names when no column has them.
_NILADIC = {"LOCALTIME": "localtime", "LOCALTIMESTAMP": "localtimestamp"}

#: sqlglot's nodes of the niladic SQL functions.
_CURRENT: dict[type[exp.Expr], str] = {
    exp.CurrentDate: "current_date",
    exp.CurrentTime: "current_time",
    exp.CurrentTimestamp: "current_timestamp",
}

_TEMPORAL_LITERALS = {"DATE": "DATE", "TIME": "TIME", "TIMESTAMP": "TIMESTAMP",
                      "TIMESTAMPLTZ": "TIMESTAMP_LTZ"}  # fmt: skip

_INTERVAL_UNITS = {
    "MILLISECOND": "milli",
    "SECOND": "second",
    "MINUTE": "minute",
    "HOUR": "hour",
    "DAY": "day",
}


class ExpressionConverter:
    """One statement's expressions; ``columns`` (when given) are the names in scope,
    ``functions`` looks up the user-defined functions registered by name, and ``scopes`` maps
    each table alias to its columns' names in the input (a join renames a clashing column of
    its right side: ``b.id`` is ``id0``)."""

    def __init__(
        self,
        errors: SqlErrors,
        columns: Sequence[str] | None,
        qualifiers: frozenset[str],
        functions: Callable[[str], Any] | None = None,
        scopes: Mapping[str, Mapping[str, str]] | None = None,
        over: Callable[[exp.Window], str] | None = None,
        windows: Callable[[exp.Expr], Expression | None] | None = None,
    ) -> None:
        self.errors = errors
        self.columns = columns
        self.qualifiers = qualifiers | frozenset(scopes or ())
        self.functions = functions
        self.scopes = scopes or {}
        self.over = over
        self.windows = windows

    def convert(self, node: exp.Expr) -> Expression:
        e = self.errors
        if self.windows is not None:
            # group window calls (TUMBLE(ts, ...), TUMBLE_START) and a window TVF's columns
            window_expression = self.windows(node)
            if window_expression is not None:
                return window_expression
        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if isinstance(node, exp.Column):
            return self._column(node)
        if isinstance(node, exp.Star):
            return Expression("star")
        if isinstance(node, exp.Literal):
            return _literal(node)
        if isinstance(node, exp.Boolean):
            return lit(bool(node.this))
        if isinstance(node, exp.Null):
            return lit(None)
        if isinstance(node, exp.Neg):
            return -self.convert(node.this)
        if type(node) in _BINARY:
            left, right = self.convert(node.this), self.convert(node.expression)
            return Expression("call", _BINARY[type(node)], (left, right))
        if isinstance(node, exp.DPipe):
            return concat(self.convert(node.this), self.convert(node.expression))
        if isinstance(node, exp.Not):
            return self._not(node.this)
        if isinstance(node, exp.Is):
            return self._is(node)
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise e.at(node, "IN with a subquery is not supported yet")
            values = [self.convert(v) for v in node.expressions]
            return self.convert(node.this).in_(*values)
        if isinstance(node, exp.Between):
            return self.convert(node.this).between(
                self.convert(node.args["low"]), self.convert(node.args["high"])
            )
        special = self._special(node)
        if special is not None:
            return special
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, FlinkCast):
            target = self._type(node, node.args["to"].this)
            inner = self.convert(node.this)
            return inner.try_cast(target) if node.args.get("safe") else inner.cast(target)
        if isinstance(node, exp.Interval):
            return self._interval(node)
        if isinstance(node, exp.Anonymous):
            return self._function(node)
        if isinstance(node, exp.Filter):
            return self._filtered(node)
        if isinstance(node, exp.Window):
            if self.over is None:
                raise e.at(node, "OVER windows are not supported here")
            return self.convert(node.this).over(col(self.over(node)))
        if isinstance(node, exp.Subquery | exp.Select):
            raise e.at(node, "Subqueries in expressions are not supported yet")
        raise e.at(node, f"Unsupported SQL expression: {node.sql()}")

    def _special(self, node: exp.Expr) -> Expression | None:
        """The built-in calls with syntax of their own (``EXTRACT(HOUR FROM t)``,
        ``x LIKE p ESCAPE e``, ``ARRAY[...]``, ``DATE '...'``...), else None."""
        c = self.convert
        if isinstance(node, exp.Like):
            like = _call("like", c(node.this), c(node.expression))
            return ~like if node.args.get("negate") else like
        if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like):
            inner = node.this
            like = _call("like", c(inner.this), c(inner.expression), c(node.expression))
            return ~like if inner.args.get("negate") else like
        if isinstance(node, exp.SimilarTo):
            return _call("similar", c(node.this), c(node.expression))
        if isinstance(node, exp.NullSafeNEQ | exp.NullSafeEQ):
            distinct = _call("is_distinct_from", c(node.this), c(node.expression))
            return distinct if isinstance(node, exp.NullSafeNEQ) else ~distinct
        if isinstance(node, exp.If):
            otherwise = node.args.get("false")
            return c(node.this).if_then_else(
                c(node.args["true"]), c(otherwise) if otherwise is not None else lit(None)
            )
        if isinstance(node, exp.Trim):
            position = str(node.args.get("position") or "").upper()
            chars = node.args.get("expression")
            if not position and chars is None:
                return c(node.this).trim
            chars_expr = c(chars) if chars is not None else lit(" ")
            return _call("trim_chars", lit(position or "BOTH"), chars_expr, c(node.this))
        if isinstance(node, exp.Extract):
            unit = node.this.name.upper()
            if unit not in _UNITS:
                raise self.errors.at(node, f"Unsupported time unit {unit} in EXTRACT")
            return _call("extract", lit(unit), c(node.expression))
        if isinstance(node, exp.StrPosition):
            return _call("position", c(node.args["substr"]), c(node.this))
        if isinstance(node, exp.Substring):
            rest = [node.args.get("start"), node.args.get("length")]
            return _call("substring", c(node.this), *(c(a) for a in rest if a is not None))
        if isinstance(node, exp.Overlay):
            rest = [node.args.get("from_"), node.args.get("for_")]
            return _call("overlay", c(node.this), c(node.expression), *(c(a) for a in rest if a))
        if isinstance(node, exp.Floor | exp.Ceil):
            name = "floor" if isinstance(node, exp.Floor) else "ceil"
            to = node.args.get("to")
            if to is not None:
                unit = to.name.upper()
                if unit not in _UNITS or unit in ("DOW", "DOY", "EPOCH"):
                    raise self.errors.at(node, f"Unsupported time unit {unit} in {name.upper()}")
                return _call(f"{name}_to", c(node.this), lit(unit))
            return _call(name, c(node.this))
        if type(node) in _CURRENT:
            return _call(_CURRENT[type(node)])
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
            return self._temporal_literal(node)
        if isinstance(node, exp.Array):
            return _call("array", *(c(v) for v in node.expressions))
        if isinstance(node, exp.Bracket):
            target = node.this
            if (
                isinstance(target, exp.Column)
                and target.name.upper() == "MAP"
                and not (target.table or self._is_column(target.name))
            ):
                if len(node.expressions) % 2:
                    raise self.errors.at(node, "MAP[...] takes pairs of keys and values")
                return _call("map", *(c(v) for v in node.expressions))
            if len(node.expressions) != 1:
                raise self.errors.at(node, "An index takes one value: a[1], m['key']")
            return _call("at", c(target), c(node.expressions[0]))
        if isinstance(node, exp.JSONObject):
            return self._json_object(node)
        if isinstance(node, FlinkJsonCall):
            return self._json_call(node)
        return None

    def _temporal_literal(self, node: exp.Cast) -> Expression:
        kind = _TEMPORAL_LITERALS.get(str(node.args["to"].this.value))
        text = str(node.this.this).strip()
        try:
            if kind == "DATE":
                return lit(datetime.date.fromisoformat(text), DataTypes.DATE(False))
            if kind == "TIME":
                value = datetime.time.fromisoformat(text)
                digits = len(text.partition(".")[2])
                return lit(value, DataTypes.TIME(digits, False))
            if kind is not None:
                stamp = datetime.datetime.fromisoformat(text)
                digits = len(text.partition(".")[2])
                make = DataTypes.TIMESTAMP_LTZ if kind == "TIMESTAMP_LTZ" else DataTypes.TIMESTAMP
                return lit(stamp, make(digits, False))
        except ValueError:
            raise self.errors.at(node, f"Illegal {kind} literal '{text}'") from None
        raise self.errors.at(node, f"Unsupported literal {node.sql()}")

    def _json_object(self, node: exp.JSONObject) -> Expression:
        on_null = str(node.args.get("null_handling") or "NULL ON NULL").split()[0].upper()
        args: list[Expression] = [lit(on_null)]
        for pair in node.expressions:
            if not isinstance(pair, exp.JSONKeyValue):
                raise self.errors.at(pair, "JSON_OBJECT takes KEY key VALUE value pairs")
            args += [self.convert(pair.this), self.convert(pair.expression)]
        return _call("json_object", *args)

    def _json_call(self, node: FlinkJsonCall) -> Expression:
        name = str(node.this)
        args = [self.convert(a) for a in node.expressions]
        clauses = " ".join(str(node.args["clauses"].this).upper().split())
        if name == "JSON_ARRAY":
            on_null = "NULL" if clauses.startswith("NULL ON NULL") else "ABSENT"
            if clauses and not clauses.endswith("ON NULL"):
                raise self.errors.at(node, f"Unsupported JSON_ARRAY clause: {clauses}")
            return _call("json_array", lit(on_null), *args)
        if len(args) != 2:
            raise self.errors.at(node, f"{name} takes a JSON value and a path")
        if name == "JSON_EXISTS":
            if clauses and clauses != "FALSE ON ERROR":
                raise self.errors.at(node, f"Unsupported JSON_EXISTS clause: {clauses}")
            return _call("json_exists", *args)
        if name == "JSON_QUERY":
            wrapper = "WITHOUT"
            if clauses.startswith("WITH ") and clauses.endswith("WRAPPER"):
                wrapper = "UNCONDITIONAL" if "UNCONDITIONAL" in clauses else "CONDITIONAL"
            elif clauses and not clauses.startswith("WITHOUT"):
                raise self.errors.at(node, f"Unsupported JSON_QUERY clause: {clauses}")
            return _call("json_query", *args, lit(wrapper))
        value = _call("json_value", *args)
        if clauses.startswith("RETURNING "):
            returning = clauses.removeprefix("RETURNING ").split(" NULL ON")[0]
            return (
                value.try_cast(self._type(node, returning))
                if "ON" not in returning
                else (self._unsupported_json(node, clauses))
            )
        if clauses:
            return self._unsupported_json(node, clauses)
        return value

    def _unsupported_json(self, node: exp.Expr, clauses: str) -> Expression:
        raise self.errors.at(node, f"Unsupported JSON_VALUE clause: {clauses}")

    def _column(self, node: exp.Column) -> Expression:
        name = node.name
        qualifier = node.table
        if not qualifier and name.upper() in _NILADIC and not self._is_column(name):
            return _call(_NILADIC[name.upper()])
        if qualifier and qualifier not in self.qualifiers:
            if node.args.get("db") is None and self._is_column(qualifier):
                # ``person.id`` with a ROW column ``person`` (a table alias wins, as Calcite's)
                return self._column(exp.column(qualifier)).get(name)
            raise self.errors.at(node, f"Table '{qualifier}' not found")
        scope = self.scopes.get(qualifier) if qualifier else None
        if scope is not None:
            if name not in scope:
                raise self.errors.at(node, f"Column '{name}' not found in table '{qualifier}'")
            return col(scope[name])
        owners = [q for q, names in self.scopes.items() if name in names]
        if len(owners) > 1:
            raise self.errors.at(node, f"Column '{name}' is ambiguous")
        if self.columns is not None and name not in self.columns:
            raise self.errors.at(node, f"Column '{name}' not found in any table")
        return col(name)

    def _is_column(self, name: str) -> bool:
        if self.columns is not None:
            return name in self.columns
        return any(name in names for names in self.scopes.values())

    def _not(self, inner: exp.Expr) -> Expression:
        if isinstance(inner, exp.Paren):
            return ~self.convert(inner.this)
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return self.convert(inner.this).is_not_null
        if isinstance(inner, exp.Between):
            return self.convert(inner.this).not_between(
                self.convert(inner.args["low"]), self.convert(inner.args["high"])
            )
        return ~self.convert(inner)

    def _is(self, node: exp.Is) -> Expression:
        target = node.expression
        inner = self.convert(node.this)
        if isinstance(target, exp.JSON):
            return _call("is_json", inner, lit(str(target.this or "VALUE").upper()))
        if isinstance(target, exp.Null):
            return inner.is_null
        if isinstance(target, exp.Boolean):
            return inner.is_true if target.this else inner.is_false
        raise self.errors.at(node, f"Unsupported IS: {node.sql()}")

    def _case(self, node: exp.Case) -> Expression:
        subject = node.this
        default = node.args.get("default")
        result = self.convert(default) if default is not None else lit(None)
        for branch in reversed(node.args.get("ifs") or []):
            condition = self.convert(branch.this)
            if subject is not None:
                condition = self.convert(subject) == condition
            result = condition.if_then_else(self.convert(branch.args["true"]), result)
        return result

    def _type(self, node: exp.Expr, text: str) -> DataType:
        try:
            return parse_type(text)
        except ValueError as error:
            raise self.errors.at(node, str(error)) from None

    def _interval(self, node: exp.Interval) -> Expression:
        unit = node.args.get("unit")
        unit_name = (unit.name if unit is not None else "").upper().rstrip("S")
        value = node.this
        text = value.name if isinstance(value, exp.Literal) else ""
        if unit_name not in _INTERVAL_UNITS or not text.strip().lstrip("-").isdigit():
            raise self.errors.at(
                node, f"Unsupported interval {node.sql()}: use INTERVAL 'n' SECOND|MINUTE|HOUR|DAY"
            )
        interval: Expression = getattr(lit(int(text)), _INTERVAL_UNITS[unit_name])
        return interval

    def _function(self, node: exp.Anonymous) -> Expression:
        name = str(node.this).upper()
        args_nodes = list(node.expressions)
        if name == "COUNT" and len(args_nodes) == 1 and isinstance(args_nodes[0], exp.Star):
            return Expression("call", "count", (Expression("star"),))
        if args_nodes and isinstance(args_nodes[0], exp.Distinct):
            return self._distinct(node, name, args_nodes)
        if name in _AGGREGATE_FUNCTIONS:
            arity, build = _AGGREGATE_FUNCTIONS[name]
            if len(args_nodes) not in arity:
                raise self.errors.at(
                    node, f"Invalid number of arguments to function '{name}': {len(args_nodes)}"
                )
            if name == "LISTAGG" and len(args_nodes) == 2:
                separator = args_nodes[1]
                if not isinstance(separator, exp.Literal) or not separator.is_string:
                    raise self.errors.at(separator, "LISTAGG's separator is a string literal")
            return build(*(self.convert(a) for a in args_nodes))
        for a in args_nodes:
            if isinstance(a, exp.Distinct):
                raise self.errors.at(node, f"{name}(DISTINCT ...) is not supported yet")
            if isinstance(a, TableArg):
                raise self.errors.at(node, f"Table function {name}(TABLE ...) is not supported")
        builtin = None if name in _FUNCTIONS else registry.by_sql_name(name)
        known = _FUNCTIONS.get(name)
        user = None
        if known is None and builtin is None and self.functions is not None:
            user = self.functions(name)
        if user is not None:
            if getattr(user, "kind", "") == "table":
                raise self.errors.at(
                    node,
                    f"Table function {node.this!s} is called in FROM ..., LATERAL TABLE(...),"
                    " not in an expression",
                )
            result: Expression = user(*(self.convert(a) for a in args_nodes))
            return result
        if builtin is not None:
            if not builtin.accepts(len(args_nodes)):
                raise self.errors.at(
                    node,
                    f"Invalid number of arguments to function '{name}': {len(args_nodes)}"
                    f" (it is {builtin.signature})",
                )
            if name in _UNIT_FIRST and isinstance(args_nodes[0], exp.Column):
                unit = lit(args_nodes[0].name.upper())
                return _call(builtin.name, unit, *(self.convert(a) for a in args_nodes[1:]))
            return _call(builtin.name, *(self.convert(a) for a in args_nodes))
        if known is None:
            raise self.errors.at(node, f"No match found for function signature {node.this!s}(...)")
        arity, build = known
        if len(args_nodes) not in arity:
            raise self.errors.at(
                node, f"Invalid number of arguments to function '{name}': {len(args_nodes)}"
            )
        return build(*(self.convert(a) for a in args_nodes))

    def _distinct(self, node: exp.Anonymous, name: str, args_nodes: list[exp.Expr]) -> Expression:
        """``AGG(DISTINCT a)``: the aggregate of ``a`` wrapped in ``distinct``."""
        inner = args_nodes[0].expressions
        if name not in _DISTINCT_AGGREGATES:
            raise self.errors.at(node, f"{name}(DISTINCT ...) is not supported")
        if len(inner) != 1 or (len(args_nodes) != 1 and name != "LISTAGG"):
            raise self.errors.at(node, f"{name}(DISTINCT ...) takes one column here")
        plain = exp.Anonymous(this=node.this, expressions=[inner[0], *args_nodes[1:]])
        for key in ("start", "end"):
            if key in node.meta:
                plain.meta[key] = node.meta[key]
        return self._function(plain).distinct

    def _filtered(self, node: exp.Filter) -> Expression:
        """``AGG(...) FILTER (WHERE condition)``."""
        aggregate = self.convert(node.this)
        if not _is_aggregate(aggregate):
            raise self.errors.at(node, "FILTER applies to an aggregate call only", "FILTER")
        where = node.expression
        condition = self.convert(where.this if isinstance(where, exp.Where) else where)
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


def _literal(node: exp.Literal) -> Expression:
    if node.is_string:
        return lit(node.this)
    text = str(node.this)
    if any(c in text for c in "eE"):
        return lit(float(text))
    if "." in text:
        return lit(decimal.Decimal(text))
    return lit(int(text))


def to_expression(
    node: exp.Expr, sql: str = "", columns: Sequence[str] | None = None
) -> Expression:
    """The DSL expression of a SQL expression tree (names checked against ``columns``)."""
    return ExpressionConverter(SqlErrors(sql), columns, frozenset()).convert(node)


def parse_expression(sql_text: str, columns: Sequence[str] | None = None) -> Expression:
    """The DSL expression of SQL text (``"a > 1"``), for ``filter`` strings, computed
    columns and watermarks; names are checked against ``columns`` when given."""
    return to_expression(parse_expression_tree(sql_text), sql_text, columns)
