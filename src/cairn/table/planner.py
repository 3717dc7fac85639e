"""Building the logical plan from the Table API's operations.

Invariant: pure — each function takes plan nodes and unresolved expressions, resolves the
expressions against the input's columns (``analysis.resolve``), checks what Flink's
validator checks (names, types, time attributes, changelog modes a node can take) and
returns a new plan node, raising ``ValidationError`` at the call that is wrong; nothing here
runs a job. ``Table`` (``table.py``) is the user-facing shell over these functions, and SQL
builds the same nodes through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.table.analysis import (
    AggCall,
    Columns,
    Rex,
    aggregate_output,
    conjunction,
    contains_aggregate,
    name_of,
    resolve,
    split_aggregates,
)
from cairn.table.changelog import changelog_mode
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression, col
from cairn.table.interval_bounds import rowtime_indexes, window_bounds
from cairn.table.join_keys import check_join_names, keyed_side, shift, split_keys, without_keys
from cairn.table.plan import (
    Aggregate,
    Calc,
    ChangelogMode,
    Correlate,
    IntervalJoin,
    Join,
    PlanNode,
    TableAggregate,
    Union,
)
from cairn.table.types import DataType, DataTypes, RowType
from cairn.table.udf import (
    AggregateFunction,
    TableAggregateFunction,
    TableFunction,
    UserDefinedFunctionWrapper,
    is_pandas,
)
from cairn.table.window_planner import window_join


def check_unique(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValidationError(f"Ambiguous column name: {n}")
        seen.add(n)


def project(node: PlanNode, items: Sequence[Expression]) -> PlanNode:
    """A ``Calc`` computing ``items`` over ``node`` (``*`` expands to every column)."""
    columns = node.columns
    expanded: list[Expression] = []
    for item in items:
        if item.kind == "star":
            expanded.extend(col(n) for n in columns.names)
        else:
            expanded.append(item)
    rexes: list[Rex] = []
    names: list[str] = []
    for position, item in enumerate(expanded):
        rexes.append(resolve(item, columns))
        names.append(name_of(item, position))
    check_unique(names)
    out = Columns.of(list(zip(names, [r.data_type for r in rexes], strict=True)))
    if names == columns.names and all(
        r.kind == "input" and r.index == i for i, r in enumerate(rexes)
    ):
        return node
    return Calc(columns=out, input=node, projections=tuple(rexes))


def aggregate(
    node: PlanNode, keys: Sequence[Expression], items: Sequence[Expression], final_only: bool
) -> PlanNode:
    """``GROUP BY keys`` then ``SELECT items`` (items may mix keys and aggregates)."""
    columns = node.columns
    key_indexes: list[int] = []
    for k in keys:
        if k.kind != "field":
            raise ValidationError(
                f"Group keys are columns here: add {k} as a column first (add_columns)"
            )
        key_indexes.append(columns.index(k.name))
    calls: list[AggCall] = []
    extra: list[tuple[Expression, Rex]] = []
    over_output: list[Expression] = []
    names: list[str] = []
    agg_index = 0
    for position, item in enumerate(items):
        if item.kind == "star":
            raise ValidationError("'*' cannot be selected from a grouped table")
        rewritten = split_aggregates(item, columns, calls, key_indexes, extra)
        is_agg = contains_aggregate(item.args[0] if item.kind == "alias" else item)
        names.append(name_of(item, position, agg_index if is_agg else None))
        if is_agg and item.kind != "alias":
            agg_index += 1
        over_output.append(rewritten)
    check_unique(names)
    agg_input = node
    if extra:
        identity = [Rex("input", t, index=i) for i, t in enumerate(columns.types)]
        pre_columns = Columns.of(
            [(n, t) for n, t in zip(columns.names, columns.types, strict=True)]
            + [(f"$e{i}", rex.data_type) for i, (_, rex) in enumerate(extra)]
        )
        agg_input = Calc(
            columns=pre_columns,
            input=node,
            projections=tuple(identity + [rex for _, rex in extra]),
        )
    if changelog_mode(agg_input) is not ChangelogMode.INSERT_ONLY:
        for call in calls:
            if call.wrapper is not None and not _retracts(call.wrapper.function):
                raise ValidationError(
                    f"Function {call.wrapper.name} does not implement retract(): it cannot"
                    " aggregate an updating input"
                )
    agg_columns = aggregate_output(agg_input.columns, key_indexes, calls)
    agg: PlanNode = Aggregate(agg_input, tuple(key_indexes), tuple(calls), agg_columns, final_only)
    rexes = [resolve(e, agg_columns) for e in over_output]
    out = Columns.of(list(zip(names, [r.data_type for r in rexes], strict=True)))
    identity_projection = len(rexes) == len(agg_columns) and all(
        r.kind == "input" and r.index == i for i, r in enumerate(rexes)
    )
    if identity_projection:
        # rename only: the aggregate's own columns take the select's names
        return Aggregate(agg_input, tuple(key_indexes), tuple(calls), out, final_only)
    return Calc(columns=out, input=agg, projections=tuple(rexes))


class PendingJoin(PlanNode):
    """``join(right)`` awaiting its ``where``: not a plan a job can run."""

    def __init__(self, left: PlanNode, right: PlanNode, join_type: str) -> None:
        pairs = [
            *zip(left.columns.names, left.columns.types, strict=True),
            *zip(right.columns.names, right.columns.types, strict=True),
        ]
        object.__setattr__(self, "columns", Columns.of(pairs))
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "join_type", join_type)

    left: PlanNode
    right: PlanNode
    join_type: str


def join(
    left: PlanNode, right: PlanNode, predicate: Expression, join_type: str = "INNER"
) -> PlanNode:
    """An equi-join (``join_type``: ``INNER``, ``LEFT``, ``RIGHT`` or ``FULL``): the
    predicate's ``left = right`` conjuncts are the keys (an expression key is computed below
    the join, ``join_keys``), the rest a condition on each joined pair. When the rest bounds
    the difference of two rowtime attributes from both sides
    (``a.ts BETWEEN b.ts - INTERVAL '1' HOUR AND b.ts``) it is an interval join."""
    pairs = _joined_columns(left, right, join_type)
    check_join_names([n for n, _ in pairs])
    rex = resolve(predicate, Columns.of(pairs))
    if rex.data_type.root != "BOOLEAN":
        raise ValidationError(f"A join predicate must be BOOLEAN, {predicate} is {rex.data_type}")
    keys = split_keys(rex, len(left.columns))
    if not keys.left:
        raise ValidationError(
            f"A join needs an equality between a column of each table, got {predicate}"
        )
    keyed_left, left_keys = keyed_side(left, keys.left, "$left_key")
    keyed_right, right_keys = keyed_side(right, keys.right, "$right_key")
    added_left = len(keyed_left.columns) - len(left.columns)
    rest = [shift(c, added_left, len(left.columns)) for c in keys.rest]
    combined = Columns.of(_joined_columns(keyed_left, keyed_right, join_type))
    joined = _join_node(combined, keyed_left, keyed_right, left_keys, right_keys, rest, join_type)
    if keyed_left is left and keyed_right is right:
        return joined
    return without_keys(
        joined, Columns.of(pairs), len(left.columns), len(keyed_left.columns), len(right.columns)
    )


def _joined_columns(left: PlanNode, right: PlanNode, join_type: str) -> list[tuple[str, DataType]]:
    """The joined row's columns; the side an outer join may pad with NULLs is nullable."""
    left_types, right_types = left.columns.types, right.columns.types
    if join_type in ("RIGHT", "FULL"):
        left_types = [t.nullable_() for t in left_types]
    if join_type in ("LEFT", "FULL"):
        right_types = [t.nullable_() for t in right_types]
    return [
        *zip(left.columns.names, left_types, strict=True),
        *zip(right.columns.names, right_types, strict=True),
    ]


