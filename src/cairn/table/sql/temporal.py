"""``JOIN t FOR SYSTEM_TIME AS OF l.time [AS a] ON ...`` in SQL: the temporal join's relation.

Invariant: the right side is found by name (a lookup table of a ``jdbc``/``filesystem``
connector first, else a table or view), its columns renamed as any join's right side
(``id`` → ``id0``) and learnt by ``scopes``; what to build is
``cairn.table.temporal_planner``'s choice (a lookup join on a processing-time attribute, an
event-time temporal join on a rowtime attribute), and its refusals get the join's position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqlglot import exp

from cairn.table.lookup_source import LookupTable
from cairn.table.plan import PlanNode
from cairn.table.schema import Schema
from cairn.table.sql.errors import SqlErrors
from cairn.table.sql.expressions import ExpressionConverter
from cairn.table.sql.relation_names import table_name, unique_name
from cairn.table.table import Table
from cairn.table.temporal_planner import lookup_join, temporal_join
from cairn.table.time_attributes import is_proctime

__all__ = ["TemporalCatalog", "temporal_relation"]


class TemporalCatalog(Protocol):
    """What a temporal join asks of the catalog."""

    def lookup_table(self, name: str) -> Table | None: ...

    def lookup_function(self, name: str) -> Any | None: ...

    def lookup_source(self, name: str) -> LookupTable | None: ...

    def declared_schema(self, name: str) -> Schema | None: ...


def temporal_relation(
    errors: SqlErrors,
    catalog: TemporalCatalog,
    left: Table,
    scopes: dict[str, dict[str, str]],
    join: exp.Join,
    version: exp.Expr,
    side: str,
) -> Table:
    """``left`` joined with the versioned or lookup table ``join`` names."""
    e = errors
    if side not in ("", "LEFT") or join.kind:
        raise e.at(join, "A temporal join is an INNER or a LEFT join", side or join.kind)
    as_of = version.args.get("expression")
    if version.args.get("kind") != "AS OF" or not isinstance(as_of, exp.Column):
        raise e.at(
            version,
            "Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left"
            " table's time attribute field",
        )
    table_node = join.this
    assert isinstance(table_node, exp.Table)
    name = table_name(table_node, e.sql)
    alias = table_node.alias or name
    if alias in scopes:
        raise e.at(table_node, f"Duplicate relation name '{alias}' in FROM clause")
    left_names = left.get_schema().names
    time_column = ExpressionConverter(e, left_names, frozenset(), None, scopes).convert(as_of)
    if time_column.kind != "field":
        raise e.at(as_of, "FOR SYSTEM_TIME AS OF takes a time attribute of the left table")
    columns = left.get_schema()
    on_proctime = is_proctime(columns.types[columns.index(time_column.name)])
    # a table both scanned and looked up (filesystem): the time attribute chooses, as in Flink
    lookup = catalog.lookup_source(name) if on_proctime else None
    right = catalog.lookup_table(name) if lookup is None else None
    if lookup is not None:
        right_names = lookup.columns.names
    elif right is not None:
        right_names = right.get_schema().names
    else:
        raise e.at(table_node, f"Object '{name}' not found")
    used = set(left_names)
    names = {n: unique_name(n, used) for n in right_names}
    renamed = any(n != m for n, m in names.items())
    scopes[alias] = names
    on = join.args.get("on")
    if on is None:
        raise e.at(join, "A temporal join needs ON with an equality on the table's key")
    exprs = ExpressionConverter(
        e, [*left_names, *names.values()], frozenset(), catalog.lookup_function, scopes
    )
    predicate = exprs.convert(on)
    join_type = "LEFT" if side == "LEFT" else "INNER"
    build: Callable[[], PlanNode]
    if lookup is not None:
        table = lookup.renamed(list(names.values())) if renamed else lookup
        build = lambda: lookup_join(left.plan, table, predicate, join_type, time_column.name)  # noqa: E731
    else:
        assert right is not None
        versioned = right.alias(*names.values()) if renamed else right
        declared = catalog.declared_schema(name)
        key = [names[k] for k in declared.primary_key] if declared is not None else []
        build = lambda: temporal_join(  # noqa: E731
            left.plan, versioned.plan, predicate, join_type, time_column.name, name, key
        )
    return e.run(join, lambda: Table(build(), left.context))
