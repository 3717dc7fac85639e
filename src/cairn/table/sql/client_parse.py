"""The SQL client's statements as words: ``SHOW ...``, ``USE ...``, ``RESET``, ``LOAD``/
``UNLOAD MODULE`` and the head of ``EXPLAIN``, which sqlglot does not parse.

Invariant: pure reading of the text — nothing is looked up; a statement that starts with one
of these verbs is either read whole into a ``ClientStatement`` or refused with
``SqlParserError`` naming the word where it went wrong and its line and column; any other
statement gives None (sqlglot parses it). Each name keeps its offset, so a later error about
it (no such table) points at it.

>>> s = parse_client_statement("SHOW TABLES NOT LIKE 'a%'")
>>> s.verb, s.like, s.not_like
('SHOW TABLES', 'a%', True)
>>> parse_client_statement("SHOW COLUMNS FROM `t`").names
(('t', 18),)
>>> parse_client_statement("EXPLAIN PLAN FOR SELECT 1").offset
17
>>> parse_client_statement("SELECT 1") is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cairn.table.sql.errors import SqlParserError, position_of

__all__ = ["EXPLAIN_DETAILS", "ClientStatement", "parse_client_statement"]

#: Flink's ``ExplainDetail`` names ``EXPLAIN`` takes before its statement.
EXPLAIN_DETAILS = ("ESTIMATED_COST", "CHANGELOG_MODE", "PLAN_ADVICE", "JSON_EXECUTION_PLAN")

_TOKEN = re.compile(
    r"--[^\n]*|/\*.*?\*/|\s+|(?P<t>`(?:[^`]|``)*`|'(?:[^']|'')*'|[A-Za-z_$][\w$]*|\d+|\S)",
    re.DOTALL,
)
_VERBS = ("SHOW", "USE", "RESET", "LOAD", "UNLOAD", "EXPLAIN")
_LISTS = ("CATALOGS", "DATABASES", "TABLES", "VIEWS", "FUNCTIONS", "JOBS", "MODULES")


@dataclass(frozen=True)
class ClientStatement:
    """One client statement: ``verb`` its words (``SHOW CREATE TABLE``, ``USE CATALOG``,
    ``LOAD MODULE``...), ``names`` each name it gives with its offset (a qualified name's
    parts in order), ``like`` its ``[NOT] LIKE`` pattern, ``key`` ``RESET``'s key, ``details``
    and ``offset`` ``EXPLAIN``'s details and where its statement starts."""

    verb: str
    start: int = 0
    names: tuple[tuple[str, int], ...] = ()
    like: str | None = None
    not_like: bool = False
    ilike: bool = False
    key: str | None = None
    details: tuple[str, ...] = ()
    offset: int = 0


