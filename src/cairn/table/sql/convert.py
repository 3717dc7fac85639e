"""SQL trees to the Table API: ``Expression`` trees and ``Table`` operations.

Invariant: SQL builds the same logical plan as the Table API — a ``SELECT`` becomes the calls a
Table API program makes (``filter``, ``group_by(...).select``, ``join``, ``join_lateral``,
``distinct``, ``limit``, ``union_all``) over the same ``Expression`` trees, so there is no
second planner (``ROW_NUMBER()`` Top-N and deduplication, which the Table API lacks, plan
their node in ``ranking``); and every name is checked against the query's input here, so an
error carries its SQL position. What Cairn does not plan (``RIGHT``/``FULL`` joins,
``ORDER BY``) is refused here, naming the construct and where it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from sqlglot import exp

from cairn.table.analysis import (
    Columns,
    contains_aggregate,
    is_aggregate_call,
    name_of,
    resolve,
)
from cairn.table.codegen import CompiledCalc, calc_source
from cairn.table.errors import ValidationError
from cairn.table.expressions import (
    Expression,
    col,
)
from cairn.table.lookup_source import LookupTable
from cairn.table.schema import Schema
from cairn.table.semi_join_planner import set_operation
from cairn.table.sql.ctes import with_clause_catalog
from cairn.table.sql.dialect import TableArg
from cairn.table.sql.errors import SqlErrors, SqlValidationError
from cairn.table.sql.expressions import ExpressionConverter
from cairn.table.sql.group_keys import computed_keys
from cairn.table.sql.grouping_sets import GroupingSets
from cairn.table.sql.joins import join_relation
from cairn.table.sql.ordering import ordered
from cairn.table.sql.ranking import ranked_source, refuse_ranking
from cairn.table.sql.relation_names import table_name
from cairn.table.sql.state_ttl_hint import (
    check_hint_names,
    state_ttl_hints,
    with_aggregate_ttl,
    with_join_ttl,
)
from cairn.table.sql.subqueries import SCALAR_PREFIX, Subqueries
from cairn.table.sql.windows import (
    WINDOW,
    GroupWindows,
    OverWindows,
    WindowTvf,
    check_session_keys,
    groups_by_window,
)
from cairn.table.table import GroupedTable, Table, WindowGroupedTable
from cairn.table.type_merging import wider
from cairn.table.types import DataType, DataTypes
from cairn.table.window import Cumulate, GroupWindow, Session, Slide, Tumble
from cairn.table.window_planner import window_tvf

_TVF_USAGE = {
    "TUMBLE": "TABLE t, DESCRIPTOR(ts), size[, offset]",
    "HOP": "TABLE t, DESCRIPTOR(ts), slide, size[, offset]",
    "CUMULATE": "TABLE t, DESCRIPTOR(ts), step, size[, offset]",
    "SESSION": "TABLE t [PARTITION BY k], DESCRIPTOR(ts), gap",
}

__all__ = ["SqlCatalog", "convert_query"]


class SqlCatalog(Protocol):
    """What the converter asks of the catalog (``TableEnvironment`` implements it)."""

    def lookup_table(self, name: str) -> Table | None:
        """The table or view registered as ``name`` in the default database, else None."""
        ...

    def lookup_function(self, name: str) -> Any | None:
        """The user-defined function registered as ``name`` (any case), else None."""
        ...

    def lookup_source(self, name: str) -> LookupTable | None:
        """The lookup table of ``name`` when its connector has one, else None."""
        ...

    def declared_schema(self, name: str) -> Schema | None:
        """The schema ``name`` was declared with (``CREATE TABLE``), else None."""
        ...

    def from_elements(
        self,
        elements: Iterable[Any],
        schema: DataType | Sequence[str] | None = None,
        verify_schema: bool = True,
    ) -> Table:
        """A table of rows known when the query is planned (``VALUES``)."""
        ...


def _is_comma_join(node: exp.Select) -> bool:
    """``FROM a, b WHERE ...``: its last join has no ``ON`` and no side or kind, so the
    ``WHERE`` is that join's condition."""
    joins = node.args.get("joins") or []
    if not joins or isinstance(joins[-1].this, exp.Lateral):
        return False
    last = joins[-1]
    return last.args.get("on") is None and not last.side and not last.kind


