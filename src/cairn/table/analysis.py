"""Resolving expressions against a schema: names to column positions, calls to typed nodes.

Invariant: pure — no I/O, no job. ``resolve`` turns an unresolved ``Expression`` into a typed
``Rex`` tree over the input's columns, or raises ``ValidationError`` worded as Flink's
validator words it (``Cannot resolve field [x], input field list:[a, b].``). Every ``Rex``
carries its SQL type, so the code generator never guesses, and aggregate calls are taken out
of an expression (``split_aggregates``) before a row is ever computed.

>>> from cairn.table.expressions import col, lit
>>> from cairn.table.types import DataTypes
>>> schema = Columns.of([("a", DataTypes.INT()), ("b", DataTypes.BIGINT().not_null())])
>>> rex = resolve(col("a") + col("b") * 2, schema)
>>> str(rex.data_type)
'BIGINT'
>>> resolve(col("c"), schema)
Traceback (most recent call last):
...
cairn.table.errors.ValidationError: Cannot resolve field [c], input field list:[a, b].
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cairn.table.errors import ValidationError
from cairn.table.expressions import AGGREGATE_MODIFIERS, AGGREGATES, Expression
from cairn.table.functions import registry
from cairn.table.time_attributes import PROCTIME_TYPE, materialized
from cairn.table.type_merging import as_decimal, wider
from cairn.table.types import DataType, DataTypes, RowType, is_integral

__all__ = [
    "AggCall",
    "Column",
    "Columns",
    "Rex",
    "aggregate_type",
    "literal_type",
    "name_of",
    "resolve",
    "split_aggregates",
]


@dataclass(frozen=True)
class Column:
    """A column of a table: its name and SQL type."""

    name: str
    data_type: DataType


@dataclass(frozen=True)
class Columns:
    """The ordered columns of a table (a resolved schema)."""

    columns: tuple[Column, ...]

    @staticmethod
    def of(pairs: Sequence[tuple[str, DataType]]) -> Columns:
        return Columns(tuple(Column(n, t) for n, t in pairs))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def types(self) -> list[DataType]:
        return [c.data_type for c in self.columns]

    def index(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        raise ValidationError(
            f"Cannot resolve field [{name}], input field list:[{', '.join(self.names)}]."
        )

    def __len__(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class Rex:
    """A resolved expression: ``input`` (a column position), ``literal``, ``call``, ``cast``."""

    kind: str
    data_type: DataType
    index: int = -1
    value: Any = None
    op: str = ""
    operands: tuple[Rex, ...] = ()

    def __str__(self) -> str:
        if self.kind == "input":
            return f"${self.index}"
        if self.kind == "literal":
            return repr(self.value)
        if self.kind == "cast":
            return f"{self.op.upper()}({self.operands[0]} AS {self.data_type})"
        return f"{self.op}({', '.join(str(o) for o in self.operands)})"


def conjuncts(condition: Rex | None) -> list[Rex]:
    """A condition's top-level ``AND`` operands, in order (none for no condition)."""
    if condition is None:
        return []
    if condition.kind == "call" and condition.op == "and":
        return [c for o in condition.operands for c in conjuncts(o)]
    return [condition]


def conjunction(conditions: Sequence[Rex]) -> Rex | None:
    """The ``AND`` of ``conditions``, in order (``None`` for none): ``conjuncts``' inverse."""
    condition = None
    for c in conditions:
        condition = (
            c if condition is None else Rex("call", c.data_type, op="and", operands=(condition, c))
        )
    return condition


def input_references(rexes: Iterable[Rex]) -> Iterator[int]:
    """The input columns ``rexes`` read, once per reference, depth first."""
    for rex in rexes:
        if rex.kind == "input":
            yield rex.index
        else:
            yield from input_references(rex.operands)


@dataclass(frozen=True)
class AggCall:
    """An aggregate over a column of the aggregate's input (``arg`` -1: ``COUNT(*)``); a
    user-defined one (``function`` ``udaf``) names its ``wrapper`` and all its ``args``."""

    function: str
    arg: int
    data_type: DataType
    arg_type: DataType | None = None
    args: tuple[int, ...] = ()
    wrapper: Any = None
    row_names: tuple[str, ...] = ()  # row-based (``aggregate(f)``): the input row's names
    distinct: bool = False  # ``SUM(DISTINCT a)``: each distinct value once
    filter_arg: int = -1  # ``FILTER (WHERE c)``: the input's BOOLEAN column ``c``, else -1
    extra_args: tuple[Any, ...] = ()  # constant arguments (``LISTAGG``'s separator)

    def __str__(self) -> str:
        if self.wrapper is not None:
            text = f"{self.wrapper.name}({', '.join(f'${a}' for a in self.args)})"
        else:
            arg = "*" if self.arg < 0 else f"${self.arg}"
            text = f"{self.function.upper()}({'DISTINCT ' if self.distinct else ''}{arg})"
        return text if self.filter_arg < 0 else f"{text} FILTER ${self.filter_arg}"


