"""``cairn chaos`` and ``JdbcSink``: the statement inserts into a copy of its table in a
schema of the run's own (``CREATE TABLE <schema>.<table> (LIKE <table> INCLUDING ALL)``, so
keys and constraints an upsert needs are there), exactly-once transactions get a prefix of
the run's own, and what the sink committed is that table's rows.

Invariant: a redirected sink never writes the user's table nor touches the user's prepared
transactions: its statement names the run's schema, its transaction names the run's prefix;
the rows read are those committed (prepared transactions are invisible to the reading
session); ``cleanup`` rolls back what the run left prepared and drops the schema.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

from cairn.api.connectors import Sink
from cairn.cli.chaos_sinks import ChaosSinkError, Place, Redirection
from cairn.cli.chaos_verdict import Record
from cairn.datastream.connectors.jdbc import ExactlyOnceJdbcSink, JdbcSink
from cairn.datastream.connectors.jdbc_sql import JdbcWriteConfig, Statement

__all__ = ["redirect", "retarget"]

_NAME = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
_INSERT = re.compile(
    rf"^\s*INSERT\s+INTO\s+(?P<table>(?:{_NAME}\s*\.\s*)?(?P<last>{_NAME}))", re.IGNORECASE
)


def retarget(statement: Statement, schema: str) -> tuple[Statement, str, str] | None:
    """``statement`` inserting into the table of the same name in ``schema``, the table it
    inserted into and the new one; None if it is not an ``INSERT INTO <table>``.

    >>> s = Statement.parse("INSERT INTO shop.totals (c, n) VALUES (?, ?)")
    >>> moved, table, target = retarget(s, "run_1")
    >>> moved.sql
    'INSERT INTO "run_1".totals (c, n) VALUES (%s, %s)'
    >>> moved.copy, table, target
    ('COPY "run_1".totals (c, n) FROM STDIN', 'shop.totals', '"run_1".totals')
    >>> retarget(Statement.parse("UPDATE t SET n = ?"), "run_1") is None
    True
    """
    match = _INSERT.match(statement.sql)
    if match is None:
        return None
    table, target = match["table"], f'"{schema}".{match["last"]}'
    sql = statement.sql[: match.start("table")] + target + statement.sql[match.end("table") :]
    moved_copy = None
    if statement.copy is not None:
        moved_copy = statement.copy.replace(table, target, 1)
    return replace(statement, sql=sql, copy=moved_copy), table, target


def redirect(sink: Sink, place: Place) -> Redirection | None:
    """A copy of a ``JdbcSink`` inserting into ``<place.name>.<its table>`` (created like
    the table); None for other sinks."""
    if not isinstance(sink, JdbcSink):
        return None
    moved_statement = retarget(sink.statement, place.name)
    if moved_statement is None:
        raise ChaosSinkError(
            f"a JdbcSink whose statement is not an INSERT INTO a table: {sink.statement.sql!r}"
        )
    statement, table, target = moved_statement
    moved = copy.copy(sink)
    moved.statement = statement
    prefix = None
    if isinstance(moved, ExactlyOnceJdbcSink):
        prefix = moved.transaction_prefix = f"{moved.transaction_prefix}_{place.name}"
    config = moved.write_config()
    with _connect(config) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{place.name}"')
        conn.execute(f"CREATE TABLE IF NOT EXISTS {target} (LIKE {table} INCLUDING ALL)")

    def read() -> list[Record]:
        return _read_rows(config, target)

    def cleanup() -> None:
        with _connect(config) as conn:
            if prefix is not None:
                gids = conn.execute(
                    "SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, %s)",
                    (f"cairn:{prefix}:",),
                ).fetchall()
                for (gid,) in gids:
                    conn.execute("ROLLBACK PREPARED %s", (gid,))
            conn.execute(f'DROP SCHEMA IF EXISTS "{place.name}" CASCADE')

    return Redirection(moved, target, read, cleanup)


def _connect(config: JdbcWriteConfig) -> Any:
    from cairn.datastream.connectors.jdbc_postgres import JdbcSinkError, connect

    try:
        return connect(config, autocommit=True)
    except JdbcSinkError as error:
        raise ChaosSinkError(str(error)) from error


def _read_rows(config: JdbcWriteConfig, target: str) -> list[Record]:
    """The committed rows of ``target`` as ``a,b,c`` text, stamped with their commit time
    when the server tracks it (``track_commit_timestamp``), else 0 (unknown)."""
    with _connect(config) as conn:
        timed = conn.execute("SHOW track_commit_timestamp").fetchone()[0] == "on"
        at = "extract(epoch FROM pg_xact_commit_timestamp(xmin))" if timed else "0"
        rows = conn.execute(f"SELECT {at}, * FROM {target} ORDER BY 1").fetchall()
    return [
        Record(
            ",".join("" if v is None else str(v) for v in row[1:]),
            float(row[0] or 0),
            f"{target} row {n}",
        )
        for n, row in enumerate(rows, 1)
    ]