def convert_query(node: exp.Expr, catalog: SqlCatalog, sql: str) -> Table:
    """The ``Table`` of a ``SELECT`` / ``UNION ALL`` tree, built with Table API calls."""
    return _QueryConverter(catalog, SqlErrors(sql)).query(node)


class _QueryConverter:
    def __init__(self, catalog: SqlCatalog, errors: SqlErrors) -> None:
        self.catalog = catalog
        self.errors = errors
        # the window TVF that is the FROM of the SELECT being converted
        self._tvf: WindowTvf | None = None
        # Top-N / deduplication subqueries already planned (``ranking``), by node identity
        self._ranked: dict[int, Table] = {}

    def query(self, node: exp.Expr) -> Table:
        e = self.errors
        clause = node.args.get("with_")
        if isinstance(clause, exp.With):  # the body sees the CTEs (``ctes``)
            scoped = with_clause_catalog(clause, self.catalog, self._nested, e)
            node.set("with_", None)
            try:
                return _QueryConverter(scoped, e).query(node)
            finally:
                node.set("with_", clause)
        if isinstance(node, exp.Subquery):
            return self.query(node.this)
        if isinstance(node, exp.Values):
            return self._values(node)
        if isinstance(node, exp.Union):
            left, right = self._common_types(self.query(node.left), self.query(node.right), node)
            unioned = self._build(node, lambda: left.union_all(right))
            unioned = unioned if not node.args.get("distinct") else unioned.distinct()
            return ordered(e, node, unioned)
        if isinstance(node, exp.Intersect | exp.Except):
            kind = type(node).__name__.upper()
            if not node.args.get("distinct"):
                raise e.at(node, f"{kind} ALL is not supported yet: {kind} (distinct) is")
            left, right = self._common_types(self.query(node.left), self.query(node.right), node)
            result = self._build(
                node, lambda: Table(set_operation(left.plan, right.plan, kind), left.context)
            )
            return ordered(e, node, result)
        if isinstance(node, exp.SetOperation):
            raise e.at(node, f"{type(node).__name__.upper()} is not supported yet")
        if not isinstance(node, exp.Select):
            raise e.at(node, f"Not a query: {node.sql()[:40]}")
        ranked = ranked_source(node, self.query, e)
        if ranked is not None:
            node, subquery, ranked_table = ranked
            self._ranked[id(subquery)] = ranked_table
        refuse_ranking(node, e)
        ttls = state_ttl_hints(node, e)
        outer_tvf, self._tvf = self._tvf, None
        try:
            table, scopes = self._from(node, ttls)
            tvf = self._tvf
        finally:
            self._tvf = outer_tvf
        check_hint_names(ttls, scopes, e, node.args.get("hint"))
        if tvf is not None and groups_by_window(node):
            table = tvf.table  # GROUP BY window_start, window_end: a window aggregate
            check_session_keys(e, node, tvf)
        else:
            tvf = None  # the TVF's rows as a table (window Top-N, deduplication, join...)
            table, node = self._subqueries().scalars(table, node)
        columns = table.get_schema().names
        over = OverWindows(e, node.args.get("windows") or [], columns)
        groups = GroupWindows(e, (tvf.window, tvf.node) if tvf is not None else None)
        group = node.args.get("group")
        grouping = GroupingSets(
            e,
            group.expressions if group is not None else [],
            columns,
            lambda c: scopes.get(c.table, {}).get(c.name, c.name) if c.table else c.name,
        )

        def special(n: exp.Expr) -> Expression | None:
            found = grouping.call(n)
            return found if found is not None else groups.convert(n)

        exprs = ExpressionConverter(
            e,
            columns,
            frozenset(),
            self.catalog.lookup_function,
            scopes,
            over.alias_of,
            special,
        )
        where = node.args.get("where")
        if where is not None and not _is_comma_join(node):
            filters = ExpressionConverter(
                e, columns, frozenset(), self.catalog.lookup_function, scopes, None, groups.before
            )
            subqueries = self._subqueries()
            table = self._build(
                where,
                lambda: subqueries.where(
                    table, where.this, scopes, lambda t, c: t.filter(filters.convert(c))
                ),
            )
        items = self._items(exprs, node.expressions, columns, scopes)
        having = node.args.get("having")
        if grouping.active:
            assert group is not None
            if tvf is not None or groups.window is not None:
                raise e.at(group, "GROUPING SETS of a window aggregate are not supported yet")
            expanded = self._build(group, lambda: grouping.expand(table))
            regrouped = expanded.group_by(*grouping.group_keys())
            items = [grouping.rewrite(i) for i in items]
            result = self._aggregate(regrouped, items, having, exprs, node, grouping.rewrite)
            if node.args.get("distinct") is not None:
                result = result.distinct()
            return ordered(e, node, result)
        key_nodes = groups.keys(node, group.expressions if group is not None else [])
        keys = [exprs.convert(k) for k in key_nodes]
        computed = computed_keys(keys, len(columns))
        rewrite = None
        if computed.columns:
            if tvf is not None or groups.window is not None:
                key_node = next(
                    n for n, k in zip(key_nodes, keys, strict=True) if k.kind != "field"
                )
                raise e.at(
                    key_node, "GROUP BY an expression of a window aggregate is not supported yet"
                )
            assert group is not None  # computed keys come from a GROUP BY
            extended = table
            table = self._build(group, lambda: extended.add_columns(*computed.columns))
            keys = list(computed.keys)
            items = [computed.rewrite(i) for i in items]
            rewrite = computed.rewrite
        aggregated = group is not None or any(contains_aggregate(i) for i in items)
        window_of_groups = groups.window_of(node, keys)
        if window_of_groups is not None:
            windowed = table.window(window_of_groups).group_by(*keys)
            result = self._aggregate(windowed, items, having, exprs, node)
        elif over.window is not None:
            if group is not None or having is not None:
                raise e.at(node, "OVER aggregates with GROUP BY are not supported yet")
            window = over.window
            result = self._build(node, lambda: table.over_window(window).select(*items))
        elif not aggregated:
            if having is not None:
                raise e.at(having, "HAVING needs GROUP BY or aggregates")
            result = self._build(node, lambda: table.select(*items))
        else:
            grouped = table.group_by(*keys)
            result = self._aggregate(grouped, items, having, exprs, node, rewrite)
            if ttls and not node.args.get("joins"):  # STATE_TTL of the FROM relation
                hinted = with_aggregate_ttl(result.plan, ttls.get(next(iter(scopes), "")))
                result = Table(hinted, result.context)
        if node.args.get("distinct") is not None:
            result = result.distinct()
        return ordered(e, node, result)

    def _subqueries(self) -> Subqueries:
        return Subqueries(self.errors, self.query, self._relation, self.catalog.lookup_function)

    def _nested(self, node: exp.Expr, catalog: SqlCatalog) -> Table:
        return _QueryConverter(catalog, self.errors).query(node)

    def _values(self, node: exp.Values) -> Table:
        """``VALUES (1, 'a'), (2, 'b')``: constant rows, each value computed once here by the
        same generated code a calc runs; a column's type is its values' common type."""
        constants = ExpressionConverter(self.errors, [], frozenset(), self.catalog.lookup_function)
        no_columns = Columns.of([])
        rows: list[tuple[Any, ...]] = []
        types: list[DataType] | None = None
        for row_node in node.expressions:
            cells = row_node.expressions if isinstance(row_node, exp.Tuple) else [row_node]
            try:
                rexes = [resolve(constants.convert(c), no_columns) for c in cells]
            except SqlValidationError:
                raise
            except ValidationError as error:
                raise self.errors.at(row_node, str(error)) from None
            if types is not None and len(rexes) != len(types):
                raise self.errors.at(row_node, "Values passed to VALUES must have the same arity")
            row = CompiledCalc(calc_source(rexes, None))(())
            assert row is not None
            rows.append(row)
            row_types = [r.data_type for r in rexes]
            types = (
                row_types
                if types is None
                else [
                    wider(a, b).nullable_() if a.nullable or b.nullable else wider(a, b)
                    for a, b in zip(types, row_types, strict=True)
                ]
            )
        assert types is not None
        fields = [DataTypes.FIELD(f"EXPR${i}", t) for i, t in enumerate(types)]
        return self.catalog.from_elements(rows, DataTypes.ROW(fields))

    def _common_types(self, left: Table, right: Table, node: exp.Expr) -> tuple[Table, Table]:
        """Both sides of a set operation cast to their columns' common types, as Flink's
        validator does (``INT`` and ``BIGINT`` → ``BIGINT``)."""
        left_columns, right_columns = left.get_schema(), right.get_schema()
        if len(left_columns) != len(right_columns):
            raise self.errors.at(
                node,
                "Set operator cannot combine tables with different numbers of columns:"
                f" {len(left_columns)} and {len(right_columns)}",
            )
        common = [wider(a, b) for a, b in zip(left_columns.types, right_columns.types, strict=True)]

        def cast(table: Table) -> Table:
            columns = table.get_schema()
            if all(
                (t.root, t.params) == (c.root, c.params)
                for t, c in zip(columns.types, common, strict=True)
            ):
                return table
            return table.select(
                *(
                    col(n)
                    if (t.root, t.params) == (c.root, c.params)
                    else col(n).cast(c.nullable_() if t.nullable else c.not_null()).alias(n)
                    for n, t, c in zip(columns.names, columns.types, common, strict=True)
                )
            )

        return cast(left), cast(right)

    def _build(self, node: exp.Expr, step: Callable[[], Table]) -> Table:
        """Run a Table API step; its validation error gets ``node``'s position."""
        return self.errors.run(node, step)

    def _items(
        self,
        exprs: ExpressionConverter,
        nodes: list[exp.Expr],
        columns: list[str],
        scopes: dict[str, dict[str, str]],
    ) -> list[Expression]:
        """The select list with Calcite's names: ``*`` (or ``a.*``) expanded, an unnamed
        expression ``EXPR$<position>``, a repeated name made unique (``k``, ``k0``...)."""
        expanded: list[Expression] = []
        for item in nodes:
            if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                scope = scopes.get(item.table)
                if scope is None:
                    raise self.errors.at(item, f"Table '{item.table}' not found")
                expanded.extend(col(n) for n in scope.values())
            elif isinstance(item, exp.Star):
                expanded.extend(col(n) for n in columns if not n.startswith(SCALAR_PREFIX))
            elif isinstance(item, exp.Alias):
                expanded.append(exprs.convert(item.this).alias(item.alias))
            elif isinstance(item, exp.Column):
                converted = exprs.convert(item)
                # a window TVF's window_start is a window property named as its column
                renamed = converted.kind != "field" or converted.name != item.name
                expanded.append(converted.alias(item.name) if renamed else converted)
            else:
                expanded.append(exprs.convert(item))
        named: list[Expression] = []
        used: set[str] = set()
        for position, e in enumerate(expanded):
            if e.kind not in ("field", "alias") or e.name.startswith(SCALAR_PREFIX):
                e = e.alias(f"EXPR${position}")
            name = name_of(e, position)
            if name in used:
                suffix = 0
                while f"{name}{suffix}" in used:
                    suffix += 1
                name = f"{name}{suffix}"
                e = (e.args[0] if e.kind == "alias" else e).alias(name)
            used.add(name)
            named.append(e)
        return named

    def _from(
        self, node: exp.Select, ttls: dict[str, int]
    ) -> tuple[Table, dict[str, dict[str, str]]]:
        """The ``FROM`` clause's table, and each table alias with its columns' names in it;
        ``ttls``: the block's ``STATE_TTL`` hint, for its joins."""
        e = self.errors
        source = node.args.get("from_") or node.args.get("from")
        if source is None:  # SELECT 1: one row of no data, as Calcite's VALUES (0)
            zero = DataTypes.ROW([DataTypes.FIELD("ZERO", DataTypes.INT(False))])
            return self.catalog.from_elements([(0,)], zero), {}
        if isinstance(source.this, exp.Lateral):
            raise e.at(source.this, "LATERAL TABLE needs a table before it: FROM t, LATERAL ...")
        table, alias = self._relation(source.this)
        scopes = {alias: {n: n for n in table.get_schema().names}} if alias else {}
        joins = node.args.get("joins") or []
        where = node.args.get("where")
        for i, join in enumerate(joins):
            before = set(scopes)
            last = i == len(joins) - 1 and where is not None
            table = self._join(table, scopes, join, where.this if where and last else None)
            if ttls:
                right = [a for a in scopes if a not in before]
                hinted = with_join_ttl(
                    table.plan,
                    ttls.get(alias) if i == 0 else None,  # a later join's left is a join
                    ttls.get(right[0]) if right else None,
                )
                table = Table(hinted, table.context)
        return table, scopes

    def _relation(self, this: exp.Expr) -> tuple[Table, str]:
        """A table, view, subquery or ``VALUES`` in ``FROM``, with its alias."""
        e = self.errors
        alias = this.alias_or_name if isinstance(this, exp.Table | exp.Subquery) else ""
        if isinstance(this, exp.Values):
            table = self._values(this)
        elif isinstance(this, exp.Subquery):
            ranked = self._ranked.pop(id(this), None)
            table = ranked if ranked is not None else self.query(this.this)
        elif isinstance(this, exp.Table) and isinstance(this.this, exp.Anonymous):
            tvf = self._window_tvf(this, this.this)
            self._tvf = tvf  # aggregated by its window: the window aggregate reads the table
            table = tvf.windowed
            alias = this.alias
        elif isinstance(this, exp.Table):
            name = table_name(this, e.sql)
            found = self.catalog.lookup_table(name)
            if found is None:
                raise e.at(this, f"Object '{name}' not found")
            table = found
            alias = this.alias or name
        else:
            raise e.at(this, f"Unsupported FROM: {this.sql()[:40]}")
        if isinstance(this, exp.Table | exp.Subquery | exp.Values) and this.args.get("alias"):
            column_aliases = this.args["alias"].columns
            if column_aliases:
                table = table.alias(*(c.name for c in column_aliases))
        return table, alias

    def _window_tvf(self, node: exp.Table, call: exp.Anonymous) -> WindowTvf:
        """``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size[, offset]))``, ``HOP(..., slide,
        size[, offset])``, ``CUMULATE(..., step, size[, offset])`` or ``SESSION(TABLE t
        [PARTITION BY k], DESCRIPTOR(ts), gap)``: its table and window."""
        e = self.errors
        inner = call.expressions[0] if len(call.expressions) == 1 else None
        name = inner.name.upper() if isinstance(inner, exp.Anonymous) else ""
        if call.name.upper() != "TABLE" or name not in _TVF_USAGE:
            raise e.at(
                node,
                f"Table function {name or call.name}(...) in FROM is not supported yet:"
                " Cairn takes the window TVFs TUMBLE, HOP, CUMULATE and SESSION",
            )
        assert isinstance(inner, exp.Anonymous)
        args = list(inner.expressions)
        sizes_needed = 1 if name in ("TUMBLE", "SESSION") else 2
        optional = 0 if name == "SESSION" else 1
        counts = range(2 + sizes_needed, 3 + sizes_needed + optional)
        if len(args) not in counts or not isinstance(args[0], TableArg):
            raise e.at(inner, f"{name} takes ({_TVF_USAGE[name]})")
        table, _ = self._relation(args[0].this)
        keys = [k.name for k in args[0].args.get("partition_by") or []]
        if keys and name != "SESSION":
            raise e.at(args[0], f"{name} takes no PARTITION BY: only SESSION does")
        descriptor = args[1]
        columns = descriptor.expressions if isinstance(descriptor, exp.Anonymous) else []
        if descriptor.name.upper() != "DESCRIPTOR" or len(columns) != 1:
            raise e.at(descriptor, "The time attribute is given as DESCRIPTOR(ts)")
        if columns[0].name not in table.get_schema().names:
            raise e.at(columns[0], f"Column '{columns[0].name}' not found in any table")
        for key in args[0].args.get("partition_by") or []:
            if key.name not in table.get_schema().names:
                raise e.at(key, f"Column '{key.name}' not found in any table")
        time_field = col(columns[0].name)
        intervals = ExpressionConverter(e, [], frozenset())
        sizes = [intervals.convert(a) for a in args[2:]]
        try:
            window: GroupWindow
            if name == "TUMBLE":
                window = Tumble.over(sizes[0])
            elif name == "HOP":
                window = Slide.over(sizes[1]).every(sizes[0])
            elif name == "CUMULATE":
                window = Cumulate.over(sizes[1]).every(sizes[0])
            else:
                window = Session.with_gap(sizes[0])
            if len(sizes) > sizes_needed:
                window = window.offset(sizes[-1])
            window = window.on(time_field).alias(WINDOW)
            plan = window_tvf(table.plan, window, keys)
        except ValidationError as error:
            raise e.at(inner, str(error)) from None
        return WindowTvf(window, node, table, tuple(keys), Table(plan, table.context))

    def _join(
        self,
        left: Table,
        scopes: dict[str, dict[str, str]],
        join: exp.Join,
        where: exp.Expr | None = None,
    ) -> Table:
        """One ``JOIN`` of the ``FROM`` clause (``sql/joins.py``)."""
        return join_relation(self.errors, self.catalog, left, scopes, join, where, self._joined)

    def _joined(self, this: exp.Expr) -> tuple[Table, str]:
        """A join's right side: a window TVF there is a table (a window join's input)."""
        self._tvf = None
        try:
            return self._relation(this)
        finally:
            self._tvf = None

    def _aggregate(
        self,
        grouped: GroupedTable | WindowGroupedTable,
        items: list[Expression],
        having: exp.Expr | None,
        exprs: ExpressionConverter,
        node: exp.Select,
        rewrite: Callable[[Expression, bool], Expression] | None = None,
    ) -> Table:
        """``GROUP BY`` (of a window, too) then the select list and ``HAVING`` (its
        expression through ``rewrite`` first, when given: grouping sets)."""
        if having is None:
            return self._build(node, lambda: grouped.select(*items))
        # HAVING is a filter over the aggregate's output: its aggregates and keys are the
        # select's columns where the select computes them, hidden extra columns otherwise
        visible = [name_of(i, p) for p, i in enumerate(items)]
        by_text = {
            str(i.args[0] if i.kind == "alias" else i): n
            for i, n in zip(items, visible, strict=True)
        }
        hidden: list[Expression] = []

        def over_output(expr: Expression) -> Expression:
            if expr.kind == "field" or (is_aggregate_call(expr)):
                known = by_text.get(str(expr))
                if known is not None:
                    return col(known)
                name = f"$f{len(visible) + len(hidden)}"
                hidden.append(expr.alias(name))
                by_text[str(expr)] = name
                return col(name)
            if not expr.args:
                return expr
            return Expression(
                expr.kind,
                expr.name,
                tuple(over_output(a) for a in expr.args),
                expr.value,
                expr.data_type,
                expr.names,
            )

        converted = exprs.convert(having.this)
        if rewrite is not None:
            converted = rewrite(converted, False)
        condition = over_output(converted)
        result = self._build(node, lambda: grouped.select(*items, *hidden))
        result = self._build(having, lambda: result.filter(condition))
        if hidden:
            result = result.select(*(col(n) for n in visible))
        return result