_ARITHMETIC = {"plus", "minus", "times", "divide", "mod", "power"}
_COMPARISON = {
    "equals",
    "not_equals",
    "less_than",
    "less_than_or_equal",
    "greater_than",
    "greater_than_or_equal",
}
_LOGIC = {"and", "or", "not"}
_PREDICATES = {"is_null", "is_not_null", "is_true", "is_false"}


def literal_type(value: Any) -> DataType:
    """A literal's type, as Flink types SQL literals (``1`` INT, ``'a'`` STRING) NOT NULL."""
    if value is None:
        return DataTypes.NULL()
    if isinstance(value, bool):
        return DataTypes.BOOLEAN(False)
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return DataTypes.INT(False)
        return DataTypes.BIGINT(False)
    if isinstance(value, float):
        return DataTypes.DOUBLE(False)
    if isinstance(value, str):
        return DataTypes.STRING(False)
    if isinstance(value, decimal.Decimal):
        digits = value.as_tuple()
        scale = max(0, -int(digits.exponent))
        return DataTypes.DECIMAL(max(len(digits.digits), scale, 1), scale, False)
    if isinstance(value, datetime.datetime):
        return DataTypes.TIMESTAMP(6, False)
    if isinstance(value, datetime.date):
        return DataTypes.DATE(False)
    raise ValidationError(f"Unsupported literal {value!r} of type {type(value).__name__}")


def _decimal_arithmetic(name: str, a: DataType, b: DataType) -> DataType | None:
    """Flink's DECIMAL result of ``a <op> b`` when one side is DECIMAL and the other exact
    (``LogicalTypeMerging``): ``INT * DECIMAL(2, 1)`` is DECIMAL(13, 1).

    >>> str(_decimal_arithmetic("times", DataTypes.INT(), DataTypes.DECIMAL(2, 1)))
    'DECIMAL(13, 1)'
    """
    da, db = as_decimal(a), as_decimal(b)
    if "DECIMAL" not in (a.root, b.root) or da is None or db is None:
        return None
    (p1, s1), (p2, s2) = da, db
    if name == "times":
        scale, precision = s1 + s2, p1 + p2 + 1
    elif name == "divide":
        scale = max(6, s1 + p2 + 1)
        precision = p1 - s1 + s2 + scale
    elif name == "mod":
        scale = max(s1, s2)
        precision = min(p1 - s1, p2 - s2) + scale
    else:  # plus, minus
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    if precision > 38:
        scale = max(38 - (precision - scale), min(scale, 6))
        precision = 38
    return DataTypes.DECIMAL(precision, scale)


def _nullable(*types: DataType) -> bool:
    return any(t.nullable for t in types)


def _with_null(t: DataType, nullable: bool) -> DataType:
    return t.nullable_() if nullable else t.not_null()


def resolve(expr: Expression, columns: Columns) -> Rex:
    """The typed tree of ``expr`` over ``columns``; aggregates are refused here (a caller
    that allows them takes them out first with ``split_aggregates``)."""
    if expr.kind == "field":
        i = columns.index(expr.name)
        return Rex("input", columns.columns[i].data_type, index=i)
    if expr.kind == "literal":
        t = expr.data_type or literal_type(expr.value)
        return Rex("literal", t, value=expr.value)
    if expr.kind == "alias":
        return resolve(expr.args[0], columns)
    if expr.kind == "cast":
        inner = resolve(expr.args[0], columns)
        assert expr.data_type is not None
        nullable = inner.data_type.nullable or expr.name == "try"
        return Rex("cast", _with_null(expr.data_type, nullable), op=expr.name, operands=(inner,))
    if expr.kind == "star":
        raise ValidationError("'*' is only allowed alone in a select list")
    if expr.kind != "call":
        raise ValidationError(f"Unsupported expression {expr}")
    if is_aggregate_call(expr):
        raise ValidationError(
            f"Aggregate {expr} is not allowed here: aggregates belong to a group_by(...).select"
            " or to a select over the whole table"
        )
    ops = tuple(resolve(a, columns) for a in expr.args)
    if expr.name == "get":
        return _get_field(ops, expr)
    if expr.name == "typeof":  # known when planned: the operand's type, as text
        if len(ops) != 1:
            raise ValidationError(f"TYPEOF takes one argument, got {expr}")
        return Rex("literal", DataTypes.STRING(False), value=str(ops[0].data_type))
    if expr.name == "udf":
        wrapper = expr.value
        if wrapper.kind == "table":
            raise ValidationError(
                f"Table function {wrapper.name} can only be used in join_lateral,"
                " left_outer_join_lateral or flat_map"
            )
        _check_udf_inputs(wrapper, ops)
        return Rex("call", wrapper.result_type, op="udf", operands=ops, value=wrapper)
    return Rex("call", _call_type(expr.name, ops, expr), op=expr.name, operands=ops)


