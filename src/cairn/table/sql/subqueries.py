"""Subqueries of a ``SELECT``: ``[NOT] IN``, ``[NOT] EXISTS`` and uncorrelated scalar ones.

Invariant: as Flink's ``SubQueryRemoveRule`` decorrelates them — a ``WHERE`` conjunct
``x [NOT] IN (SELECT y ...)`` or ``[NOT] EXISTS (SELECT ...)`` becomes a semi (anti) join of
the query's input with the subquery (``semi_join_planner``; ``NOT IN`` null-aware). A
correlated subquery (its ``WHERE`` reads a column of the outer query) is a plain ``SELECT``
over one relation: its conjuncts that read outer columns become the join's condition, the
others filter the subquery's relation. An uncorrelated scalar subquery in the select list or
the ``WHERE`` (``(SELECT MAX(v) FROM t)``) must be an aggregate without ``GROUP BY`` (one row):
it is joined to every row of the input as a new column (``$scalar0``...; a left join without
keys, on one subtask, as Flink's), updated when the aggregate changes. A subquery anywhere
else is refused where it stands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from cairn.table.analysis import Columns, conjunction, contains_aggregate, resolve
from cairn.table.cross_join import cross_join
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression, col, lit
from cairn.table.semi_join_planner import in_condition, semi_join
from cairn.table.sql.errors import SqlErrors, SqlValidationError
from cairn.table.sql.expressions import ExpressionConverter
from cairn.table.sql.relation_names import unique_name
from cairn.table.table import Table

__all__ = ["SCALAR_PREFIX", "Subqueries"]

#: The prefix of the hidden columns holding scalar subqueries' values (``SELECT *`` skips them).
SCALAR_PREFIX = "$scalar"

Scopes = Mapping[str, Mapping[str, str]]


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def _scalar_subqueries(node: exp.Select) -> list[exp.Subquery]:
    """The subqueries of ``node``'s select list and ``WHERE`` that stand for a value."""
    return [
        s
        for part in (*node.expressions, node.args.get("where"))
        if part is not None
        for s in part.find_all(exp.Subquery)
        if not (isinstance(s.parent, exp.In) and s.arg_key == "query")
        and s.find_ancestor(exp.Exists) is None
        and s.find_ancestor(exp.Subquery) is None
    ]


def _predicate(node: exp.Expr) -> tuple[exp.Expr, bool] | None:
    """``(IN or EXISTS node, negated)`` when ``node`` is a subquery predicate."""
    negated = isinstance(node, exp.Not)
    inner = node.this if negated else node
    if isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Exists) or (
        isinstance(inner, exp.In) and inner.args.get("query") is not None
    ):
        return inner, negated
    return None


