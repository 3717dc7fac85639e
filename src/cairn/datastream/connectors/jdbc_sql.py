"""From JDBC's terms to psycopg's: the statement's ``?`` placeholders, the connection URL,
and a record's parameters. Pure functions, no connection; and ``JdbcWriteConfig``, the one
frozen value a sink hands its writers and committer (``jdbc_postgres``), so that they never
import the sink (``jdbc``) that creates them.

Invariant: a translated statement has exactly ``parameters`` ``%s`` placeholders, one per
``?`` outside string literals, quoted identifiers and comments; every other ``%`` is
escaped, so psycopg sees the statement the user wrote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["JdbcWriteConfig", "Statement", "postgres_conninfo", "record_parameters"]

_POSTGRES_DRIVERS = frozenset({None, "", "org.postgresql.Driver"})
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_NAME = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
# A plain INSERT of placeholders into named columns: what COPY does too, six times faster.
_PLAIN_INSERT = re.compile(
    rf"\s*INSERT\s+INTO\s+(?P<table>{_NAME}(?:\s*\.\s*{_NAME})?)"
    rf"\s*\((?P<columns>\s*{_NAME}(?:\s*,\s*{_NAME})*\s*)\)"
    r"\s*VALUES\s*\(\s*\?(?:\s*,\s*\?)*\s*\)\s*;?\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Statement:
    """``sql`` in psycopg's placeholder style, and how many parameters it takes.

    >>> Statement.parse("UPDATE t SET b = ? WHERE a = ?")
    Statement(sql='UPDATE t SET b = %s WHERE a = %s', parameters=2, copy=None)
    >>> print(Statement.parse("UPDATE t SET s = '?%' || ? WHERE \\"c?\\" = ? -- why?").sql)
    UPDATE t SET s = '?%%' || %s WHERE "c?" = %s -- why?
    >>> Statement.parse("SELECT $$?$$, doc ?? 'k', ? /* ? */").parameters
    1

    ``copy`` is the ``COPY ... FROM STDIN`` that writes the same rows when the statement is
    a plain ``INSERT INTO table (columns) VALUES (?, ...)`` (nothing else: no expressions,
    no ``ON CONFLICT``, no ``RETURNING``), else ``None``:

    >>> Statement.parse('INSERT INTO s."T" (a, "b c") VALUES (?, ?);').copy
    'COPY s."T" (a, "b c") FROM STDIN'
    >>> Statement.parse("INSERT INTO t (a) VALUES (?) ON CONFLICT (a) DO NOTHING").copy is None
    True
    """

    sql: str
    parameters: int
    copy: str | None = None

    @staticmethod
    def parse(sql: str) -> Statement:
        if not isinstance(sql, str) or not sql.strip():
            raise ValueError(f"the JDBC sink needs an SQL statement, got {sql!r}")
        out: list[str] = []
        count = 0
        i, n = 0, len(sql)
        while i < n:
            c = sql[i]
            if c in "'\"":  # a literal or quoted identifier; a doubled quote stays inside
                end = i + 1
                while end < n:
                    if sql[end] == c:
                        if end + 1 < n and sql[end + 1] == c:
                            end += 2
                            continue
                        break
                    end += 1
                out.append(sql[i : end + 1].replace("%", "%%"))
                i = end + 1
            elif sql.startswith("--", i):
                end = sql.find("\n", i)
                end = n if end < 0 else end
                out.append(sql[i:end].replace("%", "%%"))
                i = end
            elif sql.startswith("/*", i):
                end = sql.find("*/", i + 2)
                end = n if end < 0 else end + 2
                out.append(sql[i:end].replace("%", "%%"))
                i = end
            elif c == "$" and (m := _DOLLAR_TAG.match(sql, i)) is not None:
                tag = m.group(0)
                end = sql.find(tag, m.end())
                end = n if end < 0 else end + len(tag)
                out.append(sql[i:end].replace("%", "%%"))
                i = end
            elif c == "?":
                if sql.startswith("??", i):  # pgjdbc's escape of PostgreSQL's ? operator
                    out.append("?")
                    i += 2
                else:
                    out.append("%s")
                    count += 1
                    i += 1
            elif c == "%":
                out.append("%%")
                i += 1
            else:
                out.append(c)
                i += 1
        copy = None
        plain = _PLAIN_INSERT.fullmatch(sql)
        if plain is not None and plain.group("columns").count(",") + 1 == count:
            copy = f"COPY {plain.group('table')} ({plain.group('columns').strip()}) FROM STDIN"
        return Statement("".join(out), count, copy)


def postgres_conninfo(url: str, driver_name: str | None = None) -> str:
    """The libpq URI of a ``jdbc:postgresql://`` URL (``postgresql://`` is taken as is).

    >>> postgres_conninfo("jdbc:postgresql://db.local:5433/shop?sslmode=require")
    'postgresql://db.local:5433/shop?sslmode=require'
    >>> postgres_conninfo("jdbc:mysql://db/shop")
    Traceback (most recent call last):
    ...
    ValueError: the JDBC sink supports PostgreSQL only (jdbc:postgresql://host:port/database), got 'jdbc:mysql://db/shop'
    """
    if driver_name not in _POSTGRES_DRIVERS:
        raise ValueError(
            f"the JDBC sink supports PostgreSQL only (driver org.postgresql.Driver), "
            f"got driver {driver_name!r}"
        )
    if not isinstance(url, str):
        raise TypeError(f"the JDBC URL must be a string, got {type(url).__name__}")
    rest = url[len("jdbc:") :] if url.startswith("jdbc:") else url
    if not rest.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            "the JDBC sink supports PostgreSQL only (jdbc:postgresql://host:port/database), "
            f"got {url!r}"
        )
    parts = urlsplit(rest)
    if not parts.hostname and "host=" not in parts.query:
        raise ValueError(f"the JDBC URL names no host: {url!r}")
    return rest


def record_parameters(
    record: Any, parameters: int, field_names: Sequence[str] | None = None
) -> tuple[Any, ...]:
    """The statement's parameters from one record: a ``Row``, tuple or list in order, a
    dict by ``field_names``, any other value as the single parameter.

    >>> record_parameters(("a", 1), 2), record_parameters(7, 1)
    (('a', 1), (7,))
    >>> record_parameters({"n": 1, "w": "a"}, 2, ["w", "n"])
    ('a', 1)
    >>> record_parameters(("a",), 2)
    Traceback (most recent call last):
    ...
    ValueError: the JDBC statement takes 2 parameters, the record has 1: ('a',)
    """
    if isinstance(record, dict):
        if field_names is None:
            raise ValueError(
                "a dict record needs the field names of a Types.ROW_NAMED type info to be "
                f"matched with the statement's placeholders: {record!r:.200}"
            )
        try:
            values = tuple(record[name] for name in field_names)
        except KeyError as exc:
            raise ValueError(f"the record has no field {exc.args[0]!r}: {record!r:.200}") from None
    elif isinstance(record, tuple | list) or hasattr(record, "get_row_kind"):
        values = tuple(record)
    else:
        values = (record,)
    if len(values) != parameters:
        raise ValueError(
            f"the JDBC statement takes {parameters} parameters, the record has {len(values)}: "
            f"{record!r:.200}"
        )
    return values


@dataclass(frozen=True)
class JdbcWriteConfig:
    """What a JDBC sink's writers and committer use: where to connect, the statement, the
    batching and retries; with exactly once also the prepared transactions' prefix and the
    commit options (``transaction_prefix`` is ``None`` for an at-least-once sink)."""

    conninfo: str
    user_name: str | None
    password: str | None = field(repr=False)
    statement: Statement
    field_names: Sequence[str] | None
    batch_size: int
    batch_interval_ms: int
    max_retries: int
    transaction_prefix: str | None = None
    recovered_and_rollback: bool = True
    max_commit_attempts: int = 3
