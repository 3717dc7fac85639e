"""The mini-batch group aggregate (Flink's ``MiniBatchGroupAggFunction``, driven as its
``KeyedMapBundleOperator`` drives it).

Invariant: input records wait in a bundle (per key, in arrival order) and nothing is emitted
for them until the bundle is finished; finishing folds each key's records into its state with
one state read and at most one write and emits at most one change per key (``-U``/``+U``,
``+I``, ``-D``; nothing when the result did not change). The bundle is finished when it holds
``size`` records, when ``allow-latency`` has passed since the first of them (the next multiple
of the latency on the processing-time clock, as Flink's ``MiniBatchAssigner`` marks batches),
before a watermark is passed on (no record falls behind it), before a checkpoint barrier (the
operator's ``prepare_snapshot_pre_barrier``: no snapshot holds a bundle) and at the end of
input. The operator (``KeyedProcessOperator``) asks ``finish_bundle`` and ``bundle_due_ms``.
The keyed state is ``GroupAggFunction``'s (name and ``[count, accumulators]`` layout), so the
final state equals the per-record path's and a savepoint of either restores into the other.

>>> from cairn.table.analysis import AggCall
>>> from cairn.table.types import DataTypes
>>> f = MiniBatchGroupAggFunction([AggCall("count_star", -1, DataTypes.BIGINT(False))], (0,),
...     latency_ms=2000, size=3)
>>> f.latency_ms, f.size, f.bundle_due_ms is None
(2000, 3, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import ValueStateDescriptor
from cairn.common.typeinfo import Types
from cairn.table.analysis import AggCall
from cairn.table.group_agg_code import MiniBatchAggCode
from cairn.table.operators import open_functions
from cairn.table.state_ttl import with_ttl

__all__ = ["MiniBatchGroupAggFunction"]


class MiniBatchGroupAggFunction(KeyedProcessFunction[Any, Any, Any]):
    """Streaming ``GROUP BY keys`` computing ``calls``, a bundle of input at a time."""

    # The operator's batch path takes plain batches too.
    keyed_batch_plain = True

    def __init__(
        self,
        calls: Sequence[AggCall],
        keys: Sequence[int],
        latency_ms: int,
        size: int,
        state_ttl_ms: int | None = None,
    ) -> None:
        if latency_ms <= 0 or size <= 0:
            raise ValueError("a mini-batch needs a positive latency and size")
        self.calls = tuple(calls)
        self.keys = tuple(keys)
        self.latency_ms = latency_ms
        self.size = size
        self.state_ttl_ms = state_ttl_ms
        #: When the bundle must be finished (processing time, ms); None while it is empty.
        self.bundle_due_ms: int | None = None

    def open(self, runtime_context: Any) -> None:
        open_functions([c.wrapper for c in self.calls if c.wrapper is not None], runtime_context)
        descriptor = ValueStateDescriptor("group-aggregate", Types.PICKLED_BYTE_ARRAY())
        self._state = runtime_context.get_state(with_ttl(descriptor, self.state_ttl_ms))
        code = MiniBatchAggCode(self.keys, self.calls)
        self._buffer = code.buffer
        self._fold = code.fold
        self._bundle: dict[Any, list[Any]] = {}
        self._last: dict[Any, int | None] = {}
        self._count = 0
        self._stamped = False
        self.bundle_due_ms = None

    def keyed_batch(
        self,
        records: list[Any],
        timestamps: list[int | None],
        key_selector: Any,
        set_key: Any,
        ctx: Any,
    ) -> tuple[list[Any], list[int | None] | None]:
        """Buffer ``records`` (stamped unless ``timestamps`` is empty); what the bundles that
        filled up meanwhile emitted."""
        if not records:
            return [], None
        stamps = timestamps if timestamps else None
        if stamps is not None:
            self._stamped = True
        out: list[Any] = []
        out_stamps: list[int | None] = []
        stamped = False
        start = 0
        while start < len(records):
            room = self.size - self._count
            end = min(len(records), start + room)
            chunk = records if start == 0 and end == len(records) else records[start:end]
            chunk_stamps = None if stamps is None else stamps[start:end]
            self._buffer(chunk, chunk_stamps, self._bundle, self._last)
            self._count += end - start
            start = end
            if self._count >= self.size:
                stamped = self._stamped or stamped
                self._fold_into(set_key, out, out_stamps)
        if self._count and self.bundle_due_ms is None:
            now = ctx.timer_service().current_processing_time()
            self.bundle_due_ms = now - now % self.latency_ms + self.latency_ms
        return out, out_stamps if stamped else None

    def finish_bundle(self, set_key: Any) -> tuple[list[Any], list[int | None] | None]:
        """Fold the bundle into state and empty it: the changes to emit, with timestamps
        when any buffered record had one."""
        out: list[Any] = []
        out_stamps: list[int | None] = []
        if not self._count:
            return out, None
        stamped = self._stamped
        self._fold_into(set_key, out, out_stamps)
        return out, out_stamps if stamped else None

    def _fold_into(self, set_key: Any, out: list[Any], out_stamps: list[int | None]) -> None:
        state = self._state
        bundle = self._bundle
        self._fold(
            bundle, self._last, set_key, state.value, state.update, state.clear, out, out_stamps
        )
        bundle.clear()
        self._last.clear()
        self._count = 0
        self._stamped = False
        self.bundle_due_ms = None

    def process_element(self, value: tuple[int, tuple[Any, ...]], ctx: Any) -> Iterable[Any]:
        raise NotImplementedError("a mini-batch aggregate takes whole batches (keyed_batch)")