def is_aggregate_call(expr: Expression) -> bool:
    """A built-in aggregate or a call of a user-defined aggregate function."""
    if expr.kind != "call":
        return False
    if expr.name == "udf":
        return bool(expr.value.kind == "aggregate")
    if expr.name in AGGREGATE_MODIFIERS:
        return bool(expr.args) and is_aggregate_call(expr.args[0])
    return expr.name in AGGREGATES


def _check_udf_inputs(wrapper: Any, ops: Sequence[Rex]) -> None:
    declared = wrapper.input_types
    if declared is None:
        return
    if len(declared) != len(ops):
        raise ValidationError(
            f"Function {wrapper.name} takes {len(declared)} arguments"
            f" ({', '.join(map(str, declared))}), got {len(ops)}"
        )


def _get_field(ops: tuple[Rex, ...], expr: Expression) -> Rex:
    """``row.get(name)``: the field's position and type (nullable when the row is)."""
    row, key = ops
    row_type = row.data_type
    if not isinstance(row_type, RowType) or key.kind != "literal":
        raise ValidationError(f"Cannot access a field of <{row_type}> in {expr}")
    names = row_type.field_names()
    index = key.value if isinstance(key.value, int) else None
    if isinstance(key.value, str) and key.value in names:
        index = names.index(key.value)
    if index is None or not 0 <= index < len(names):
        raise ValidationError(
            f"Field [{key.value}] not found in <{row.data_type}>, fields: [{', '.join(names)}]"
        )
    field_type = row_type.field_types()[index]
    nullable = field_type.nullable or row_type.nullable
    return Rex(
        "call", _with_null(field_type, nullable), op="get_field", operands=(row,), value=index
    )


def _call_type(name: str, ops: tuple[Rex, ...], expr: Expression) -> DataType:
    types = [o.data_type for o in ops]
    nullable = _nullable(*types)
    if name in _ARITHMETIC:
        a, b = types
        if a.root in ("TIMESTAMP", "TIMESTAMP_LTZ", "DATE") and b.root == "INTERVAL":
            return _with_null(materialized(a), nullable)  # no time attribute any more
        if not (a.is_numeric or a.root == "NULL") or not (b.is_numeric or b.root == "NULL"):
            raise ValidationError(
                f"Cannot apply '{name}' to arguments of type <{a}> and <{b}> in {expr}"
            )
        if name == "power":
            return DataTypes.DOUBLE(nullable)
        decimal_type = _decimal_arithmetic(name, a, b)
        if decimal_type is not None:
            return _with_null(decimal_type, nullable)
        return _with_null(wider(a, b), nullable)
    if name == "minus_prefix":
        return types[0]
    if name == "proctime":
        return PROCTIME_TYPE
    if name in _COMPARISON:
        a, b = types
        comparable = (
            (a.is_numeric and b.is_numeric)
            or (a.is_string and b.is_string)
            or a.root == b.root
            or "NULL" in (a.root, b.root)
        )
        if not comparable:
            raise ValidationError(
                f"Cannot apply '{name}' to arguments of type <{a}> and <{b}> in {expr}"
            )
        return DataTypes.BOOLEAN(nullable)
    if name in _LOGIC:
        for t in types:
            if t.root not in ("BOOLEAN", "NULL"):
                raise ValidationError(f"'{name}' expects BOOLEAN operands, got <{t}> in {expr}")
        return DataTypes.BOOLEAN(nullable)
    if name in _PREDICATES:
        return DataTypes.BOOLEAN(False)
    if name in ("in", "between", "not_between", "like"):
        return DataTypes.BOOLEAN(nullable)
    if name == "if":
        return _with_null(wider(types[1], types[2]), types[1].nullable or types[2].nullable)
    if name == "coalesce":
        common = types[0]
        for t in types[1:]:
            common = wider(common, t)
        return _with_null(common, all(t.nullable for t in types))
    builtin = registry.lookup(name)
    if builtin is None:
        raise ValidationError(
            f"No match found for function signature {name}({', '.join(map(str, types))})"
        )
    if not builtin.accepts(len(types)):
        raise ValidationError(
            f"Invalid number of arguments to function '{builtin.signature}': {len(types)} in {expr}"
        )
    problem = builtin.check_arguments(types)
    if problem is not None:
        raise ValidationError(f"Cannot apply '{builtin.signature}': {problem} in {expr}")
    for position in builtin.literal_arguments:
        if position < len(ops) and ops[position].kind != "literal":
            raise ValidationError(
                f"Argument {position + 1} of {name.upper()} must be a literal in {expr}"
            )
    return builtin.result_type(types)


