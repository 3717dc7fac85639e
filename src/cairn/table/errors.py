"""The Table API's errors, with Flink's names (``pyflink.util.exceptions``).

Invariant: every error of planning is raised before a job starts, and its message names what
the user wrote (the field, the function, the table) as Flink's validator words it.
"""

from __future__ import annotations

__all__ = ["TableException", "ValidationError"]


class TableException(Exception):
    """A Table API call that cannot be carried out (Flink's ``TableException``)."""


class ValidationError(TableException):
    """An expression or query that does not resolve (Flink's ``ValidationException``)."""
