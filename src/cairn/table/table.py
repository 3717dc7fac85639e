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

from typing import TYPE_CHECKING, Any, Protocol

from cairn.table.analysis import (
    Columns,
    contains_aggregate,
    name_of,
    resolve,
)
from cairn.table.changelog import changelog_mode
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression, col, expressions
from cairn.table.mini_batch import with_mini_batch
from cairn.table.optimize import optimize
from cairn.table.plan import (
    Aggregate,
    Calc,
    ChangelogMode,
    ExplainDetail,
    Limit,
    PlanNode,
)
from cairn.table.plan_text import explain
from cairn.table.planner import (
    PendingJoin,
    aggregate,
    correlate,
    flat_aggregate,
    join,
    map_rows,
    project,
    row_aggregate,
    union_all,
)
from cairn.table.scan_pushdown import push_into_scans
from cairn.table.schema import schema_text
from cairn.table.sql.expressions import parse_expression
from cairn.table.state_ttl import join_state_advice
from cairn.table.time_planner import over_aggregate, window_aggregate
from cairn.table.window import GroupWindow, OverWindow

if TYPE_CHECKING:
    from cairn.table.result import TableResult

__all__ = [
    "AggregatedTable",
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

    def state_ttl_ms(self) -> int:
        """``table.exec.state.ttl`` as the planner applies it (0: state kept forever)."""
        ...

    def mini_batch(self) -> tuple[int, int] | None:
        """``(allow-latency ms, size)`` of an enabled ``table.exec.mini-batch``, else None."""
        ...

    def execute_insert(self, table: Table, table_path: str) -> TableResult: ...


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
        if isinstance(self._node, PendingJoin):  # join(right).where(predicate)
            node = self._node
            return self._new(join(node.left, node.right, predicate, node.join_type))
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

    def join(self, right: Table, join_predicate: Expression | str | None = None) -> Table:
        """An inner equi-join: ``left.join(right, col('id') == col('r_id'))`` or
        ``left.join(right).where(...)``; column names must differ (rename them first). With a
        lower and an upper bound on the difference of two rowtime attributes it is an
        interval join: ``orders.join(shipments, (col("id") == col("o_id")) &
        col("ship_ts").between(col("ts"), col("ts") + lit(4).hours))``."""
        if join_predicate is None:
            return self._new(PendingJoin(self._node, right.plan, "INNER"))
        return self._new(join(self._node, right.plan, _predicate(join_predicate), "INNER"))

    def left_outer_join(
        self, right: Table, join_predicate: Expression | str | None = None
    ) -> Table:
        """A left outer equi-join: a left row without a match is kept with NULLs, and
        retracted when a match arrives."""
        if join_predicate is None:
            raise ValidationError("left_outer_join needs a join predicate")
        return self._new(join(self._node, right.plan, _predicate(join_predicate), "LEFT"))

    def right_outer_join(self, right: Table, join_predicate: Expression | str) -> Table:
        """A right outer equi-join: a right row without a match is kept with NULLs (for the
        left's columns), and retracted when a match arrives."""
        return self._new(join(self._node, right.plan, _predicate(join_predicate), "RIGHT"))

    def full_outer_join(self, right: Table, join_predicate: Expression | str) -> Table:
        """A full outer equi-join: a row of either side without a match is kept with NULLs
        for the other side's columns, and retracted when a match arrives."""
        return self._new(join(self._node, right.plan, _predicate(join_predicate), "FULL"))

    def over_window(self, *over_windows: OverWindow) -> OverWindowedTable:
        """Aggregates over each row's neighbours: ``over_window(Over.partition_by(col('k'))
        .order_by(col('ts')).preceding(row_interval(2)).alias('w')).select(...,
        col('v').max.over(col('w')))``."""
        if len(over_windows) != 1:
            raise ValidationError("over_window takes one over window here")
        return OverWindowedTable(self, over_windows[0])

    def aggregate(self, func: Any) -> AggregatedTable:
        """A row-based aggregate over the whole table."""
        return AggregatedTable(self._new(row_aggregate(self._node, [], func)))

    def flat_aggregate(self, func: Any) -> AggregatedTable:
        """A table aggregate over the whole table."""
        return AggregatedTable(self._new(flat_aggregate(self._node, [], func)))

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
        return self._new(union_all(self._node, right.plan))

    # -- row-based operations with user-defined functions ------------------------------------

    def join_lateral(
        self, table_function_call: Any, join_predicate: Expression | None = None
    ) -> Table:
        """Each row joined with the rows a table function yields for it (an inner join)."""
        joined = self._new(correlate(self._node, table_function_call, True, False))
        return joined.filter(join_predicate) if join_predicate is not None else joined

    def left_outer_join_lateral(
        self, table_function_call: Any, join_predicate: Expression | None = None
    ) -> Table:
        """As ``join_lateral``, keeping a row the function yields nothing for (NULLs)."""
        if join_predicate is not None:
            raise ValidationError("left_outer_join_lateral with a predicate is not built yet")
        return self._new(correlate(self._node, table_function_call, True, True))

    def flat_map(self, func: Any) -> Table:
        """The rows a table function yields for each row (called with the row)."""
        return self._new(correlate(self._node, func, False, False))

    def map(self, func: Any) -> Table:
        """One row per row from a scalar function returning a ``ROW`` (called with the row)."""
        return self._new(map_rows(self._node, func))

    # -- schema and plan ---------------------------------------------------------------------

    def get_schema(self) -> Columns:
        return self._node.columns

    get_resolved_schema = get_schema

    def print_schema(self) -> None:
        """Print the columns and their types, as Flink does."""
        print(schema_text(self._node.columns))

    def explain(self, *extra_details: ExplainDetail) -> str:
        """The plan as written (``Abstract Syntax Tree``) and as it runs (``Optimized Logical
        Plan``: adjacent calcs merged, unused columns pruned), each node with its changelog
        mode; then a warning per regular join whose state has no TTL (``advice[1]: [WARNING]
        ...``), or, asked for plan advice, Flink's "No available advice..." when there is
        none."""
        text = "== Abstract Syntax Tree ==\n" + explain(self._node) + "\n\n"
        running = push_into_scans(optimize(self._node))
        running = with_mini_batch(running, self._t_env.mini_batch())
        text += "== Optimized Logical Plan ==\n" + explain(running) + "\n"
        batch = self._t_env.batch_mode  # a batch job's state lives as long as its input
        advice = [] if batch else join_state_advice(self._node, self._t_env.state_ttl_ms())
        if advice:
            text += "\n" + "".join(f"advice[{i}]: {a}\n" for i, a in enumerate(advice, 1))
        elif ExplainDetail.PLAN_ADVICE in extra_details:
            text += "\nNo available advice...\n"
        return text

    # -- running -----------------------------------------------------------------------------

    def execute(self) -> TableResult:
        """Run the query; the result's rows can be printed or collected."""
        return self._t_env.execute_query(self)

    def execute_insert(self, table_path: str, overwrite: bool = False) -> TableResult:
        """Write the rows into a registered sink table; ``.wait()`` the result to block."""
        return self._t_env.execute_insert(self, table_path)

    def to_pandas(self) -> Any:
        """The table's rows as a ``pandas.DataFrame`` (an updating table's final rows: its
        changelog applied). Needs pandas (``pip install 'cairn[pandas]'``)."""
        import pandas as pd

        rows: list[tuple[Any, ...]] = []
        for r in self.execute().collect():
            row = tuple(r)
            if r.get_row_kind().short_string() in ("+I", "+U"):
                rows.append(row)
            else:
                rows.remove(row)
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


class AggregatedTable:
    """The result of ``aggregate(f)`` / ``flat_aggregate(f)``; ``select`` its columns."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def select(self, *fields: Expression | str) -> Table:
        return self._table.select(*fields)


class GroupedTable:
    """A table grouped by keys; ``select`` its keys and aggregates."""

    def __init__(self, table: Table, keys: list[Expression]) -> None:
        self._table = table
        self._keys = keys

    def aggregate(self, func: Any) -> AggregatedTable:
        """A row-based aggregate: ``aggregate(f.alias('cnt', 'sum')).select(...)``."""
        node = row_aggregate(self._table.plan, self._keys, func)
        return AggregatedTable(Table(node, self._table.context))

    def flat_aggregate(self, func: Any) -> AggregatedTable:
        """A table aggregate: ``flat_aggregate(top2).select(col('k'), col('v'))``."""
        node = flat_aggregate(self._table.plan, self._keys, func)
        return AggregatedTable(Table(node, self._table.context))

    def select(self, *fields: Expression | str) -> Table:
        table = self._table
        node = aggregate(table.plan, self._keys, expressions(fields), table.context.batch_mode)
        return Table(node, table.context)


def _predicate(predicate: Expression | str) -> Expression:
    """A join predicate; a string is a SQL expression, as PyFlink takes it."""
    return parse_expression(predicate) if isinstance(predicate, str) else predicate
