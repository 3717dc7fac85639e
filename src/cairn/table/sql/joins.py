"""One ``JOIN`` of a ``FROM`` clause, as the Table API join it stands for.

Invariant: the right side's columns named like a left one are renamed as Calcite does
(``id`` → ``id0``) and ``scopes`` learns them under the right side's alias; the kind of join
follows from the SQL alone — ``LATERAL TABLE`` a correlate, ``FOR SYSTEM_TIME AS OF`` a
temporal or lookup join (``sql/temporal.py``), an ``ON`` with an equality between the sides a
keyed join (regular, interval or window: ``planner.join``), an ``ON`` without one or no ``ON``
at all (``CROSS JOIN``, ``FROM a, b``) a join of every pair on one subtask (``cross_join``).
Every refusal carries the position of what it refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqlglot import exp

from cairn.table.analysis import resolve
from cairn.table.cross_join import cross_join, keyless_condition
from cairn.table.lookup_source import LookupTable
from cairn.table.schema import Schema
from cairn.table.sql.errors import SqlErrors
from cairn.table.sql.expressions import ExpressionConverter
from cairn.table.sql.relation_names import unique_name
from cairn.table.sql.temporal import temporal_relation
from cairn.table.table import Table
from cairn.table.unnest import unnest_function

__all__ = ["JoinCatalog", "join_relation"]


class JoinCatalog(Protocol):
    """What a join asks of the catalog."""

    def lookup_table(self, name: str) -> Table | None: ...

    def lookup_function(self, name: str) -> Any | None: ...

    def lookup_source(self, name: str) -> LookupTable | None: ...

    def declared_schema(self, name: str) -> Schema | None: ...


def join_relation(
    errors: SqlErrors,
    catalog: JoinCatalog,
    left: Table,
    scopes: dict[str, dict[str, str]],
    join: exp.Join,
    where: exp.Expr | None,
    relation: Callable[[exp.Expr], tuple[Table, str]],
) -> Table:
    """``left`` joined as ``join`` says; ``where``: the query's ``WHERE``, the condition of a
    comma join (``FROM a, b WHERE a.id = b.id``); ``relation`` reads the right side."""
    e = errors
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    if kind in ("SEMI", "ANTI"):
        raise e.at(join, f"{kind} JOIN is not supported yet", kind)
    if join.args.get("using"):
        raise e.at(join, "JOIN ... USING is not supported yet: use ON a.x = b.y", "USING")
    if isinstance(join.this, exp.Lateral):
        return _lateral(e, catalog, left, scopes, join, outer=side == "LEFT")
    if isinstance(join.this, exp.Unnest):
        return _unnest(e, catalog, left, scopes, join, outer=side == "LEFT")
    version = join.this.args.get("version") if isinstance(join.this, exp.Table) else None
    if version is not None:
        return temporal_relation(e, catalog, left, scopes, join, version, side)
    right, alias = relation(join.this)
    if alias in scopes:
        raise e.at(join.this, f"Duplicate relation name '{alias}' in FROM clause")
    used = set(left.get_schema().names)
    names = {n: unique_name(n, used) for n in right.get_schema().names}
    if any(n != m for n, m in names.items()):
        right = right.alias(*names.values())
    scopes[alias] = names
    on = join.args.get("on")
    if on is None and where is not None and not side and not kind:
        on = where  # FROM a, b WHERE ...: the WHERE is the join's condition, as Calcite
    if on is None and not side:  # CROSS JOIN, FROM a, b: every pair, on one subtask
        return Table(cross_join(left.plan, right.plan, None, "INNER"), left.context)
    if on is None:
        raise e.at(join, f"{side} JOIN needs ON with a condition", side)
    exprs = ExpressionConverter(
        e,
        [*left.get_schema().names, *right.get_schema().names],
        frozenset(),
        catalog.lookup_function,
        scopes,
    )
    predicate = exprs.convert(on)
    keyless = keyless_condition(left.plan, right.plan, predicate)
    if keyless is not None:  # ON without an equality: every pair, on one subtask
        condition = keyless
        return e.run(
            on,
            lambda: Table(
                cross_join(left.plan, right.plan, condition, side or "INNER"), left.context
            ),
        )
    if side == "LEFT":
        return e.run(on, lambda: left.left_outer_join(right, predicate))
    if side == "RIGHT":
        return e.run(on, lambda: left.right_outer_join(right, predicate))
    if side == "FULL":
        return e.run(on, lambda: left.full_outer_join(right, predicate))
    return e.run(on, lambda: left.join(right, predicate))


def _lateral(
    e: SqlErrors,
    catalog: JoinCatalog,
    left: Table,
    scopes: dict[str, dict[str, str]],
    join: exp.Join,
    outer: bool,
) -> Table:
    """``[LEFT] JOIN LATERAL TABLE(f(...)) [AS t(a, b)] [ON TRUE]``: a correlate."""
    lateral = join.this
    on = join.args.get("on")
    if on is not None and not (isinstance(on, exp.Boolean) and on.this):
        raise e.at(on, "A join with LATERAL TABLE takes ON TRUE only")
    inner = lateral.this.expressions if isinstance(lateral.this, exp.Anonymous) else []
    call = inner[0] if len(inner) == 1 and lateral.this.name.upper() == "TABLE" else None
    if not isinstance(call, exp.Anonymous):
        raise e.at(lateral, "LATERAL takes TABLE(function(...))", "LATERAL")
    function = catalog.lookup_function(str(call.this))
    if function is None or getattr(function, "kind", "") != "table":
        raise e.at(call, f"No table function found: {call.this!s}")
    exprs = ExpressionConverter(
        e, left.get_schema().names, frozenset(), catalog.lookup_function, scopes
    )
    args = [exprs.convert(a) for a in call.expressions]
    table_alias = lateral.args.get("alias")
    alias = table_alias.name if table_alias is not None else str(call.this)
    declared = [c.name for c in table_alias.columns] if table_alias is not None else []
    own = declared or list(function.result_type.field_names())
    used = set(left.get_schema().names)
    names = {n: unique_name(n, used) for n in own}
    scopes[alias] = names
    aliased = function(*args).alias(*names.values())
    if outer:
        return e.run(join, lambda: left.left_outer_join_lateral(aliased))
    return e.run(join, lambda: left.join_lateral(aliased))


def _unnest(
    e: SqlErrors,
    catalog: JoinCatalog,
    left: Table,
    scopes: dict[str, dict[str, str]],
    join: exp.Join,
    outer: bool,
) -> Table:
    """``CROSS JOIN UNNEST(a) [WITH ORDINALITY] [AS t(x[, n])]`` (``LEFT JOIN ... ON TRUE``
    keeps a row whose collection is empty or NULL): a correlate with ``unnest``."""
    node = join.this
    on = join.args.get("on")
    if on is not None and not (isinstance(on, exp.Boolean) and on.this):
        raise e.at(on, "A join with UNNEST takes ON TRUE only")
    if len(node.expressions) != 1:
        raise e.at(node, "UNNEST takes one ARRAY, MAP or MULTISET here", "UNNEST")
    exprs = ExpressionConverter(
        e, left.get_schema().names, frozenset(), catalog.lookup_function, scopes
    )
    argument = exprs.convert(node.expressions[0])
    table_alias = node.args.get("alias")
    declared = [c.name for c in table_alias.columns] if table_alias is not None else []
    offset = node.args.get("offset")
    ordinality = offset is not None and offset is not False
    if isinstance(offset, exp.Identifier) and declared:
        declared.append(offset.name)

    def build() -> Table:
        collection = resolve(argument, left.plan.columns).data_type
        function = unnest_function(collection, ordinality, declared)
        used = set(left.get_schema().names)
        names = {n: unique_name(n, used) for n in function.result_type.field_names()}
        scopes[table_alias.name if table_alias is not None else "UNNEST"] = names
        call = function(argument).alias(*names.values())
        return left.left_outer_join_lateral(call) if outer else left.join_lateral(call)

    return e.run(node, build)
