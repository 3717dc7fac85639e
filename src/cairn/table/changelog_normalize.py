"""Flink's ``ChangelogNormalize``: an upsert stream (the last row per key, or a tombstone)
made into a changelog with ``+I``, ``-U``/``+U`` and ``-D``.

Invariant: the last row of each key lives in keyed state (checkpointed, restored, rescaled
with the key), so after a restore a replayed upsert of the same row emits nothing, and
every change emitted retracts exactly the row downstream operators hold: ``+I`` for a key's
first row, ``-U`` old / ``+U`` new when it changes, nothing when it does not, ``-D`` of the
held row on a tombstone, nothing on a tombstone of an unknown key.

>>> n = ChangelogNormalize()
>>> held = {}
>>> [n.change(held.get("a"), row) for row in (("a", 1), ("a", 1), ("a", 2))][0]
((0, ('a', 1)),)
>>> n.change(("a", 1), ("a", 2)), n.change(("a", 2), None), n.change(None, None)
(((1, ('a', 1)), (2, ('a', 2))), ((3, ('a', 2)),), ())
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.state_ttl import with_ttl

__all__ = ["ChangelogNormalize"]

_INSERT, _UPDATE_BEFORE, _UPDATE_AFTER, _DELETE = 0, 1, 2, 3


class ChangelogNormalize(KeyedProcessFunction[Any, Any, Any]):
    """Keyed by the primary key; each input is ``(key, row | None)`` (``None``: tombstone).
    With a ``state_ttl_ms`` a key's row not written for that long is forgotten: its next
    upsert is a ``+I`` again, as in Flink's deduplicate-keep-last-row function."""

    def __init__(self, state_ttl_ms: int | None = None) -> None:
        self.state_ttl_ms = state_ttl_ms

    def open(self, runtime_context: Any) -> None:
        descriptor = ValueStateDescriptor("changelog-normalize", Types.PICKLED_BYTE_ARRAY())
        self._last = runtime_context.get_state(with_ttl(descriptor, self.state_ttl_ms))

    @staticmethod
    def change(before: tuple[Any, ...] | None, after: tuple[Any, ...] | None) -> tuple[Any, ...]:
        """The changes that turn the held row ``before`` into ``after``."""
        if after is None:
            return () if before is None else ((_DELETE, before),)
        if before is None:
            return ((_INSERT, after),)
        if before == after:
            return ()
        return ((_UPDATE_BEFORE, before), (_UPDATE_AFTER, after))

    def process_element(self, value: tuple[Any, Any], ctx: Any) -> Iterable[Any]:
        row = value[1]
        before = self._last.value()
        changes = self.change(before, row)
        if row is None:
            if before is not None:
                self._last.clear()
        elif changes:
            self._last.update(row)
        return changes