class _Words:
    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = [(m.group("t"), m.start()) for m in _TOKEN.finditer(sql) if m.group("t")]
        while self.tokens and self.tokens[-1][0] == ";":
            self.tokens.pop()
        self.i = 0

    def peek(self, ahead: int = 0) -> str:
        i = self.i + ahead
        return self.tokens[i][0].upper() if i < len(self.tokens) else ""

    def at(self) -> int:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else len(self.sql.rstrip())

    def take(self, *words: str) -> bool:
        if all(self.peek(n) == w for n, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def error(self, message: str) -> SqlParserError:
        found = f'"{self.tokens[self.i][0].upper()}"' if self.i < len(self.tokens) else '"<EOF>"'
        line, column = position_of(self.sql, self.at())
        return SqlParserError(
            f"SQL parse failed. Encountered {found} at line {line}, column {column}. {message}",
            line,
            column,
        )

    def name(self, what: str) -> tuple[tuple[str, int], ...]:
        parts: list[tuple[str, int]] = []
        while True:
            if self.i >= len(self.tokens) or not re.match(r"[`A-Za-z_$]", self.tokens[self.i][0]):
                raise self.error(f"Expected {what}")
            text, at = self.tokens[self.i]
            parts.append((text[1:-1].replace("``", "`") if text[0] == "`" else text, at))
            self.i += 1
            if not self.take("."):
                return tuple(parts)

    def string(self, what: str) -> str:
        if self.i >= len(self.tokens) or not self.tokens[self.i][0].startswith("'"):
            raise self.error(f"Expected {what} as a string: '...'")
        text = self.tokens[self.i][0]
        self.i += 1
        return text[1:-1].replace("''", "'")

    def end(self, usage: str) -> None:
        if self.i < len(self.tokens):
            raise self.error(f"Expected the end of the statement: {usage}")


def parse_client_statement(sql: str) -> ClientStatement | None:
    """The client statement ``sql`` is, or None when it starts with another verb."""
    words = _Words(sql)
    verb = words.peek()
    if verb not in _VERBS or (verb in ("LOAD", "UNLOAD") and words.peek(1) != "MODULE"):
        return None
    start = words.at()
    words.i += 1
    if verb == "EXPLAIN":
        return _explain(words, start)
    if verb == "RESET":
        key = words.string("the key") if words.i < len(words.tokens) else None
        words.end("RESET ['key']")
        return ClientStatement("RESET", start, key=key)
    if verb in ("LOAD", "UNLOAD"):
        words.i += 1
        names = words.name("a module name")
        if verb == "LOAD" and words.peek() == "WITH":
            words.i = len(words.tokens)  # options of a module Cairn will refuse by its name
        words.end(f"{verb} MODULE name")
        return ClientStatement(f"{verb} MODULE", start, names)
    if verb == "USE":
        if words.take("CATALOG"):
            names = words.name("a catalog name")
            words.end("USE CATALOG name")
            return ClientStatement("USE CATALOG", start, names)
        if words.peek() == "MODULES":
            raise words.error("USE MODULES is not supported: Cairn has the module core only")
        names = words.name("a database name: USE [catalog.]database")
        words.end("USE [catalog.]database")
        return ClientStatement("USE", start, names)
    return _show(words, start)


def _show(words: _Words, start: int) -> ClientStatement:
    if words.take("CURRENT"):
        for what in ("CATALOG", "DATABASE"):
            if words.take(what):
                words.end(f"SHOW CURRENT {what}")
                return ClientStatement(f"SHOW CURRENT {what}", start)
        raise words.error("Expected SHOW CURRENT CATALOG or SHOW CURRENT DATABASE")
    if words.take("CREATE"):
        for what in ("TABLE", "VIEW"):
            if words.take(what):
                names = words.name(f"a {what.lower()} name")
                words.end(f"SHOW CREATE {what} name")
                return ClientStatement(f"SHOW CREATE {what}", start, names)
        raise words.error("Cairn shows SHOW CREATE TABLE and SHOW CREATE VIEW")
    if words.take("COLUMNS"):
        if not (words.take("FROM") or words.take("IN")):
            raise words.error("Expected FROM or IN: SHOW COLUMNS FROM t")
        names = words.name("a table name")
        return _like(words, ClientStatement("SHOW COLUMNS", start, names))
    full = words.take("FULL")
    user = not full and words.take("USER")
    listed = words.peek()
    if listed not in _LISTS or (full and listed != "MODULES") or (user and listed != "FUNCTIONS"):
        raise words.error(
            "Cairn shows CATALOGS, DATABASES, TABLES, VIEWS, [USER] FUNCTIONS, JOBS,"
            " [FULL] MODULES, COLUMNS, CREATE TABLE/VIEW and CURRENT CATALOG/DATABASE"
        )
    words.i += 1
    verb = f"SHOW {'FULL ' if full else ''}{'USER ' if user else ''}{listed}"
    if listed in ("JOBS", "MODULES"):
        words.end(verb)
        return ClientStatement(verb, start)
    scope: tuple[tuple[str, int], ...] = ()
    if listed != "CATALOGS" and (words.take("FROM") or words.take("IN")):
        scope = words.name("a catalog name" if listed == "DATABASES" else "a database name")
    return _like(words, ClientStatement(verb, start, scope))


def _like(words: _Words, statement: ClientStatement) -> ClientStatement:
    """``statement`` with its ``[NOT] LIKE|ILIKE 'pattern'``, if it ends with one."""
    not_like = words.take("NOT")
    if words.peek() in ("LIKE", "ILIKE"):
        ilike = words.peek() == "ILIKE"
        words.i += 1
        pattern = words.string("the LIKE pattern")
        words.end(f"{statement.verb} [NOT] LIKE 'pattern'")
        return ClientStatement(
            statement.verb,
            statement.start,
            statement.names,
            like=pattern,
            not_like=not_like,
            ilike=ilike,
        )
    if not_like:
        raise words.error("Expected LIKE after NOT")
    words.end(f"{statement.verb} [[NOT] LIKE 'pattern']")
    return statement


def _explain(words: _Words, start: int) -> ClientStatement:
    """``EXPLAIN [PLAN FOR | detail[, detail]*] statement``."""
    details: list[str] = []
    if not words.take("PLAN", "FOR"):
        while words.peek() in EXPLAIN_DETAILS:
            details.append(words.peek())
            words.i += 1
            if not words.take(","):
                break
        if details and words.peek(-1) == ",":
            raise words.error(f"Expected an explain detail: {', '.join(EXPLAIN_DETAILS)}")
    if words.i >= len(words.tokens):
        raise words.error("EXPLAIN takes a query, an INSERT or a STATEMENT SET")
    return ClientStatement("EXPLAIN", start, details=tuple(details), offset=words.at())