def aggregate_type(function: str, arg_type: DataType | None) -> DataType:
    """The result type of an aggregate, as Flink's built-in aggregate functions type it."""
    if function in ("count", "count_star", "count_distinct"):
        return DataTypes.BIGINT(False)
    assert arg_type is not None
    if not arg_type.is_numeric and function in ("sum", "sum0", "avg", *_DEVIATIONS):
        raise ValidationError(f"{function.upper()} requires a numeric argument, got <{arg_type}>")
    if function == "listagg":
        if not arg_type.is_string:
            raise ValidationError(f"LISTAGG requires a string argument, got <{arg_type}>")
        return DataTypes.STRING(True)
    if function in ("sum", "sum0"):
        if arg_type.root == "DECIMAL":
            return DataTypes.DECIMAL(38, arg_type.params[1], function == "sum")
        return _with_null(arg_type, function == "sum")
    if function == "avg":
        return _with_null(arg_type, True)
    return _with_null(arg_type, True)  # min, max


_DEVIATIONS = ("stddev_pop", "stddev_samp", "var_pop", "var_samp")


def name_of(expr: Expression, position: int, aggregate_index: int | None = None) -> str:
    """The column name Flink gives a select item: its alias, a field's own name, ``EXPR$n``
    for the n-th aggregate, ``_c<position>`` for another expression."""
    if expr.kind == "alias":
        return expr.names[0]
    if expr.kind == "field":
        return expr.name
    if aggregate_index is not None:
        return f"EXPR${aggregate_index}"
    return f"_c{position}"


def contains_aggregate(expr: Expression) -> bool:
    if is_aggregate_call(expr):
        return True
    return any(contains_aggregate(a) for a in expr.args)


def split_aggregates(
    expr: Expression,
    columns: Columns,
    calls: list[AggCall],
    keys: Sequence[int],
    extra: list[tuple[Expression, Rex]] | None = None,
) -> Expression:
    """``expr`` over the aggregate's output (the group keys, then one column per call),
    appending the aggregate calls it makes to ``calls``.

    The aggregate's output columns are named ``$k<i>`` for key ``i`` and ``$a<j>`` for call
    ``j``, so the returned expression resolves against ``aggregate_output``'s columns. An
    argument that is not a column (``col('a').cast(...).max``) is appended to ``extra``: the
    aggregate's input is then the input's columns followed by those computed ones.
    """
    if expr.kind == "call" and expr.name in AGGREGATE_MODIFIERS and is_aggregate_call(expr):
        return _modified_call(expr, columns, calls, keys, extra)
    if is_aggregate_call(expr) and expr.name == "udf":
        indexes = tuple(_argument_index(a, columns, extra, expr) for a in expr.args)
        types = [_argument_type(i, columns, extra) for i in indexes]
        wrapper = expr.value
        _check_udf_inputs(wrapper, [Rex("literal", t) for t in types])
        call = AggCall(
            "udaf",
            indexes[0] if indexes else -1,
            wrapper.result_type,
            types[0] if types else None,
            indexes,
            wrapper,
        )
        calls.append(call)
        return Expression("field", f"$a{len(calls) - 1}")
    if expr.kind == "call" and expr.name in AGGREGATES:
        fn = expr.name
        counts_rows = (
            not expr.args
            or expr.args[0].kind == "star"
            or (expr.args[0].kind == "literal" and expr.args[0].value is not None)
        )  # COUNT(*), COUNT(1): every row
        if fn == "count" and counts_rows:
            call = AggCall("count_star", -1, DataTypes.BIGINT(False))
        else:
            constants: tuple[Any, ...] = ()
            if fn == "listagg" and len(expr.args) == 2:
                separator = expr.args[1]
                if separator.kind != "literal" or not isinstance(separator.value, str):
                    raise ValidationError(f"LISTAGG's separator is a string literal, in {expr}")
                constants = (separator.value,)
            elif len(expr.args) != 1:
                raise ValidationError(f"{fn.upper()} takes one argument, got {expr}")
            i = _argument_index(expr.args[0], columns, extra, expr)
            t = _argument_type(i, columns, extra)
            if fn == "count" and t.nullable is False:
                fn = "count_star"
            call = AggCall(fn, i, aggregate_type(fn, t), t, extra_args=constants)
        for j, existing in enumerate(calls):
            if existing == call:
                return Expression("field", f"$a{j}")
        calls.append(call)
        return Expression("field", f"$a{len(calls) - 1}")
    if expr.kind == "field":
        i = columns.index(expr.name)
        if i not in keys:
            raise ValidationError(
                f"Expression '{expr.name}' is not being grouped: select a grouping column"
                f" ({', '.join(columns.names[k] for k in keys) or 'none'}) or an aggregate"
            )
        return Expression("field", f"$k{list(keys).index(i)}")
    if not expr.args:
        return expr
    return Expression(
        expr.kind,
        expr.name,
        tuple(split_aggregates(a, columns, calls, keys, extra) for a in expr.args),
        expr.value,
        expr.data_type,
        expr.names,
    )


