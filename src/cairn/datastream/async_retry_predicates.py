"""Ready-made retry predicates (``pyflink.datastream.async_retry_predicates``).

Invariant: pure functions of their arguments; bind extra arguments with
``functools.partial``, as PyFlink's examples do.

>>> import functools
>>> on_timeout = functools.partial(exception_type_predicate, expected_error_type=TimeoutError)
>>> on_timeout(TimeoutError()), on_timeout(ValueError()), empty_result_predicate([])
(True, False, True)
"""

from __future__ import annotations

from typing import Any

__all__ = ["empty_result_predicate", "exception_type_predicate", "has_exception_predicate"]


def empty_result_predicate(result: list[Any] | None) -> bool:
    """Retry when an input gave no result."""
    return result is None or len(result) == 0


def has_exception_predicate(error: BaseException | None) -> bool:
    """Retry on any error."""
    return error is not None


def exception_type_predicate(error: BaseException, expected_error_type: Any) -> bool:
    """Retry on errors of ``expected_error_type`` (a type or a tuple of types)."""
    return isinstance(error, expected_error_type)
