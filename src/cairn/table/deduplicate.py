"""Deduplication: per key, the first or the last row of an insert-only input.

Invariant: per key one value in keyed state (checkpointed, restored and rescaled like any keyed
state, with ``table.exec.state.ttl`` as Flink's ``createTtlConfig``), and the changes Flink's
functions emit:

* keep first on processing time (``ProcTimeDeduplicateKeepFirstRowFunction``): the key's first
  row as ``+I``, nothing after — insert-only;
* keep last on processing time (``ProcTimeDeduplicateKeepLastRowFunction``): ``+I`` for the
  first row, then ``-U`` of the kept row and ``+U`` of the new one; a row equal to the kept one
  changes nothing, unless a state TTL is set (then the pair is emitted all the same, so that
  downstream state is refreshed too);
* event time (``RowTimeDeduplicateFunction``): a row replaces the kept one when its row time
  is later (keep first: strictly earlier) — keep last: ``>=``, keep first: ``<`` — emitting
  ``+I`` for the first and ``-U``/``+U`` for a replacement; watermarks play no part, so rows
  out of order may update a key's row several times.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.operators import INSERT, UPDATE_AFTER, UPDATE_BEFORE
from cairn.table.state_ttl import with_ttl
from cairn.table.timestamps import epoch_millis

__all__ = ["DeduplicateFunction"]


class DeduplicateFunction(KeyedProcessFunction[Any, Any, Any]):
    """Keeps the first (``keep_last`` False) or last row per key, by arrival
    (``rowtime_index`` None) or by the row time at ``rowtime_index``."""

    def __init__(
        self, keep_last: bool, rowtime_index: int | None, state_ttl_ms: int | None = None
    ) -> None:
        self.keep_last = keep_last
        self.rowtime_index = rowtime_index
        self.state_ttl_ms = state_ttl_ms

    def open(self, runtime_context: Any) -> None:
        first_on_proctime = not self.keep_last and self.rowtime_index is None
        descriptor = (
            ValueStateDescriptor("deduplicate-seen", Types.BOOLEAN())
            if first_on_proctime
            else ValueStateDescriptor("deduplicate-row", Types.PICKLED_BYTE_ARRAY())
        )
        self._state = runtime_context.get_state(with_ttl(descriptor, self.state_ttl_ms))
        self._ttl = bool(self.state_ttl_ms)

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        kind, row = value
        if kind != INSERT:
            raise ValueError("Deduplicate takes an insert-only input")
        if self.rowtime_index is not None:
            return self._on_rowtime(row, self.rowtime_index)
        if not self.keep_last:
            if self._state.value():
                return ()
            self._state.update(True)
            return (value,)
        previous = self._state.value()
        self._state.update(row)
        if previous is None:
            return ((INSERT, row),)
        if previous == row and not self._ttl:
            return ()
        return ((UPDATE_BEFORE, previous), (UPDATE_AFTER, row))

    def _on_rowtime(self, row: tuple[Any, ...], index: int) -> Iterable[Any]:
        at = row[index]
        if at is None:
            return ()
        previous = self._state.value()
        if previous is not None:
            before = epoch_millis(previous[index])
            now = epoch_millis(at)
            keep = before <= now if self.keep_last else now < before
            if not keep:
                return ()
        self._state.update(row)
        if previous is None:
            return ((INSERT, row),)
        return ((UPDATE_BEFORE, previous), (UPDATE_AFTER, row))
