"""Flink SQL as a sqlglot dialect: the tokenizer and the parser extensions Flink needs.

Invariant: parsing only — no name is resolved and no type is checked here. Every function
call stays a plain call by its name (``exp.Anonymous``), so a user function named like a
sqlglot builtin (``split``) is not rewritten; the Flink-only syntax becomes the node classes
below (``FlinkCast``, ``FlinkColumn``, ``WatermarkDef``, ``TableArg``), which carry a Flink
type as its source text for ``type_names.parse_type``. The converter refuses what Cairn does
not plan; the parser only has to read it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp, tokens
from sqlglot import parser as sqlglot_parser
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.hive import Hive
from sqlglot.tokenizer_core import Token, TokenType
from sqlglot.trie import new_trie

__all__ = [
    "CompilePlan",
    "ExecutePlan",
    "Flink",
    "FlinkCast",
    "FlinkColumn",
    "FlinkJsonCall",
    "StatementSetBlock",
    "TableArg",
    "WatermarkDef",
]


class FlinkCast(exp.Expression):
    """``CAST(x AS type)`` / ``TRY_CAST``: ``to`` is the Flink type's text."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "to": True, "safe": False}


class FlinkJsonCall(exp.Expression):
    """``JSON_VALUE``/``JSON_QUERY``/``JSON_EXISTS``/``JSON_ARRAY``: ``this`` the name,
    ``expressions`` the arguments, ``clauses`` the text after them (``RETURNING INT``,
    ``WITH ARRAY WRAPPER``, ``ABSENT ON NULL``...)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False, "clauses": False}


class FlinkColumn(exp.Expression):
    """A column of ``CREATE TABLE``: a physical one (``kind``: its type's text), a metadata
    one (``kind`` and ``metadata``: true or the key of ``FROM 'key'``; ``virtual``) or a
    computed one (``computed``: its expression)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "kind": False,
        "computed": False,
        "text": False,
        "primary": False,
        "metadata": False,
        "virtual": False,
    }


class WatermarkDef(exp.Expression):
    """``WATERMARK FOR ts AS expr`` (``text``: the expression as written)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True, "text": False}


class TableArg(exp.Expression):
    """``TABLE t [PARTITION BY k, ...]`` as a function argument (window TVFs:
    ``TUMBLE(TABLE t, ...)``, ``SESSION(TABLE t PARTITION BY k, ...)``)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "partition_by": False}


class StatementSetBlock(exp.Expression):
    """``EXECUTE STATEMENT SET BEGIN INSERT ...; INSERT ...; END``."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": True}


class CompilePlan(exp.Expression):
    """``COMPILE [AND EXECUTE] PLAN 'file' [IF NOT EXISTS] FOR INSERT ... | STATEMENT SET
    BEGIN ... END``: ``this`` the file's path, ``expressions`` the inserts, ``texts`` each
    insert as written (what the plan file keeps)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "expressions": True,
        "texts": True,
        "exists": False,
        "execute": False,
    }