def _modified_call(
    expr: Expression,
    columns: Columns,
    calls: list[AggCall],
    keys: Sequence[int],
    extra: list[tuple[Expression, Rex]] | None,
) -> Expression:
    """``distinct(agg)`` / ``agg_filter(agg, condition)`` (nested in any order): the call of
    ``agg`` with ``distinct`` set and its ``filter_arg`` the condition's input column."""
    distinct = False
    condition: Expression | None = None
    inner = expr
    while inner.kind == "call" and inner.name in AGGREGATE_MODIFIERS:
        if inner.name == "distinct":
            distinct = True
        elif condition is not None:
            raise ValidationError(f"An aggregate takes one FILTER, in {expr}")
        else:
            condition = inner.args[1]
        inner = inner.args[0]
    filter_arg = -1
    if condition is not None:
        filter_arg = _argument_index(condition, columns, extra, expr)
        filter_type = _argument_type(filter_arg, columns, extra)
        if filter_type.root != "BOOLEAN":
            raise ValidationError(f"FILTER takes a BOOLEAN condition, got <{filter_type}>")
    own: list[AggCall] = []
    split_aggregates(inner, columns, own, keys, extra)
    call = own[0]
    if distinct:
        if call.function == "udaf":
            raise ValidationError(f"DISTINCT of a user-defined aggregate is not supported: {expr}")
        if call.function == "count_star":
            if call.arg < 0:
                raise ValidationError(f"COUNT(DISTINCT ...) takes a column, in {expr}")
            call = replace(call, function="count")
        if call.function == "count":  # the map of distinct values already is its state
            call = replace(call, function="count_distinct")
        elif call.function != "count_distinct":
            call = replace(call, distinct=True)
    call = replace(call, filter_arg=filter_arg)
    for j, existing in enumerate(calls):
        if existing == call:
            return Expression("field", f"$a{j}")
    calls.append(call)
    return Expression("field", f"$a{len(calls) - 1}")


def aggregate_output(columns: Columns, keys: Sequence[int], calls: Sequence[AggCall]) -> Columns:
    """The columns of an aggregate: its keys (``$k<i>``), then its calls (``$a<j>``)."""
    pairs = [(f"$k{i}", columns.columns[k].data_type) for i, k in enumerate(keys)]
    pairs += [(f"$a{j}", c.data_type) for j, c in enumerate(calls)]
    return Columns.of(pairs)


def is_integral_type(t: DataType) -> bool:
    return is_integral(t)


def _argument_index(
    arg: Expression,
    columns: Columns,
    extra: list[tuple[Expression, Rex]] | None,
    call: Expression,
) -> int:
    """The position of an aggregate's argument in the aggregate's input: a column, or one
    computed into ``extra`` (after the input's columns)."""
    if contains_aggregate(arg):
        raise ValidationError(f"Aggregate calls cannot be nested: {call}")
    if arg.kind == "field":
        return columns.index(arg.name)
    if extra is None:
        raise ValidationError(f"Aggregate arguments must be columns here: {call}")
    for k, (known, _) in enumerate(extra):
        if str(known) == str(arg):
            return len(columns) + k
    extra.append((arg, resolve(arg, columns)))
    return len(columns) + len(extra) - 1


def _argument_type(
    index: int, columns: Columns, extra: list[tuple[Expression, Rex]] | None
) -> DataType:
    if index < len(columns):
        return columns.columns[index].data_type
    assert extra is not None
    return extra[index - len(columns)][1].data_type
