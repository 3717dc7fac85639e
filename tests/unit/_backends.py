"""The keyed state backends that backend-parametrized state tests run on: one list.

A backend added to ``KEYED_BACKENDS`` is tested by every module that takes the
``keyed_backend_factory`` fixture (``tests/unit/conftest.py``): keyed state, TTL, timers and
snapshots.
"""

from __future__ import annotations

from typing import Protocol

from cairn.clock import Clock
from cairn.state import HeapKeyedStateBackend, KeyGroupRange
from cairn.state.api import KeyedStateBackend

__all__ = ["KEYED_BACKENDS", "KeyedBackendFactory"]


class KeyedBackendFactory(Protocol):
    """Builds a backend owning ``key_group_range`` of ``max_parallelism`` key groups."""

    def __call__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        clock: Clock,
        *,
        file_prefix: str = "",
    ) -> KeyedStateBackend: ...


KEYED_BACKENDS: dict[str, KeyedBackendFactory] = {
    "heap": HeapKeyedStateBackend,
}