class ExecutePlan(exp.Expression):
    """``EXECUTE PLAN 'file'``: ``this`` the file's path."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


_TYPE_WORDS = frozenset({"WITH", "WITHOUT", "LOCAL", "TIME", "ZONE", "PRECISION"})
_COLUMN_WORDS = frozenset({"METADATA", "VIRTUAL", "PRIMARY", "COMMENT"})  # end a type


def _any_name(parser: Any) -> exp.Identifier:
    token = parser._curr
    if token is None:
        parser.raise_error("Expected a name")
    parser._advance()
    return exp.Identifier(this=token.text, quoted=token.token_type == TokenType.IDENTIFIER)


class Flink(Dialect):
    """Flink SQL: backquoted identifiers, ``'...'`` strings with ``''`` as the escape."""

    class Tokenizer(Hive.Tokenizer):
        # Hive's backquotes, but Flink reads "..." as no string and escapes ' by doubling it
        QUOTES: ClassVar[list[tuple[str, str] | str]] = ["'"]
        STRING_ESCAPES: ClassVar[list[str]] = ["'"]
        NUMERIC_LITERALS: ClassVar[dict[str, str]] = {}
        # '$' is part of a name (EXPR$1, UnnamedTable$0), not Hive's parameter sign
        SINGLE_TOKENS: ClassVar[dict[str, TokenType]] = {
            c: t for c, t in Hive.Tokenizer.SINGLE_TOKENS.items() if c != "$"
        }
        VAR_SINGLE_TOKENS: ClassVar[set[str]] = {"$"}
        COMMANDS: ClassVar[set[TokenType]] = tokens.Tokenizer.COMMANDS - {TokenType.SHOW}
        # SESSION is Flink's session window function (GROUP BY SESSION(ts, gap)), a name
        KEYWORDS: ClassVar[dict[str, TokenType]] = {
            **{k: t for k, t in tokens.Tokenizer.KEYWORDS.items() if k != "SESSION"},
            "MINUS": TokenType.EXCEPT,
        }

    class Parser(sqlglot_parser.Parser):
        # Only the calls with syntax of their own keep sqlglot's parsers; every other call
        # stays an ``Anonymous`` call by name, as Flink resolves it later against its catalog.
        FUNCTIONS: ClassVar[dict[str, Any]] = {}
        FUNCTION_PARSERS: ClassVar[dict[str, Any]] = {
            "CAST": lambda self: self._parse_flink_cast(False),
            "TRY_CAST": lambda self: self._parse_flink_cast(True),
            **{
                name: sqlglot_parser.Parser.FUNCTION_PARSERS[name]
                for name in (
                    "TRIM",
                    "EXTRACT",
                    "POSITION",
                    "SUBSTRING",
                    "OVERLAY",
                    "FLOOR",
                    "CEIL",
                    "JSON_OBJECT",
                )
            },
            **{
                name: lambda self: self._parse_flink_json()
                for name in ("JSON_VALUE", "JSON_QUERY", "JSON_EXISTS", "JSON_ARRAY")
            },
        }

        STATEMENT_PARSERS: ClassVar[dict[TokenType, Any]] = {
            **sqlglot_parser.Parser.STATEMENT_PARSERS,
            TokenType.SHOW: lambda self: self._parse_show(),
        }
        SHOW_PARSERS: ClassVar[dict[str, Any]] = {
            "TABLES": lambda self: self.expression(exp.Show(this="TABLES")),
            "VIEWS": lambda self: self.expression(exp.Show(this="VIEWS")),
        }
        SHOW_TRIE: ClassVar[dict[str, Any]] = new_trie(key.split(" ") for key in SHOW_PARSERS)

        error_token: Token | None = None

        def raise_error(self, message: str, token: Token | None = None) -> None:
            self.error_token = token or self._curr or self._prev
            super().raise_error(message, token or self._curr or self._prev)

        def _parse_projections(self) -> tuple[list[exp.Expr], list[exp.Expr] | None]:
            projections, extra = super()._parse_projections()
            trailing_comma = self._prev is not None and self._prev.token_type == TokenType.COMMA
            if not projections or trailing_comma:
                self.raise_error("Expected a select item")
            return projections, extra

        def _parse_as_command(self, start: Token) -> exp.Command:
            # sqlglot keeps what it cannot read as an opaque command; Flink's parser refuses it
            stopped = self._curr if self._curr is not None and self._curr is not start else start
            self.raise_error(f"Cairn does not parse this {start.text.upper()} statement", stopped)
            return super()._parse_as_command(start)

        def _parse_flink_cast(self, safe: bool) -> exp.Expr:
            this = self._parse_assignment()
            if not self._match(TokenType.ALIAS):
                self.raise_error("Expected AS after CAST")
            to = self._parse_flink_type()  # the call's ")" is sqlglot's to match
            return self.expression(FlinkCast(this=this, to=to, safe=safe))

        def _parse_flink_json(self) -> exp.Expr:
            """``JSON_VALUE(json, path RETURNING INT ...)`` and its kin: the arguments, then
            the clauses after them as text (``clauses``) for the converter to read."""
            name = self._tokens[self._index - 2].text.upper()  # before the "("
            args: list[exp.Expr] = []
            if self._curr is not None and self._curr.token_type != TokenType.R_PAREN:
                args = [a for a in self._parse_csv(self._parse_assignment) if a is not None]
            first = self._curr
            last = None
            while self._curr is not None and self._curr.token_type != TokenType.R_PAREN:
                last = self._curr
                self._advance()
            clauses = ""
            if first is not None and last is not None:
                clauses = self.sql[first.start : last.end + 1]
            return self.expression(
                FlinkJsonCall(this=name, expressions=args, clauses=exp.Literal.string(clauses))
            )

        def _parse_flink_type(self) -> exp.Literal:
            """A type's source text: a name, ``(...)`` / ``<...>`` parameters, ``WITH LOCAL
            TIME ZONE``, ``NOT NULL``; ``type_names`` parses it."""
            first = self._curr
            if first is None or first.token_type in (TokenType.R_PAREN, TokenType.COMMA):
                self.raise_error("Expected a type")
            assert first is not None
            last: Token = first
            self._advance()
            depth = 0
            while self._curr is not None:
                text = self._curr.text
                kind = self._curr.token_type
                if kind in (TokenType.L_PAREN, TokenType.LT):
                    depth += 1
                elif kind in (TokenType.R_PAREN, TokenType.GT) or set(text) == {">"}:
                    if depth == 0:
                        break
                    depth -= len(text) if set(text) == {">"} else 1
                elif depth == 0:
                    upper = text.upper()
                    if upper in _COLUMN_WORDS:
                        break
                    if kind == TokenType.NOT and self._next and self._next.text.upper() == "NULL":
                        self._advance()
                    elif upper not in _TYPE_WORDS and not (kind == TokenType.VAR and last is first):
                        break
                last = self._curr
                self._advance()
            return exp.Literal.string(self.sql[first.start : last.end + 1])

        in_create_table = False

        def _parse_create(self) -> exp.Create | exp.Command:
            self.in_create_table = True
            try:
                return super()._parse_create()
            finally:
                self.in_create_table = False

        def _parse_schema(self, this: exp.Expr | None = None) -> exp.Expr | None:
            if not (self.in_create_table and isinstance(this, exp.Table)) or self._curr is None:
                return super()._parse_schema(this)
            index = self._index
            if not self._match(TokenType.L_PAREN):
                return this
            if self._match_set(self.SELECT_START_TOKENS) or self._is_table_query():
                self._retreat(index)
                return this
            items = self._parse_csv(self._parse_flink_table_element)
            self._match_r_paren()
            return self.expression(exp.Schema(this=this, expressions=items))

        def _parse_flink_table_element(self) -> exp.Expr | None:
            if self._match_text_seq("WATERMARK", "FOR"):
                column = _any_name(self)
                if not self._match(TokenType.ALIAS):
                    self.raise_error("Expected AS after WATERMARK FOR column")
                expression, text = self._parse_with_text()
                return self.expression(WatermarkDef(this=column, expression=expression, text=text))
            if self._match(TokenType.CONSTRAINT):
                _any_name(self)
            if self._match(TokenType.PRIMARY_KEY):
                columns = self._parse_wrapped_csv(lambda: _any_name(self))
                enforced = not self._match_text_seq("NOT", "ENFORCED")
                if enforced:
                    self.raise_error(
                        "Flink doesn't support ENFORCED mode for PRIMARY KEY constraint;"
                        " write PRIMARY KEY (...) NOT ENFORCED"
                    )
                return self.expression(exp.PrimaryKey(expressions=columns))
            name = _any_name(self)
            if self._match(TokenType.ALIAS):
                computed, text = self._parse_with_text()
                return self.expression(FlinkColumn(this=name, computed=computed, text=text))
            kind = self._parse_flink_type()
            if self._match(TokenType.PRIMARY_KEY):
                self._match_text_seq("NOT", "ENFORCED")
                return self.expression(FlinkColumn(this=name, kind=kind, primary=True))
            if self._match_text_seq("METADATA"):
                key: exp.Expr | bool = True
                if self._match(TokenType.FROM):
                    literal = self._parse_primary()
                    if not isinstance(literal, exp.Literal) or not literal.is_string:
                        self.raise_error("Expected the metadata key as a string: FROM 'key'")
                    assert isinstance(literal, exp.Literal)
                    key = literal
                virtual = self._match_text_seq("VIRTUAL")
                return self.expression(
                    FlinkColumn(this=name, kind=kind, metadata=key, virtual=virtual)
                )
            return self.expression(FlinkColumn(this=name, kind=kind))

        def _parse_with_text(self) -> tuple[exp.Expr | None, exp.Literal]:
            """An expression and its text as written (Flink keeps and shows the text)."""
            first = self._curr
            expression = self._parse_assignment()
            last = self._prev
            if first is None or last is None or expression is None:
                self.raise_error("Expected an expression")
            assert first is not None and last is not None
            return expression, exp.Literal.string(self.sql[first.start : last.end + 1])

        def _parse_lambda(self, alias: bool = False) -> exp.Expr | None:
            if (
                self._curr is not None
                and self._curr.token_type == TokenType.TABLE
                and self._next is not None
                and self._next.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            ):
                self._advance()
                table = self._parse_table_parts()
                keys: list[exp.Expr] = []
                if self._match(TokenType.PARTITION_BY):
                    wrapped = self._match(TokenType.L_PAREN)
                    keys = [k for k in [self._parse_column()] if k is not None]
                    # unwrapped, the keys end where the next argument starts (a call)
                    while self._match(TokenType.COMMA):
                        after = self._tokens[self._index + 1 : self._index + 2]
                        if not wrapped and after and after[0].token_type == TokenType.L_PAREN:
                            self._retreat(self._index - 1)
                            break
                        key = self._parse_column()
                        if key is not None:
                            keys.append(key)
                    if wrapped:
                        self._match_r_paren()
                return self.expression(TableArg(this=table, partition_by=keys))
            return super()._parse_lambda(alias)
