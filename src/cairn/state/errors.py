"""Errors raised by the state layer.

Invariant: every failure the state layer reports is a ``StateError`` subclass whose message
names the state, key group or file involved, so a failed job points at its cause.
"""

from __future__ import annotations

__all__ = [
    "CorruptStateError",
    "KeyGroupRangeError",
    "StateAccessError",
    "StateError",
    "StateMigrationError",
    "StateRestoreError",
]


class StateError(RuntimeError):
    """Base class of state-layer errors."""


class StateAccessError(StateError):
    """Keyed state (or a keyed timer) was used without a current key."""


class StateMigrationError(StateError):
    """A descriptor does not match the state registered or restored under its name."""


class StateRestoreError(StateError):
    """Checkpointed state cannot be restored (overlapping or inconsistent handles)."""


class CorruptStateError(StateRestoreError):
    """A checkpointed byte range failed its CRC-32 check or could not be decoded."""


class KeyGroupRangeError(StateError):
    """A key maps to a key group this backend does not own (non-deterministic key selector?)."""