class Subqueries:
    """The subqueries of one ``SELECT`` block; ``query`` converts a query tree, ``relation``
    a ``FROM`` relation (with its alias)."""

    def __init__(
        self,
        errors: SqlErrors,
        query: Callable[[exp.Expr], Table],
        relation: Callable[[exp.Expr], tuple[Table, str]],
        functions: Callable[[str], Any] | None,
    ) -> None:
        self.errors = errors
        self.query = query
        self.relation = relation
        self.functions = functions

    def _build(self, node: exp.Expr, step: Callable[[], Table]) -> Table:
        return self.errors.run(node, step)

    # -- scalar subqueries ---------------------------------------------------------------

    def scalars(self, table: Table, node: exp.Select) -> tuple[Table, exp.Select]:
        """``table`` with a column per uncorrelated scalar subquery of ``node``'s select list
        and ``WHERE``, and ``node`` reading those columns instead (a copy when it had any)."""
        if not _scalar_subqueries(node):
            return table, node
        node = node.copy()
        for subquery in _scalar_subqueries(node):
            select = subquery.this
            if not isinstance(select, exp.Select) or select.args.get("group") is not None:
                raise self.errors.at(
                    subquery, "A scalar subquery is an aggregate without GROUP BY here (one row)"
                )
            if len(select.expressions) != 1 or not contains_aggregate(
                ExpressionConverter(self.errors, None, frozenset(), self.functions).convert(
                    select.expressions[0].unalias()
                )
            ):
                raise self.errors.at(
                    subquery,
                    "A scalar subquery is an aggregate without GROUP BY here, of one column",
                )
            value = self.query(select)
            used = set(table.get_schema().names)
            name = unique_name(f"{SCALAR_PREFIX}{len(used)}", used)
            value = value.alias(name)
            try:
                joined = cross_join(table.plan, value.plan, None, "LEFT")
            except ValidationError as error:
                raise self.errors.at(subquery, str(error)) from None
            table = Table(joined, table.context)
            subquery.replace(exp.column(name, quoted=True))
        return table, node

    # -- IN and EXISTS ------------------------------------------------------------------

    def where(
        self,
        table: Table,
        condition: exp.Expr,
        scopes: Scopes,
        filter_by: Callable[[Table, exp.Expr], Table],
    ) -> Table:
        """``table`` filtered by ``condition``: its subquery conjuncts as semi/anti joins,
        the rest by ``filter_by``."""
        parts = _conjuncts(condition)
        plain = [p for p in parts if _predicate(p) is None]
        if len(plain) == len(parts):
            return filter_by(table, condition)
        if plain:
            rest = plain[0]
            for p in plain[1:]:
                rest = exp.and_(rest, p, copy=False)
            table = filter_by(table, rest)
        for part in parts:
            found = _predicate(part)
            if found is not None:
                table = self._semi(table, found[0], found[1], scopes)
        return table

    def _semi(self, left: Table, node: exp.Expr, negated: bool, scopes: Scopes) -> Table:
        e = self.errors
        subquery = node.args["query"] if isinstance(node, exp.In) else node.this
        select = (subquery.this if isinstance(subquery, exp.Subquery) else subquery).copy()
        inner_alias, correlated = self._correlation(select, left, scopes)
        left_names = list(left.get_schema().names)
        if correlated is None:
            right = self.query(select)
            inner_scope: dict[str, str] = {}
            join_conditions: list[exp.Expr] = []
        else:
            right, inner_scope, join_conditions = correlated
        used = set(left_names)
        names = {n: unique_name(n, used) for n in right.get_schema().names}
        if any(n != m for n, m in names.items()):
            right = right.alias(*names.values())
        right_names = list(names.values())
        joined_scopes: dict[str, Mapping[str, str]] = dict(scopes)
        if inner_alias and correlated is not None:
            joined_scopes[inner_alias] = {n: names[m] for n, m in inner_scope.items()}
        exprs = ExpressionConverter(
            e, [*left_names, *right_names], frozenset(), self.functions, joined_scopes
        )
        columns = Columns.of(
            [
                *zip(left_names, left.get_schema().types, strict=True),
                *zip(right_names, right.get_schema().types, strict=True),
            ]
        )
        try:
            conditions = [resolve(exprs.convert(c), columns) for c in join_conditions]
            if isinstance(node, exp.In):
                if correlated is None:
                    if len(right_names) != 1:
                        raise e.at(subquery, "A subquery of IN selects one column")
                    item: Expression = col(right_names[0])
                else:
                    item = exprs.convert(select.expressions[0].unalias())
                pair = (resolve(exprs.convert(node.this), columns), resolve(item, columns))
                conditions.append(in_condition([pair], negated))
            if not conditions:
                conditions.append(resolve(lit(True), columns))
            condition = conjunction(conditions)
            assert condition is not None, "a TRUE condition stands in for none"
            plan = semi_join(left.plan, right.plan, condition, negated)
        except SqlValidationError:
            raise
        except ValidationError as error:
            raise e.at(node, str(error)) from None
        return Table(plan, left.context)

    def _correlation(
        self, select: exp.Expr, left: Table, scopes: Scopes
    ) -> tuple[str, tuple[Table, dict[str, str], list[exp.Expr]] | None]:
        """The subquery's relation alias, and when it reads outer columns: its relation
        filtered by its own conjuncts, that relation's names, and the correlated conjuncts."""
        if not isinstance(select, exp.Select):
            return "", None
        source = select.args.get("from_") or select.args.get("from")
        where = select.args.get("where")
        if source is None or where is None:
            return "", None
        inner, alias = self.relation(source.this)
        inner_names = set(inner.get_schema().names)
        outer = set(left.get_schema().names)

        def reads_outer(part: exp.Expr) -> bool:
            for c in part.find_all(exp.Column):
                if c.table:
                    if c.table != alias and c.table in scopes:
                        return True
                elif c.name not in inner_names and c.name in outer:
                    return True
            return False

        parts = _conjuncts(where.this)
        outer_parts = [p for p in parts if reads_outer(p)]
        if not outer_parts:
            return alias, None
        if select.args.get("joins") or select.args.get("group") or select.args.get("distinct"):
            raise self.errors.at(
                select, "A correlated subquery is a SELECT over one relation here, no GROUP BY"
            )
        # this subquery's own unqualified columns name its relation
        for part in [*parts, *select.expressions]:
            for c in list(part.find_all(exp.Column)):
                if not c.table and c.name in inner_names:
                    c.set("table", exp.to_identifier(alias))
        own = [p for p in parts if not reads_outer(p)]
        if own:
            scope = {alias: {n: n for n in inner_names}}
            filters = ExpressionConverter(
                self.errors, list(inner.get_schema().names), frozenset(), self.functions, scope
            )
            condition = own[0]
            for p in own[1:]:
                condition = exp.and_(condition, p, copy=False)
            filtered = inner
            inner = self._build(where, lambda: filtered.filter(filters.convert(condition)))
        return alias, (inner, {n: n for n in inner.get_schema().names}, outer_parts)
