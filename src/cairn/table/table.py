"""``Table`` and ``GroupedTable``: PyFlink's relational operations, building a logical plan.

Invariant: a ``Table`` is an immutable handle on a plan node and its environment; every
operation validates its expressions against the table's columns at once (an unknown column
fails in the call that names it, never at run time) and returns a new ``Table``. Nothing runs
until ``execute()`` / ``execute_insert()``.

>>> from cairn.table import EnvironmentSettings, TableEnvironment
>>> from cairn.table.expressions import col
>>> t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
>>> t = t_env.from_elements([(1, "a"), (2, "b")], ["id", "name"])
>>> t.filter(col("id") > 1).select(col("name"), (col("id") * 10).alias("x")).print_schema()
(
  `name` STRING,
  `x` BIGINT
)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from cairn.table.analysis import (
    AggCall,
    Columns,
    Rex,
    aggregate_output,
    contains_aggregate,
    is_aggregate_call,
    name_of,
    resolve,
    split_aggregates,
)
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression, col, expressions
from cairn.table.plan import (
    Aggregate,
    Calc,
    ChangelogMode,
    Correlate,
    Join,
    Limit,
    OverAggregate,
    PlanNode,
    Union,
    WindowAggregate,
    changelog_mode,
    explain,
)
from cairn.table.schema import schema_text
from cairn.table.sql.expressions import parse_expression
from cairn.table.types import DataTypes, RowType
from cairn.table.udf import AggregateFunction, TableFunction, UserDefinedFunctionWrapper
from cairn.table.window import GroupWindow, OverWindow

if TYPE_CHECKING:
    from cairn.table.result import TableResult

__all__ = [
    "GroupWindowedTable",
    "GroupedTable",
    "OverWindowedTable",
    "Table",
    "TableContext",
    "WindowGroupedTable",
]


class TableContext(Protocol):
    """What a table asks of its environment (``TableEnvironment`` implements it)."""

    @property
    def batch_mode(self) -> bool:
        """Batch mode: aggregates emit final results only."""
        ...

    def register_unnamed(self, table: Table) -> str:
        """Register ``table`` as a view under a fresh name, and return the name."""
        ...

    def execute_query(self, table: Table) -> TableResult: ...

    def execute_insert(self, table: Table, table_path: str) -> TableResult: ...


def _check_unique(names: Sequence[str]) -> None:
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
    _check_unique(names)
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
    _check_unique(names)
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


class _PendingJoin(PlanNode):
    """``join(right)`` awaiting its ``where``: not a plan a job can run."""

    def __init__(self, left: PlanNode, right: PlanNode, outer: bool) -> None:
        pairs = [
            *zip(left.columns.names, left.columns.types, strict=True),
            *zip(right.columns.names, right.columns.types, strict=True),
        ]
        object.__setattr__(self, "columns", Columns.of(pairs))
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "outer", outer)

    left: PlanNode
    right: PlanNode
    outer: bool


_PROPERTIES = {"window_start": "start", "window_end": "end", "window_rowtime": "rowtime"}


def _with_properties(expr: Expression, alias: str, wanted: list[str]) -> Expression:
    """``expr`` with ``w.start``/``w.end``/``w.rowtime`` replaced by fields ``$p<name>``."""
    if expr.kind == "call" and expr.name in _PROPERTIES:
        target = expr.args[0] if expr.args else None
        if target is None or target.kind != "field" or target.name != alias:
            raise ValidationError(f"Window property {expr} must be of the window '{alias}'")
        prop = _PROPERTIES[expr.name]
        if prop not in wanted:
            wanted.append(prop)
        return Expression("field", f"$p{prop}")
    if expr.kind == "call" and expr.name == "window_proctime":
        raise ValidationError("Window proctime is not built yet: windows run on event time")
    if expr.kind == "field" and expr.name == alias:
        raise ValidationError(
            f"The window '{alias}' itself cannot be selected; select {alias}.start, .end or"
            " .rowtime"
        )
    if not expr.args:
        return expr
    return Expression(
        expr.kind,
        expr.name,
        tuple(_with_properties(a, alias, wanted) for a in expr.args),
        expr.value,
        expr.data_type,
        expr.names,
    )


def window_aggregate(
    node: PlanNode, window: GroupWindow, keys: Sequence[Expression], items: Sequence[Expression]
) -> PlanNode:
    """``window(w).group_by(keys, w).select(items)``: one insert-only row per key and window."""
    window.check()
    columns = node.columns
    time_index = columns.index(window.time_field)
    time_type = columns.columns[time_index].data_type
    if time_type.root not in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        raise ValidationError(
            f"A group window expects a time attribute for grouping in a stream environment;"
            f" '{window.time_field}' is {time_type}"
        )
    if changelog_mode(node) is not ChangelogMode.INSERT_ONLY:
        raise ValidationError("A group window aggregate over an updating table is not built yet")
    key_exprs = [k for k in keys if not (k.kind == "field" and k.name == window.alias_name)]
    if len(key_exprs) == len(keys):
        raise ValidationError(
            f"The window alias '{window.alias_name}' must be one of the group_by fields"
        )
    key_indexes = []
    for k in key_exprs:
        if k.kind != "field":
            raise ValidationError(f"Group keys are columns here: add {k} as a column first")
        key_indexes.append(columns.index(k.name))
    wanted: list[str] = []
    rewritten = [_with_properties(e, window.alias_name, wanted) for e in items]
    prop_type = DataTypes.TIMESTAMP(3, False)
    extended = Columns.of(
        [*zip(columns.names, columns.types, strict=True), *((f"$p{p}", prop_type) for p in wanted)]
    )
    prop_indexes = [len(columns) + i for i in range(len(wanted))]
    calls: list[AggCall] = []
    over_output: list[Expression] = []
    names: list[str] = []
    agg_index = 0
    for position, (item, new) in enumerate(zip(items, rewritten, strict=True)):
        over_output.append(split_aggregates(new, extended, calls, [*key_indexes, *prop_indexes]))
        is_agg = contains_aggregate(item.args[0] if item.kind == "alias" else item)
        name = name_of(item, position, agg_index if is_agg else None)
        if not is_agg and item.kind == "call" and item.name in _PROPERTIES:
            name = f"EXPR${agg_index}"
        names.append(name)
        if (is_agg or item.name in _PROPERTIES) and item.kind != "alias":
            agg_index += 1
    _check_unique(names)
    agg_columns = aggregate_output(extended, [*key_indexes, *prop_indexes], calls)
    agg = WindowAggregate(
        columns=agg_columns,
        input=node,
        keys=tuple(key_indexes),
        window=window,
        time_index=time_index,
        calls=tuple(calls),
        properties=tuple(wanted),
    )
    rexes = [resolve(e, agg_columns) for e in over_output]
    out = Columns.of(list(zip(names, [r.data_type for r in rexes], strict=True)))
    return Calc(columns=out, input=agg, projections=tuple(rexes))


def _conjuncts(rex: Rex) -> list[Rex]:
    if rex.kind == "call" and rex.op == "and":
        return [c for o in rex.operands for c in _conjuncts(o)]
    return [rex]


def join(left: PlanNode, right: PlanNode, predicate: Expression, outer: bool) -> PlanNode:
    """An equi-join: the predicate's ``left = right`` conjuncts are the keys, the rest a
    condition on each joined pair."""
    right_types = right.columns.types
    if outer:
        right_types = [t.nullable_() for t in right_types]
    pairs = [
        *zip(left.columns.names, left.columns.types, strict=True),
        *zip(right.columns.names, right_types, strict=True),
    ]
    names = [n for n, _ in pairs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValidationError(
            f"Join tables have duplicate column names: {', '.join(duplicates)}; rename them"
            " first (rename_columns)"
        )
    combined = Columns.of(pairs)
    rex = resolve(predicate, combined)
    if rex.data_type.root != "BOOLEAN":
        raise ValidationError(f"A join predicate must be BOOLEAN, {predicate} is {rex.data_type}")
    n_left = len(left.columns)
    left_keys: list[int] = []
    right_keys: list[int] = []
    rest: list[Rex] = []
    for c in _conjuncts(rex):
        ops = c.operands
        if c.op == "equals" and all(o.kind == "input" for o in ops):
            a, b = sorted(o.index for o in ops)
            if a < n_left <= b:
                left_keys.append(a)
                right_keys.append(b - n_left)
                continue
        rest.append(c)
    if not left_keys:
        raise ValidationError(
            f"A join needs an equality between a column of each table, got {predicate}"
        )
    condition = None
    for c in rest:
        condition = (
            c if condition is None else Rex("call", c.data_type, op="and", operands=(condition, c))
        )
    return Join(
        columns=combined,
        left=left,
        right=right,
        left_keys=tuple(left_keys),
        right_keys=tuple(right_keys),
        condition=condition,
        outer=outer,
    )


def _strip_over(expr: Expression, aliases: set[str], inside: bool = False) -> Expression:
    """``agg.over(col('w'))`` → ``agg``; an aggregate outside ``over`` is refused."""
    if expr.kind == "call" and expr.name == "over":
        target = expr.args[1]
        if target.kind != "field" or target.name not in aliases:
            raise ValidationError(f"Over window '{target}' is not defined; over_window(...) it")
        return _strip_over(expr.args[0], aliases, inside=True)
    if not inside and is_aggregate_call(expr):
        raise ValidationError(f"Aggregate {expr} needs an over window here: .over(col('w'))")
    if not expr.args:
        return expr
    return Expression(
        expr.kind,
        expr.name,
        tuple(_strip_over(a, aliases, inside) for a in expr.args),
        expr.value,
        expr.data_type,
        expr.names,
    )


def over_aggregate(node: PlanNode, window: OverWindow, items: Sequence[Expression]) -> PlanNode:
    """``over_window(w).select(items)``: each row with its aggregates over ``w``."""
    if not window.alias_name:
        raise ValidationError("An over window needs an alias: .alias('w')")
    if changelog_mode(node) is not ChangelogMode.INSERT_ONLY:
        raise ValidationError("An over window over an updating table is not built yet")
    columns = node.columns
    time_index = columns.index(window.order_by)
    time_type = columns.columns[time_index].data_type
    if time_type.root not in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        raise ValidationError(
            f"An over window is ordered by a time attribute; '{window.order_by}' is {time_type}"
        )
    keys = tuple(columns.index(k) for k in window.partition_by)
    every = list(range(len(columns)))
    calls: list[AggCall] = []
    over_output: list[Expression] = []
    names: list[str] = []
    agg_index = 0
    for position, item in enumerate(items):
        stripped = _strip_over(item, {window.alias_name})
        over_output.append(split_aggregates(stripped, columns, calls, every))
        is_agg = contains_aggregate(stripped.args[0] if stripped.kind == "alias" else stripped)
        names.append(name_of(item, position, agg_index if is_agg else None))
        if is_agg and item.kind != "alias":
            agg_index += 1
    _check_unique(names)
    agg_columns = aggregate_output(columns, every, calls)
    agg = OverAggregate(
        columns=agg_columns,
        input=node,
        keys=keys,
        window=window,
        time_index=time_index,
        calls=tuple(calls),
    )
    rexes = [resolve(e, agg_columns) for e in over_output]
    out = Columns.of(list(zip(names, [r.data_type for r in rexes], strict=True)))
    return Calc(columns=out, input=agg, projections=tuple(rexes))


class Table:
    """A table of the Table API (PyFlink's ``pyflink.table.Table``)."""

    def __init__(self, node: PlanNode, t_env: TableContext) -> None:
        self._node = node
        self._t_env = t_env

    # -- plumbing ----------------------------------------------------------------------------

    @property
    def plan(self) -> PlanNode:
        return self._node

    @property
    def context(self) -> TableContext:
        return self._t_env

    def _new(self, node: PlanNode) -> Table:
        return Table(node, self._t_env)

    def __getattr__(self, name: str) -> Expression:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._node.columns.names:
            return col(name)
        raise AttributeError(
            f"Table has no column {name!r}; its columns: {', '.join(self._node.columns.names)}"
        )

    def __str__(self) -> str:
        return self._t_env.register_unnamed(self)

    # -- relational operations ---------------------------------------------------------------

    def select(self, *fields: Expression | str) -> Table:
        """Project (``select(col('a'), col('b') + 1)``); with aggregates, over the whole table."""
        items = expressions(fields)
        if any(contains_aggregate(i) for i in items):
            return self._new(aggregate(self._node, [], items, self._t_env.batch_mode))
        return self._new(project(self._node, items))

    def filter(self, predicate: Expression | str) -> Table:
        """Keep the rows for which ``predicate`` is TRUE (NULL drops a row, as in SQL);
        a string is a SQL expression (``filter("a > 1")``)."""
        if isinstance(predicate, str):
            predicate = parse_expression(predicate)
        if isinstance(self._node, _PendingJoin):  # join(right).where(predicate)
            node = self._node
            return self._new(join(node.left, node.right, predicate, node.outer))
        rex = resolve(predicate, self._node.columns)
        if rex.data_type.root not in ("BOOLEAN", "NULL"):
            raise ValidationError(
                f"Filter operator requires a boolean expression as input, but {predicate}"
                f" is of type {rex.data_type}"
            )
        return self._new(Calc(columns=self._node.columns, input=self._node, condition=rex))

    where = filter

    def add_columns(self, *fields: Expression) -> Table:
        """Append computed columns."""
        existing = [col(n) for n in self._node.columns.names]
        return self._new(project(self._node, [*existing, *expressions(fields)]))

    def add_or_replace_columns(self, *fields: Expression) -> Table:
        """Append computed columns; one named like an existing column replaces it."""
        items = expressions(fields)
        by_name = {name_of(e, 0): e for e in items}
        names = self._node.columns.names
        ordered = [by_name.pop(n) if n in by_name else col(n) for n in names]
        return self._new(project(self._node, [*ordered, *by_name.values()]))

    def drop_columns(self, *fields: Expression | str) -> Table:
        """Remove the named columns."""
        drop = set()
        for e in expressions(fields):
            if e.kind != "field":
                raise ValidationError(f"drop_columns takes column references, got {e}")
            self._node.columns.index(e.name)
            drop.add(e.name)
        return self._new(
            project(self._node, [col(n) for n in self._node.columns.names if n not in drop])
        )

    def rename_columns(self, *fields: Expression) -> Table:
        """Rename columns: ``rename_columns(col('a').alias('b'))``."""
        renames: dict[str, str] = {}
        for e in fields:
            if e.kind != "alias" or e.args[0].kind != "field":
                raise ValidationError(f"rename_columns takes col(name).alias(new), got {e}")
            self._node.columns.index(e.args[0].name)
            renames[e.args[0].name] = e.names[0]
        items = [
            col(n).alias(renames[n]) if n in renames else col(n) for n in self._node.columns.names
        ]
        return self._new(project(self._node, items))

    def alias(self, field: str, *fields: str) -> Table:
        """Rename every column, in order: ``alias('ts', 'name', 'price')``."""
        names = [field, *fields]
        if len(names) != len(self._node.columns):
            raise ValidationError(
                f"Aliasing more fields than we actually have: {len(names)} names for"
                f" {len(self._node.columns)} columns"
            )
        items = [col(o).alias(n) for o, n in zip(self._node.columns.names, names, strict=True)]
        return self._new(project(self._node, items))

    def group_by(self, *fields: Expression | str) -> GroupedTable:
        """Group by columns; then ``select`` keys and aggregates."""
        return GroupedTable(self, expressions(fields))

    def join(self, right: Table, join_predicate: Expression | None = None) -> Table:
        """An inner equi-join: ``left.join(right, col('id') == col('r_id'))`` or
        ``left.join(right).where(...)``; column names must differ (rename them first)."""
        if join_predicate is None:
            return self._new(_PendingJoin(self._node, right.plan, outer=False))
        return self._new(join(self._node, right.plan, join_predicate, outer=False))

    def left_outer_join(self, right: Table, join_predicate: Expression | None = None) -> Table:
        """A left outer equi-join: a left row without a match is kept with NULLs, and
        retracted when a match arrives."""
        if join_predicate is None:
            raise ValidationError("left_outer_join needs a join predicate")
        return self._new(join(self._node, right.plan, join_predicate, outer=True))

    def over_window(self, *over_windows: OverWindow) -> OverWindowedTable:
        """Aggregates over each row's neighbours: ``over_window(Over.partition_by(col('k'))
        .order_by(col('ts')).preceding(row_interval(2)).alias('w')).select(...,
        col('v').max.over(col('w')))``."""
        if len(over_windows) != 1:
            raise ValidationError("over_window takes one over window here")
        return OverWindowedTable(self, over_windows[0])

    def window(self, window: GroupWindow) -> GroupWindowedTable:
        """Group into windows: ``window(Tumble.over(lit(5).seconds).on(col('ts')).alias('w'))``
        then ``group_by(..., col('w')).select(...)``."""
        if not isinstance(window, GroupWindow):
            raise ValidationError(f"window() takes Tumble, Slide or Session, got {window!r}")
        return GroupWindowedTable(self, window)

    def distinct(self) -> Table:
        """Each distinct row once."""
        keys = tuple(range(len(self._node.columns)))
        return self._new(
            Aggregate(self._node, keys, (), self._node.columns, self._t_env.batch_mode)
        )

    def limit(self, fetch: int, offset: int = 0) -> Table:
        """The first ``fetch`` rows (of an insert-only table)."""
        if changelog_mode(self._node) is not ChangelogMode.INSERT_ONLY:
            raise ValidationError("limit() on an updating table is not supported")
        if offset:
            raise ValidationError("limit with an offset needs an order_by, which is not built yet")
        return self._new(Limit(columns=self._node.columns, input=self._node, count=fetch))

    fetch = limit

    def union_all(self, right: Table) -> Table:
        """The rows of both tables (``UNION ALL``); the columns keep this table's names."""
        left_columns, right_columns = self._node.columns, right.plan.columns
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
        return self._new(Union(merged, (self._node, right.plan)))

    # -- row-based operations with user-defined functions ------------------------------------

    def _correlate(self, call: Any, keep_input: bool, outer: bool) -> Table:
        wrapper, args, aliases = _table_function_call(call)
        rexes = None if args is None else tuple(resolve(a, self._node.columns) for a in args)
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
            pairs = [*zip(self._node.columns.names, self._node.columns.types, strict=True), *pairs]
        _check_unique([n for n, _ in pairs])
        node = Correlate(
            columns=Columns.of(pairs),
            input=self._node,
            wrapper=wrapper,
            args=rexes,
            keep_input=keep_input,
            outer=outer,
        )
        return self._new(node)

    def join_lateral(
        self, table_function_call: Any, join_predicate: Expression | None = None
    ) -> Table:
        """Each row joined with the rows a table function yields for it (an inner join)."""
        joined = self._correlate(table_function_call, keep_input=True, outer=False)
        return joined.filter(join_predicate) if join_predicate is not None else joined

    def left_outer_join_lateral(
        self, table_function_call: Any, join_predicate: Expression | None = None
    ) -> Table:
        """As ``join_lateral``, keeping a row the function yields nothing for (NULLs)."""
        if join_predicate is not None:
            raise ValidationError("left_outer_join_lateral with a predicate is not built yet")
        return self._correlate(table_function_call, keep_input=True, outer=True)

    def flat_map(self, func: Any) -> Table:
        """The rows a table function yields for each row (called with the row)."""
        return self._correlate(func, keep_input=False, outer=False)

    def map(self, func: Any) -> Table:
        """One row per row from a scalar function returning a ``ROW`` (called with the row)."""
        wrapper, args, aliases = _scalar_function_call(func)
        columns = self._node.columns
        row_type = wrapper.result_type
        if isinstance(row_type, RowType):
            names, types = row_type.field_names(), row_type.field_types()
        else:
            names, types = ["f0"], [row_type]
        if aliases:
            names = list(aliases)
        as_row = Correlate(
            columns=Columns.of(list(zip(names, types, strict=True))),
            input=self._node,
            wrapper=_single_row(wrapper, row_type),
            args=None if args is None else tuple(resolve(a, columns) for a in args),
            keep_input=False,
            outer=False,
        )
        return self._new(as_row)

    # -- schema and plan ---------------------------------------------------------------------

    def get_schema(self) -> Columns:
        return self._node.columns

    get_resolved_schema = get_schema

    def print_schema(self) -> None:
        """Print the columns and their types, as Flink does."""
        print(schema_text(self._node.columns))

    def explain(self, *extra_details: Any) -> str:
        """The logical plan, each node with its changelog mode."""
        return "== Optimized Logical Plan ==\n" + explain(self._node) + "\n"

    # -- running -----------------------------------------------------------------------------

    def execute(self) -> TableResult:
        """Run the query; the result's rows can be printed or collected."""
        return self._t_env.execute_query(self)

    def execute_insert(self, table_path: str, overwrite: bool = False) -> TableResult:
        """Write the rows into a registered sink table; ``.wait()`` the result to block."""
        return self._t_env.execute_insert(self, table_path)

    def to_pandas(self) -> Any:
        import pandas as pd

        rows = [tuple(r) for r in self.execute().collect()]
        return pd.DataFrame(rows, columns=self._node.columns.names)


class OverWindowedTable:
    """A table with an over window; ``select`` columns and ``agg.over(col('w'))``."""

    def __init__(self, table: Table, window: OverWindow) -> None:
        self._table = table
        self._window = window

    def select(self, *fields: Expression | str) -> Table:
        node = over_aggregate(self._table.plan, self._window, expressions(fields))
        return Table(node, self._table.context)


class GroupWindowedTable:
    """A table with a group window; ``group_by`` must name the window's alias."""

    def __init__(self, table: Table, window: GroupWindow) -> None:
        self._table = table
        self._window = window

    def group_by(self, *fields: Expression | str) -> WindowGroupedTable:
        return WindowGroupedTable(self._table, self._window, expressions(fields))


class WindowGroupedTable:
    """A table grouped by keys and a window; ``select`` keys, aggregates and ``w.start``..."""

    def __init__(self, table: Table, window: GroupWindow, keys: list[Expression]) -> None:
        self._table = table
        self._window = window
        self._keys = keys

    def select(self, *fields: Expression | str) -> Table:
        node = window_aggregate(self._table.plan, self._window, self._keys, expressions(fields))
        return Table(node, self._table.context)


class GroupedTable:
    """A table grouped by keys; ``select`` its keys and aggregates."""

    def __init__(self, table: Table, keys: list[Expression]) -> None:
        self._table = table
        self._keys = keys

    def select(self, *fields: Expression | str) -> Table:
        table = self._table
        node = aggregate(table.plan, self._keys, expressions(fields), table.context.batch_mode)
        return Table(node, table.context)


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
    elif getattr(call, "kind", None) in ("scalar", "table", "aggregate") and hasattr(
        call, "function"
    ):
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
