"""Errors of the state processor.

Invariant: every error names the operator uid and, where one is involved, the state name,
the key or the state file, so a failed Spark job points at the exact piece of state.
"""

from __future__ import annotations

__all__ = [
    "StateProcessorError",
    "UnknownOperatorError",
    "UnknownStateError",
    "ValueTypeError",
]


class StateProcessorError(ValueError):
    """Base class: the savepoint, the descriptor or the DataFrame does not fit the request."""


class UnknownOperatorError(StateProcessorError):
    """No operator with this uid has state in the savepoint."""


class UnknownStateError(StateProcessorError):
    """The operator has no state of this name (or of this kind)."""


class ValueTypeError(StateProcessorError):
    """A state value does not fit its Spark column (or a column does not fit the state)."""