def _join_node(
    combined: Columns,
    left: PlanNode,
    right: PlanNode,
    left_keys: tuple[int, ...],
    right_keys: tuple[int, ...],
    rest: list[Rex],
    join_type: str,
) -> PlanNode:
    """A regular join, or an interval join when ``rest`` bounds two rowtime attributes."""
    n_left = len(left.columns)
    bounds = window_bounds(rest, n_left, rowtime_indexes(left), rowtime_indexes(right))
    if bounds is not None:
        for side in (left, right):
            if changelog_mode(side) is not ChangelogMode.INSERT_ONLY:
                raise ValidationError(
                    "An interval join takes insert-only inputs: this one joins an updating"
                    " table (time attributes of an updating table are not supported)"
                )
        return IntervalJoin(
            columns=combined,
            left=left,
            right=right,
            left_keys=left_keys,
            right_keys=right_keys,
            condition=conjunction(bounds.rest),
            join_type=join_type,
            left_time=bounds.left_time,
            right_time=bounds.right_time,
            lower_ms=bounds.lower_ms,
            upper_ms=bounds.upper_ms,
        )
    condition = conjunction(rest)
    windowed = window_join(left, right, left_keys, right_keys, condition, join_type, combined)
    if windowed is not None:  # on both windows' start and end: Flink's WindowJoin
        return windowed
    return Join(
        columns=combined,
        left=left,
        right=right,
        left_keys=left_keys,
        right_keys=right_keys,
        condition=condition,
        join_type=join_type,
    )


