"""``WITH name [(column, ...)] AS (query) [, ...] query``: common table expressions.

Invariant: a CTE is a view visible only to the query it heads — each one is converted in
order, sees the CTEs before it (and the catalog's tables, which it hides when named alike),
and is gone once the query is planned; nothing is registered in the catalog. A CTE is
planned where it is used, as Flink inlines it, so a CTE read twice is two reads of its input.

>>> from cairn.table import EnvironmentSettings, TableEnvironment
>>> t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
>>> t_env.sql_query("WITH t (a) AS (SELECT 1) SELECT a + 1 AS b FROM t").get_schema().names
['b']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from sqlglot import exp

from cairn.table.lookup_source import LookupTable
from cairn.table.schema import Schema
from cairn.table.sql.errors import SqlErrors
from cairn.table.table import Table
from cairn.table.types import DataType

__all__ = ["CteCatalog", "with_clause_catalog"]


class SqlCatalog(Protocol):
    """What a query asks of its catalog (``convert.SqlCatalog``, which ``CteCatalog`` is)."""

    def lookup_table(self, name: str) -> Table | None: ...

    def lookup_function(self, name: str) -> Any | None: ...

    def lookup_source(self, name: str) -> LookupTable | None: ...

    def declared_schema(self, name: str) -> Schema | None: ...

    def from_elements(
        self,
        elements: Iterable[Any],
        schema: DataType | Sequence[str] | None = None,
        verify_schema: bool = True,
    ) -> Table: ...


class CteCatalog:
    """The catalog a query's body sees: its CTEs over the outer catalog."""

    def __init__(self, outer: SqlCatalog, tables: dict[str, Table]) -> None:
        self._outer = outer
        self._tables = tables

    def lookup_table(self, name: str) -> Table | None:
        found = self._tables.get(name)
        return found if found is not None else self._outer.lookup_table(name)

    def lookup_function(self, name: str) -> Any | None:
        return self._outer.lookup_function(name)

    def lookup_source(self, name: str) -> LookupTable | None:
        return None if name in self._tables else self._outer.lookup_source(name)

    def declared_schema(self, name: str) -> Schema | None:
        return None if name in self._tables else self._outer.declared_schema(name)

    def from_elements(
        self,
        elements: Iterable[Any],
        schema: DataType | Sequence[str] | None = None,
        verify_schema: bool = True,
    ) -> Table:
        return self._outer.from_elements(elements, schema, verify_schema)


def with_clause_catalog(
    clause: exp.With,
    catalog: SqlCatalog,
    convert: Callable[[exp.Expr, SqlCatalog], Table],
    errors: SqlErrors,
) -> CteCatalog:
    """The catalog of the query ``clause`` heads: each CTE converted (by ``convert``, with the
    CTEs before it in scope) and renamed by its column list."""
    if clause.args.get("recursive"):
        raise errors.at(clause, "WITH RECURSIVE is not supported", "RECURSIVE")
    tables: dict[str, Table] = {}
    for cte in clause.expressions:
        alias = cte.args.get("alias")
        name = alias.name if alias is not None else ""
        if name in tables:
            raise errors.at(cte, f"Duplicate name '{name}' in WITH clause")
        table = convert(cte.this, CteCatalog(catalog, dict(tables)))
        columns = [c.name for c in alias.columns] if alias is not None else []
        if columns:
            width = len(table.get_schema().names)
            if len(columns) != width:
                raise errors.at(
                    cte,
                    f"List of column aliases must have same degree as table; table has {width}"
                    f" columns, whereas alias list has {len(columns)} columns",
                )
            table = table.alias(*columns)
        tables[name] = table
    return CteCatalog(catalog, tables)
