"""The SQL front end's errors: where in the statement, and what, as Flink words them.

Invariant: every error of a SQL statement is raised by ``execute_sql`` / ``sql_query`` before
a job exists, and names the token or object with its line and column (1-based).
"""

from __future__ import annotations

from cairn.table.errors import TableException, ValidationError

__all__ = ["SqlParserError", "SqlValidationError", "position_of"]


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