def _key_indexes(columns: Columns, keys: Sequence[Expression]) -> tuple[int, ...]:
    out = []
    for k in keys:
        if k.kind != "field":
            raise ValidationError(f"Group keys are columns here: add {k} as a column first")
        out.append(columns.index(k.name))
    return tuple(out)


def _result_columns(wrapper: Any, aliases: Sequence[str]) -> list[tuple[str, DataType]]:
    """A function's result columns: a ROW's fields, or one column; named by the aliases."""
    result = wrapper.result_type
    if isinstance(result, RowType):
        pairs = list(zip(result.field_names(), result.field_types(), strict=True))
    else:
        pairs = [("f0", result)]
    if aliases:
        if len(aliases) != len(pairs):
            raise ValidationError(
                f"{wrapper.name} has {len(pairs)} result columns, aliased with {len(aliases)}"
            )
        pairs = [(a, t) for a, (_, t) in zip(aliases, pairs, strict=True)]
    return pairs


def _argument_indexes(
    columns: Columns, args: Sequence[Expression] | None
) -> tuple[int, ...] | None:
    if args is None:
        return None
    out = []
    for a in args:
        if a.kind != "field":
            raise ValidationError(f"Arguments are columns here: add {a} as a column first")
        out.append(columns.index(a.name))
    return tuple(out)


def row_aggregate(node: PlanNode, keys: Sequence[Expression], call: Any) -> PlanNode:
    """``group_by(keys).aggregate(f)``: the keys, then the fields of ``f``'s result."""
    wrapper, args, aliases = _unwrap_call(call, "aggregate")
    columns = node.columns
    key_indexes = _key_indexes(columns, keys)
    indexes = _argument_indexes(columns, args)
    if changelog_mode(node) is not ChangelogMode.INSERT_ONLY and not _retracts(wrapper.function):
        raise ValidationError(
            f"Function {wrapper.name} does not implement retract(): it cannot aggregate an"
            " updating input"
        )
    agg_call = AggCall(
        "udaf",
        indexes[0] if indexes else -1,
        wrapper.result_type,
        None,
        indexes or (),
        wrapper,
        tuple(columns.names) if indexes is None else (),
    )
    agg_columns = aggregate_output(columns, key_indexes, [agg_call])
    agg = Aggregate(node, key_indexes, (agg_call,), agg_columns, False)
    results = _result_columns(wrapper, aliases)
    flatten: list[Rex] = [
        Rex("input", agg_columns.columns[i].data_type, index=i) for i in range(len(key_indexes))
    ]
    whole = Rex("input", wrapper.result_type, index=len(key_indexes))
    if isinstance(wrapper.result_type, RowType):
        flatten += [
            Rex("call", t.nullable_(), op="get_field", operands=(whole,), value=j)
            for j, (_, t) in enumerate(results)
        ]
    else:
        flatten.append(whole)
    names = [columns.names[k] for k in key_indexes] + [n for n, _ in results]
    check_unique(names)
    out = Columns.of(list(zip(names, [r.data_type for r in flatten], strict=True)))
    return Calc(columns=out, input=agg, projections=tuple(flatten))


def flat_aggregate(node: PlanNode, keys: Sequence[Expression], call: Any) -> PlanNode:
    """``group_by(keys).flat_aggregate(f)``: the keys, then each row ``f`` emits."""
    wrapper, args, aliases = _unwrap_call(call, "table_aggregate")
    columns = node.columns
    key_indexes = _key_indexes(columns, keys)
    if changelog_mode(node) is not ChangelogMode.INSERT_ONLY and (
        type(wrapper.function).retract is TableAggregateFunction.retract
    ):
        raise ValidationError(
            f"Function {wrapper.name} does not implement retract(): it cannot aggregate an"
            " updating input"
        )
    pairs = [(columns.names[k], columns.types[k]) for k in key_indexes]
    pairs += _result_columns(wrapper, aliases)
    check_unique([n for n, _ in pairs])
    return TableAggregate(
        columns=Columns.of(pairs),
        input=node,
        keys=key_indexes,
        wrapper=wrapper,
        args=_argument_indexes(columns, args),
    )


