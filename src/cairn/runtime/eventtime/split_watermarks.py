"""Per-split watermark generation in a source subtask (Flink's ``WatermarkOutputMultiplexer``
under ``SourceOperator`` with split-aware readers, e.g. one generator per Kafka partition).

Invariants: each split has its own ``WatermarkEmitter`` (so its own idleness); the subtask's
watermark is the minimum over the splits that are not idle, emitted only when it rises; the
subtask is idle when every split is, or when it has no split (a subtask that owns no
partition holds no watermark back downstream); the final watermark ends every split.

>>> from cairn.common import WatermarkStrategy
>>> w = SplitWatermarks(WatermarkStrategy.for_monotonous_timestamps(), ["p0", "p1"])
>>> b = w.assign(["a", "b"], [10, 50], [("p0", 1), ("p1", 1)])
>>> b.timestamps, w.on_periodic_emit(0)
([10, 50], (Watermark(timestamp=9),))
>>> _ = w.assign(["c"], [30], [("p0", 1)]); w.on_periodic_emit(200)
(Watermark(timestamp=29),)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.events import ACTIVE, IDLE, MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from cairn.runtime.eventtime.generation import Emitted, WatermarkEmitter
from cairn.runtime.eventtime.stamped import StampedBatch, stamp

__all__ = ["SplitWatermarks"]


class _Split:
    __slots__ = ("emitter", "idle", "watermark")

    def __init__(self, strategy: WatermarkStrategy) -> None:
        self.emitter = WatermarkEmitter(strategy)
        self.watermark = MIN_WATERMARK
        self.idle = False


class SplitWatermarks:
    """One generator per split, merged by the minimum (see the module docstring)."""

    __slots__ = ("_assigner", "_emitted", "_ended", "_idle", "_splits", "_strategy")

    def __init__(self, strategy: WatermarkStrategy, split_ids: Iterable[str] = ()) -> None:
        self._strategy = strategy
        self._assigner = strategy.timestamp_assigner
        self._splits: dict[str, _Split] = {}
        self._emitted = MIN_WATERMARK
        self._idle = False
        self._ended = False
        self.sync_splits(split_ids)

    def sync_splits(self, split_ids: Iterable[str]) -> None:
        """The reader's current splits: new ones start at the minimum, gone ones leave.

        >>> from cairn.common import WatermarkStrategy
        >>> w = SplitWatermarks(WatermarkStrategy.for_monotonous_timestamps(), ["a"])
        >>> _ = w.assign([1], [100], [("a", 1)]); w.sync_splits(["a", "b"])
        >>> w.on_periodic_emit(0)  # "b" has no record yet: it holds the watermark back
        ()
        >>> w.sync_splits(["a"]); w.on_periodic_emit(200)
        (Watermark(timestamp=99),)
        """
        wanted = set(split_ids)
        for gone in [s for s in self._splits if s not in wanted]:
            del self._splits[gone]
        for split in wanted:
            if split not in self._splits:
                self._splits[split] = _Split(self._strategy)

    def assign(
        self, records: list[Any], timestamps: list[int | None], runs: list[tuple[str, int]]
    ) -> StampedBatch:
        """Stamp ``records`` (the strategy's assigner gets each source timestamp) and tell
        each run's split its largest timestamp."""
        assigner = self._assigner
        if assigner is not None:
            extract = assigner.extract_timestamp
            stamped: list[int | None] = [
                int(extract(r, MIN_WATERMARK if t is None else t))
                for r, t in zip(records, timestamps, strict=True)
            ]
        else:
            stamped = timestamps
        splits = self._splits
        start = 0
        for split_id, count in runs:
            known = [t for t in stamped[start : start + count] if t is not None]
            start += count
            if not known:
                continue
            split = splits.get(split_id)
            if split is None:  # a split the reader just added: it joins now
                split = splits[split_id] = _Split(self._strategy)
            split.emitter.on_event(max(known))
        return stamp(records, stamped)

    def on_periodic_emit(self, now_ms: int) -> Emitted:
        """Each split's generator runs; the merged result is returned (may be nothing)."""
        if self._ended:
            return ()
        for split in self._splits.values():
            for event in split.emitter.on_periodic_emit(now_ms):
                if isinstance(event, Watermark):
                    split.watermark = event.timestamp
                    split.idle = False
                elif isinstance(event, WatermarkStatus):
                    split.idle = event.idle
        active = [s.watermark for s in self._splits.values() if not s.idle]
        if not active:
            if self._idle:
                return ()
            self._idle = True
            return (IDLE,)
        out: list[Watermark | WatermarkStatus] = []
        if self._idle:
            self._idle = False
            out.append(ACTIVE)
        merged = min(active)
        if merged > self._emitted:
            self._emitted = merged
            out.append(Watermark(merged))
        return tuple(out)

    def on_end_of_input(self) -> Emitted:
        """The final watermark (every split ended)."""
        self._ended = True
        out: list[Watermark | WatermarkStatus] = []
        if self._idle:
            self._idle = False
            out.append(ACTIVE)
        if self._emitted < MAX_WATERMARK:
            self._emitted = MAX_WATERMARK
            out.append(Watermark(MAX_WATERMARK))
        return tuple(out)
