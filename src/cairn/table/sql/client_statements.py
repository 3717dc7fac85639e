"""Running the SQL client's statements: ``SHOW``, ``EXPLAIN``, ``USE``, ``RESET``,
``LOAD``/``UNLOAD MODULE``.

Invariant: only ``RESET`` changes anything (the table config's keys back to what they were
before ``SET``); ``USE`` accepts Cairn's one catalog and database and refuses any other
naming it, as ``LOAD``/``UNLOAD MODULE`` accept nothing but report Flink's reason (``core`` is
loaded and built in; no other module exists). ``EXPLAIN`` plans its statement through
``plan`` (``statements``), so its errors point into the ``EXPLAIN`` text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from cairn.table.analysis import Columns
from cairn.table.plan import ExplainDetail
from cairn.table.sql.client_parse import ClientStatement
from cairn.table.sql.errors import SqlValidationError, position_of
from cairn.table.sql.explain import sink_line, with_sinks
from cairn.table.sql.relation_names import DEFAULT_PATH
from cairn.table.sql.show import ShowCatalog, show
from cairn.table.table import Table
from cairn.table.types import DataTypes

__all__ = ["ClientEnvironment", "run_client_statement"]


class _Config(Protocol):
    def reset(self, key: str | None = None) -> None: ...


class ClientEnvironment(ShowCatalog, Protocol):
    """What the client's statements ask of the table environment."""

    def get_config(self) -> Any: ...


#: ``EXPLAIN``'s statement planned: each (query's table, the sink it inserts into or None).
Planner = Callable[[str], Sequence[tuple[Table, str | None]]]


def run_client_statement(
    env: ClientEnvironment,
    statement: ClientStatement,
    sql: str,
    plan: Planner,
    functions: list[str],
) -> tuple[Columns, list[tuple[Any, ...]]] | None:
    """Run ``statement``: its result's columns and rows, or None for Flink's ``OK``."""
    verb = statement.verb
    if verb.startswith("SHOW"):
        return show(env, statement, sql, functions)
    if verb == "EXPLAIN":
        return Columns.of([("result", DataTypes.STRING())]), [(_explain(statement, sql, plan),)]
    if verb == "RESET":
        env.get_config().reset(statement.key)
        return None
    if verb == "USE CATALOG":
        ((name, at),) = statement.names[-1:]
        if len(statement.names) != 1 or name != DEFAULT_PATH[0]:
            raise _error(sql, at, f"A catalog with name [{_joined(statement)}] does not exist.")
        return None
    if verb == "USE":
        given = tuple(n for n, _ in statement.names)
        if len(given) > 2 or given != DEFAULT_PATH[-len(given) :]:
            raise _error(
                sql,
                statement.names[0][1],
                f"A database with name [{_joined(statement)}] does not exist in the catalog:"
                f" [{DEFAULT_PATH[0]}].",
            )
        return None
    name, at = statement.names[0]
    if verb == "LOAD MODULE":
        if name.lower() == "core":
            raise _error(sql, at, "A module with name 'core' already exists")
        raise _error(
            sql,
            at,
            f"Could not find a module named '{name}': Cairn's functions are the module core,"
            " and no other module exists",
        )
    if name.lower() != "core":
        raise _error(sql, at, f"No module with name '{name}' exists")
    raise _error(sql, at, "Cairn cannot unload the module core: its functions are built in")


def _explain(statement: ClientStatement, sql: str, plan: Planner) -> str:
    # the words before the statement are blanked, so its errors keep their place
    inner = re.sub(r"[^\n]", " ", sql[: statement.offset]) + sql[statement.offset :]
    if re.match(r"STATEMENT\s+SET\b", sql[statement.offset :], re.I):
        # EXPLAIN ... STATEMENT SET BEGIN: EXECUTE written over the 8 characters before it
        # (at least "EXPLAIN "), so the statement keeps its offsets
        head = inner[: statement.offset - 8]
        inner = head + "EXECUTE " + sql[statement.offset :]
    planned = plan(inner)
    details = [ExplainDetail[d] for d in statement.details]
    texts = [
        (
            table.explain(*details),
            None if sink is None else sink_line(sink, table.get_schema().names),
        )
        for table, sink in planned
    ]
    return with_sinks(texts, ExplainDetail.PLAN_ADVICE in details)


def _joined(statement: ClientStatement) -> str:
    return ".".join(n for n, _ in statement.names)


def _error(sql: str, offset: int, message: str) -> SqlValidationError:
    line, column = position_of(sql, offset)
    return SqlValidationError(message, line, column)
