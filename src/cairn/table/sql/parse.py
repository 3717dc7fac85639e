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

from cairn.table.sql.dialect import CompilePlan, ExecutePlan, Flink, StatementSetBlock
from cairn.table.sql.errors import SqlParserError, position_of

__all__ = ["parse_expression_tree", "parse_statement"]

_DIALECT = Flink()
_STATEMENT_SET = re.compile(r"\s*EXECUTE\s+STATEMENT\s+SET\s+BEGIN\b", re.IGNORECASE)
_PLAN = re.compile(r"\s*(COMPILE\s+(AND\s+EXECUTE\s+)?|EXECUTE\s+)PLAN\b", re.IGNORECASE)


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
        return _statement_set(sql, opening.end())[0]
    plan = _PLAN.match(sql)
    if plan is not None:
        return _plan_statement(sql, plan)
    sql = _like_options(sql)
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


_LIKE_OPTIONS = re.compile(r"\bLIKE\s+[\w`.]+\s*\(([^)]*)\)", re.IGNORECASE)
_STRATEGY = re.compile(r"\s(?=(INCLUDING|EXCLUDING|OVERWRITING)\b)", re.IGNORECASE)


def _like_options(sql: str) -> str:
    """``LIKE base (EXCLUDING ALL INCLUDING GENERATED)`` with a comma between the entries
    (Flink separates them by spaces), so they parse as a list; one blank becomes the comma,
    so every offset, and every error's position, stays where it was."""
    match = _LIKE_OPTIONS.search(sql) if sql.lstrip()[:6].upper() == "CREATE" else None
    if match is None:
        return sql
    inner = match.group(1)
    first = inner.strip()
    lead = len(inner) - len(inner.lstrip())
    body = inner[lead:]
    body = body[: len(first)]
    fixed = body[:1] + _STRATEGY.sub(",", body[1:]) if body else body
    start = match.start(1) + lead
    return sql[:start] + fixed + sql[start + len(fixed) :]


def _statement_set(sql: str, begin: int) -> tuple[exp.Expr, list[str]]:
    """The inserts between ``BEGIN`` (ending at ``begin``) and ``END``, and their texts."""
    # blanks keep every offset, so errors inside the set name their place in the whole text
    inner = _blanked(sql, begin)
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
    texts: list[str] = []
    chunk: list[Token] = []
    for token in [*body[:-1], None]:
        if token is None or token.token_type == TokenType.SEMICOLON:
            if chunk:
                texts.append(sql[chunk[0].start : chunk[-1].end + 1])
            chunk = []
        else:
            chunk.append(token)
    return StatementSetBlock(expressions=statements), texts


def _plan_statement(sql: str, opening: re.Match[str]) -> exp.Expr:
    """``EXECUTE PLAN 'f'``, ``COMPILE [AND EXECUTE] PLAN 'f' [IF NOT EXISTS] FOR ...``."""
    # the words matched are left out: sqlglot reads what follows EXECUTE as one opaque string
    tokens = _tokens(_blanked(sql, opening.end()))
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    compiling = opening.group(1).upper().startswith("COMPILE")
    words = " ".join(opening.group(0).split()).upper()
    if not tokens or tokens[0].token_type != TokenType.STRING:
        raise _expected(sql, tokens[0] if tokens else None, f"{words} takes the plan file's path")
    path = exp.Literal.string(tokens[0].text)
    rest = tokens[1:]
    if not compiling:
        if rest:
            raise _expected(sql, rest[0], "EXECUTE PLAN takes only the plan file's path")
        return ExecutePlan(this=path)
    exists = [t.text.upper() for t in rest[:3]] == ["IF", "NOT", "EXISTS"]
    if exists and opening.group(2):
        raise _expected(sql, rest[0], "COMPILE AND EXECUTE PLAN has no IF NOT EXISTS")
    rest = rest[3:] if exists else rest
    if not rest or rest[0].token_type != TokenType.FOR:
        raise _expected(sql, rest[0] if rest else None, f"Expected FOR after {words} 'file'")
    operand = rest[1:]
    texts = [t.text.upper() for t in operand[:3]]
    if texts == ["STATEMENT", "SET", "BEGIN"]:
        block, statements = _statement_set(sql, operand[2].end + 1)
        inserts = block.expressions
    else:
        start = operand[0].start if operand else len(sql.rstrip())
        end = operand[-1].end + 1 if operand else start
        padded = _blanked(sql[:end], start)
        inserts = _parse(padded, _tokens(padded))
        if len(inserts) != 1 or not isinstance(inserts[0], exp.Insert):
            raise _expected(
                sql, operand[0] if operand else None, f"{words} is FOR an INSERT or a STATEMENT SET"
            )
        statements = [sql[start:end]]
    return CompilePlan(
        this=path,
        expressions=inserts,
        texts=[exp.Literal.string(t) for t in statements],
        exists=exists,
        execute=bool(opening.group(2)),
    )


def _blanked(sql: str, start: int) -> str:
    """``sql`` with its first ``start`` characters blanked (line breaks kept)."""
    return re.sub(r"[^\n]", " ", sql[:start]) + sql[start:]


def _expected(sql: str, token: Token | None, message: str) -> SqlParserError:
    offset = token.start if token is not None else len(sql.rstrip())
    found = f'"{token.text.upper()}"' if token is not None else '"<EOF>"'
    line, column = position_of(sql, offset)
    return SqlParserError(
        f"SQL parse failed. Encountered {found} at line {line}, column {column}. {message}",
        line,
        column,
    )


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
