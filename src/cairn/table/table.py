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
    name_of,
    resolve,
    split_aggregates,
)
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression, col, expressions
from cairn.table.plan import Aggregate, Calc, Limit, PlanNode, Union, explain
from cairn.table.schema import schema_text
from cairn.table.sql.expressions import parse_expression

if TYPE_CHECKING:
    from cairn.table.result import TableResult

__all__ = ["GroupedTable", "Table", "TableContext"]


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

    def distinct(self) -> Table:
        """Each distinct row once."""
        keys = tuple(range(len(self._node.columns)))
        return self._new(
            Aggregate(self._node, keys, (), self._node.columns, self._t_env.batch_mode)
        )

    def limit(self, fetch: int, offset: int = 0) -> Table:
        """The first ``fetch`` rows (of an insert-only table)."""
        from cairn.table.plan import ChangelogMode, changelog_mode

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


class GroupedTable:
    """A table grouped by keys; ``select`` its keys and aggregates."""

    def __init__(self, table: Table, keys: list[Expression]) -> None:
        self._table = table
        self._keys = keys

    def select(self, *fields: Expression | str) -> Table:
        table = self._table
        node = aggregate(table.plan, self._keys, expressions(fields), table.context.batch_mode)
        return Table(node, table.context)