def _unwrap_call(
    call: Any, kind: str
) -> tuple[Any, tuple[Expression, ...] | None, tuple[str, ...]]:
    """A function and its arguments from ``f(col('a'))``, ``f(...).alias('x')``, ``f`` or
    ``f.alias('x')`` (the last two: called with the whole row)."""
    aliases: tuple[str, ...] = ()
    if isinstance(call, Expression) and call.kind == "alias":
        aliases, call = call.names, call.args[0]
    if isinstance(call, Expression) and call.kind == "call" and call.name == "udf":
        wrapper, args = call.value, call.args
    elif getattr(call, "kind", None) in (
        "scalar",
        "table",
        "aggregate",
        "table_aggregate",
    ) and hasattr(call, "function"):
        wrapper, args = call, None
        aliases = aliases or call.aliases
    else:
        raise ValidationError(f"Expected a {kind} function call, got {call!r}")
    if wrapper.kind != kind:
        raise ValidationError(f"{wrapper.name} is a {wrapper.kind} function, not a {kind} function")
    return wrapper, args, aliases


def _table_function_call(call: Any) -> tuple[Any, tuple[Expression, ...] | None, tuple[str, ...]]:
    return _unwrap_call(call, "table")


def _scalar_function_call(call: Any) -> tuple[Any, tuple[Expression, ...] | None, tuple[str, ...]]:
    return _unwrap_call(call, "scalar")


def _single_row(wrapper: Any, row_type: Any) -> Any:
    """A scalar function seen as a table function yielding its one result."""
    return UserDefinedFunctionWrapper(
        _OneResult(wrapper.function),
        "table",
        row_type if isinstance(row_type, RowType) else _row_of(row_type),
        wrapper.name,
    )


def _row_of(t: Any) -> RowType:
    return DataTypes.ROW([DataTypes.FIELD("f0", t)])


class _OneResult(TableFunction):
    def __init__(self, function: Any) -> None:
        self.function = function

    def open(self, context: Any) -> None:
        self.function.open(context)

    def close(self) -> None:
        self.function.close()

    def eval(self, *args: Any) -> list[Any]:
        return [self.function.eval(*args)]


def _retracts(function: Any) -> bool:
    return type(function).retract is not AggregateFunction.retract


def correlate(node: PlanNode, call: Any, keep_input: bool, outer: bool) -> PlanNode:
    """A table function per row: ``join_lateral`` (``keep_input``), ``left_outer_join_lateral``
    (``outer``) or ``flat_map``."""
    wrapper, args, aliases = _table_function_call(call)
    rexes = None if args is None else tuple(resolve(a, node.columns) for a in args)
    row_type = wrapper.result_type
    names = list(aliases) if aliases else row_type.field_names()
    if len(names) != len(row_type.fields):
        raise ValidationError(
            f"Table function {wrapper.name} has {len(row_type.fields)} result columns,"
            f" aliased with {len(names)} names"
        )
    pairs = list(zip(names, row_type.field_types(), strict=True))
    if outer:
        pairs = [(n, t.nullable_()) for n, t in pairs]
    if keep_input:
        pairs = [*zip(node.columns.names, node.columns.types, strict=True), *pairs]
    check_unique([n for n, _ in pairs])
    return Correlate(
        columns=Columns.of(pairs),
        input=node,
        wrapper=wrapper,
        args=rexes,
        keep_input=keep_input,
        outer=outer,
    )


def map_rows(node: PlanNode, func: Any) -> PlanNode:
    """``map(f)``: one row per row from a scalar function returning a ``ROW``."""
    wrapper, args, aliases = _scalar_function_call(func)
    if is_pandas(wrapper):
        raise ValidationError(f"map with the pandas function {wrapper.name} is not supported")
    row_type = wrapper.result_type
    if isinstance(row_type, RowType):
        names, types = row_type.field_names(), row_type.field_types()
    else:
        names, types = ["f0"], [row_type]
    if aliases:
        names = list(aliases)
    return Correlate(
        columns=Columns.of(list(zip(names, types, strict=True))),
        input=node,
        wrapper=_single_row(wrapper, row_type),
        args=None if args is None else tuple(resolve(a, node.columns) for a in args),
        keep_input=False,
        outer=False,
    )


def union_all(left: PlanNode, right: PlanNode) -> PlanNode:
    """``UNION ALL``: the rows of both inputs; the columns keep the left's names."""
    left_columns, right_columns = left.columns, right.columns
    if len(left_columns) != len(right_columns) or any(
        (a.root, a.params) != (b.root, b.params)
        for a, b in zip(left_columns.types, right_columns.types, strict=True)
    ):
        raise ValidationError(
            "union_all two tables with incompatible types:"
            f" [{', '.join(map(str, left_columns.types))}] and"
            f" [{', '.join(map(str, right_columns.types))}]"
        )
    merged = Columns.of(
        [
            (name, a if a.nullable or not b.nullable else b)
            for name, a, b in zip(
                left_columns.names, left_columns.types, right_columns.types, strict=True
            )
        ]
    )
    return Union(merged, (left, right))
