"""Flink SQL text to sqlglot trees, with Flink's parse errors.

Invariant: text that is not one Flink SQL statement raises ``SqlParserError`` naming the
token where parsing stopped and its line and column; sqlglot's silent fallback of an unknown
statement to an opaque ``Command`` is refused here, so nothing unparsed reaches the converter.

>>> parse_statement("SELECT a FROM t").sql()
'SELECT a FROM t'
>>> parse_statement("SELECT FROM t")
Traceback (most recent call last):
...
cairn.table.sql.errors.SqlParserError: SQL parse failed. Encountered "FROM" at line 1, column 8.
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from cairn.table.sql.dialect import Flink, StatementSetBlock
from cairn.table.sql.errors import SqlParserError, position_of

__all__ = ["parse_expression_tree", "parse_statement"]

_DIALECT = Flink()
_STATEMENT_SET = re.compile(r"\s*EXECUTE\s+STATEMENT\s+SET\s+BEGIN\b", re.IGNORECASE)


def _tokens(sql: str) -> list[Token]:
    try:
        return _DIALECT.tokenize(sql)
    except TokenError as e:
        raise SqlParserError(f"SQL parse failed. {e}", 1, 1) from None


def _parse(sql: str, tokens: list[Token], into: type[exp.Expr] | None = None) -> list[exp.Expr]:
    parser = _DIALECT.parser(error_level=ErrorLevel.IMMEDIATE)
    try:
        if into is not None:
            return [e for e in parser.parse_into(into, tokens, sql) if e is not None]
        return [e for e in parser.parse(tokens, sql) if e is not None]
    except ParseError as e:
        token = getattr(parser, "error_token", None)
        offset = token.start if token is not None and token.text else len(sql.rstrip())
        found = f'"{token.text.upper()}"' if token is not None and token.text else '"<EOF>"'
        line, column = position_of(sql, offset)
        detail = e.errors[0]["description"] if e.errors else str(e)
        raise SqlParserError(
            f"SQL parse failed. Encountered {found} at line {line}, column {column}."
            + ("" if detail.startswith("Expected a select item") else f"\n{detail}"),
            line,
            column,
        ) from None


def parse_statement(sql: str) -> exp.Expr:
    """The tree of one statement (a trailing ``;`` is allowed)."""
    opening = _STATEMENT_SET.match(sql)
    if opening is not None:
        return _statement_set(sql, opening.end())
    tokens = _tokens(sql)
    statements = _parse(sql, tokens)
    if len(statements) != 1:
        extra = statements[1] if len(statements) > 1 else None
        raise SqlParserError(
            "SQL parse failed. Expected one statement, got "
            f"{len(statements)}{': ' + extra.sql()[:40] if extra is not None else ''}",
            1,
            1,
        )
    _refuse_command(sql, statements[0], tokens[0])
    return statements[0]


def _statement_set(sql: str, begin: int) -> exp.Expr:
    # blanks keep every offset, so errors inside the set name their place in the whole text
    inner = " " * begin + sql[begin:]
    body = _tokens(inner)
    while body and body[-1].token_type == TokenType.SEMICOLON:
        body.pop()
    if not body or body[-1].text.upper() != "END":
        offset = len(sql.rstrip())
        line, column = position_of(sql, offset)
        raise SqlParserError(
            f'SQL parse failed. Encountered "<EOF>" at line {line}, column {column}.'
            " A statement set ends with END;",
            line,
            column,
        )
    inner = inner[: body[-1].start]
    statements = _parse(inner, _tokens(inner))
    for s in statements:
        if not isinstance(s, exp.Insert):
            line, column = position_of(sql, _start(s, begin))
            raise SqlParserError(
                "SQL parse failed. Only INSERT statements can be in a statement set, got"
                f" {s.sql()[:40]!r} at line {line}, column {column}.",
                line,
                column,
            )
    return StatementSetBlock(expressions=statements)


def _start(node: exp.Expr, default: int) -> int:
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    return min(starts) if starts else default


def _refuse_command(sql: str, node: exp.Expr, first: Token) -> None:
    if isinstance(node, exp.Command):
        line, column = position_of(sql, first.start)
        raise SqlParserError(
            f'SQL parse failed. Encountered "{first.text.upper()}" at line {line},'
            f" column {column}: Cairn does not parse this statement: {sql.strip()[:60]!r}",
            line,
            column,
        )


def parse_expression_tree(sql: str) -> exp.Expr:
    """The tree of one scalar expression (``a > 1``, ``ts - INTERVAL '5' SECOND``)."""
    tokens = _tokens(sql)
    (tree,) = _parse(sql, tokens, exp.Condition)
    return tree
