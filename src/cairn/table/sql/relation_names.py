"""The names of relations in a query: a table's object name in the default database, and
the names a join gives the right side's columns.

Invariant: pure; a name qualified by another catalog or database than the default one is
not found (Cairn has one in-memory catalog), and a right column named like one already in
scope is renamed as Calcite does (``id`` → ``id0``, ``id1``...).

>>> unique_name("id", {"id", "id0"})
'id1'
"""

from __future__ import annotations

from sqlglot import exp

from cairn.table.sql.errors import SqlErrors

__all__ = ["DEFAULT_PATH", "table_name", "unique_name"]

DEFAULT_PATH = ("default_catalog", "default_database")


def table_name(node: exp.Table, sql: str) -> str:
    """The object name of ``[catalog.][database.]name`` in the default database."""
    parts = [p.name for p in node.parts]
    if len(parts) > 1 and tuple(parts[:-1]) != DEFAULT_PATH[-(len(parts) - 1) :]:
        raise SqlErrors(sql).at(node, f"Object '{'.'.join(parts)}' not found")
    return parts[-1]


def unique_name(name: str, used: set[str]) -> str:
    """``name``, or Calcite's uniquified ``name0``, ``name1``... when it is taken (the
    result is added to ``used``)."""
    unique = name
    suffix = 0
    while unique in used:
        unique = f"{name}{suffix}"
        suffix += 1
    used.add(unique)
    return unique
