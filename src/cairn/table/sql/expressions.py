"""SQL expression trees to the Table API's ``Expression`` trees.

Invariant: pure and schema-free, except that a column name is checked against the names in
scope when they are given, so an unknown column fails with its SQL position. The result is the
tree the Table API's DSL builds for the same expression (``a > 1`` is ``col('a') > 1``), so SQL
and the DSL resolve and compile through the same code. Calls by name (``SUM(a)``, ``UPPER(s)``,
a user's function) resolve in ``function_calls.py``.

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
from typing import Any

from sqlglot import exp

from cairn.table.expressions import Expression, col, concat, lit
from cairn.table.sql.dialect import FlinkCast, FlinkJsonCall
from cairn.table.sql.errors import SqlErrors
from cairn.table.sql.function_calls import NILADIC, FunctionCalls
from cairn.table.sql.parse import parse_expression_tree
from cairn.table.sql.type_names import parse_type
from cairn.table.types import DataType, DataTypes

__all__ = ["ExpressionConverter", "parse_expression", "to_expression"]


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
        self._calls = FunctionCalls(errors, self.convert, functions)

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
            return self._calls.call(node)
        if isinstance(node, exp.Filter):
            return self._calls.filtered(node)
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
        if not qualifier and name.upper() in NILADIC and not self._is_column(name):
            return _call(NILADIC[name.upper()])
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
