"""The SQL front end's errors: where in the statement, and what, as Flink words them.

Invariant: every error of a SQL statement is raised by ``execute_sql`` / ``sql_query`` before
a job exists, and names the token or object with its line and column (1-based): a Table API
step's ``ValidationError`` gets the position of the SQL it came from (``SqlErrors``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from cairn.table.errors import TableException, ValidationError

if TYPE_CHECKING:
    from sqlglot import exp

__all__ = ["SqlErrors", "SqlParserError", "SqlValidationError", "position_of"]


class SqlParserError(TableException):
    """Text that is not SQL (Flink's ``SqlParserException``):
    ``SQL parse failed. Encountered "FROM" at line 1, column 8.``"""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class SqlValidationError(ValidationError):
    """SQL that parses but does not resolve or is not supported:
    ``SQL validation failed. From line 1, column 15 to line 1, column 15: Object 't' not found``.
    """

    def __init__(self, message: str, line: int, column: int, end_column: int | None = None) -> None:
        end = column if end_column is None else end_column
        super().__init__(
            f"SQL validation failed. From line {line}, column {column} to line {line},"
            f" column {end}: {message}"
        )
        self.line = line
        self.column = column


def position_of(sql: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of character ``offset`` of ``sql``.

    >>> position_of("SELECT a\\nFROM t", 14)
    (2, 6)
    """
    line = sql.count("\n", 0, offset) + 1
    return line, offset - (sql.rfind("\n", 0, offset) + 1) + 1


def _start(node: exp.Expr) -> int | None:
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    return min(starts) if starts else None


def _end(node: exp.Expr) -> int | None:
    ends = [n.meta["end"] for n in node.walk() if "end" in n.meta]
    return max(ends) if ends else None


_T = TypeVar("_T")


class SqlErrors:
    """Errors positioned in one statement's text."""

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def run(self, node: exp.Expr, step: Callable[[], _T]) -> _T:
        """``step()`` (a Table API step); a ``ValidationError`` it raises gets ``node``'s
        position (one already positioned passes as it is)."""
        try:
            return step()
        except SqlValidationError:
            raise
        except ValidationError as error:
            raise self.at(node, str(error)) from None

    def at(self, node: exp.Expr, message: str, keyword: str = "") -> SqlValidationError:
        """An error at ``node`` (at the ``keyword`` before it, when given)."""
        start, end = _start(node), _end(node)
        if start is not None and keyword:
            found = self.sql.upper().rfind(keyword, 0, start + 1)
            start = found if found >= 0 else start
            end = start + len(keyword) - 1
        if start is None:
            return SqlValidationError(message, 1, 1)
        line, column = position_of(self.sql, start)
        end_line, end_column = position_of(self.sql, end if end is not None else start)
        return SqlValidationError(message, line, column, end_column if end_line == line else column)
