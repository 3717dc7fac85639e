"""Timestamp assignment and periodic watermarks in a task: ``assign_timestamps_and_watermarks``
(Flink's ``TimestampsAndWatermarksOperator``) and the strategy a ``from_source`` source runs.

Invariant: every ``pipeline.auto-watermark-interval`` (the task's timer loop asks
``next_timer_ms``) the generator may emit a higher watermark or an idle status; between two
emissions records only update it. The operator replaces the watermarks of its input: only the
final one (``MAX_WATERMARK``, end of input) passes, as in Flink.
"""

from __future__ import annotations

from typing import Any

from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.events import MAX_WATERMARK
from cairn.graph.job_graph import OperatorNode
from cairn.runtime.eventtime.generation import Emitted, TimestampStamper, WatermarkEmitter
from cairn.runtime.operators.base import StreamOperator

__all__ = ["PeriodicWatermarks", "TimestampsAndWatermarksOperator"]


class PeriodicWatermarks:
    """A strategy at work in one subtask: stamps batches, emits on its interval.

    >>> from cairn.common import WatermarkStrategy
    >>> p = PeriodicWatermarks(WatermarkStrategy.for_monotonous_timestamps(), 200, now_ms=0)
    >>> p.next_ms, p.on_timer(199), p.next_ms
    (200, (), 200)
    """

    __slots__ = ("_interval", "emitter", "next_ms", "stamper")

    def __init__(self, strategy: WatermarkStrategy, interval_ms: int, now_ms: int) -> None:
        self.emitter = WatermarkEmitter(strategy)
        self.stamper = TimestampStamper(strategy, self.emitter)
        self._interval = interval_ms
        self.next_ms: int | None = now_ms + interval_ms if interval_ms > 0 else None

    def on_timer(self, now_ms: int) -> Emitted:
        """What to emit at ``now_ms`` (nothing before ``next_ms``)."""
        if self.next_ms is None or now_ms < self.next_ms:
            return ()
        self.next_ms = now_ms + self._interval
        return self.emitter.on_periodic_emit(now_ms)


class TimestampsAndWatermarksOperator(StreamOperator):
    generates_watermarks = True

    def __init__(self, node: OperatorNode) -> None:
        super().__init__(node)
        strategy = node.spec.function if node.spec is not None else None
        if not isinstance(strategy, WatermarkStrategy):
            raise TypeError(f"{node.name!r} needs a WatermarkStrategy, got {strategy!r}")
        self._strategy = strategy

    def open(self) -> None:
        c = self.ctx
        self._periodic = PeriodicWatermarks(self._strategy, c.watermark_interval_ms, c.clock_ms())

    def process_batch(self, records: list[Any]) -> None:
        self.output(self._periodic.stamper.assign(records))

    def next_timer_ms(self) -> int | None:
        return self._periodic.next_ms

    def on_processing_time(self, now_ms: int) -> None:
        self.emit_events(self._periodic.on_timer(now_ms))

    def process_watermark(self, timestamp: int) -> None:
        if timestamp == MAX_WATERMARK:
            self.emit_events(self._periodic.emitter.on_end_of_input())
