"""What travels through a task's operator chain besides its records: watermarks, watermark
statuses and the tail's side outputs (the event side of Flink's ``OperatorChain``), wired once
when the task is built.

Invariant: a watermark enters the chain at its head (from the task's valve) or at an operator
that generates watermarks, goes from operator to operator in chain order, and leaves from the
tail on every output channel; a watermark status leaves on every output channel, and the
valve's statuses go out only when no operator of the chain generates watermarks (one that does
decides the status downstream itself); the tail's side outputs go to the writers of their tag.
Each operator holds the callable it calls: nothing here runs per record.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from cairn.events import Watermark, WatermarkStatus
from cairn.runtime.eventtime.valve import ValveOutput
from cairn.runtime.operators.base import StreamOperator
from cairn.runtime.record_writer import RecordWriter

__all__ = ["ChainEvents"]


class ChainEvents:
    """The event wiring of the chain ``operators`` (head first) over the task's ``writers``."""

    def __init__(
        self, operators: Sequence[StreamOperator], writers: Sequence[RecordWriter]
    ) -> None:
        self._head = operators[0]
        self._writers = writers
        for op, nxt in itertools.pairwise(operators):
            op.watermark_output = nxt.process_watermark
        operators[-1].watermark_output = self.emit_watermark
        for op in operators:
            op.status_output = self.emit_status
        self.forward_status = not any(op.generates_watermarks for op in operators)
        side: dict[str, list[RecordWriter]] = {}
        for w in writers:
            if w.output_tag is not None:
                side.setdefault(w.output_tag, []).append(w)
        if side:
            operators[-1].side_outputs = {tag: _emit_to(ws) for tag, ws in side.items()}

    def emit_watermark(self, timestamp: int) -> None:
        """The tail's watermark, out on every output channel."""
        event = Watermark(timestamp)
        for w in self._writers:
            w.broadcast_event(event)

    def emit_status(self, status: WatermarkStatus) -> None:
        for w in self._writers:
            w.broadcast_event(status)

    def from_valve(self, events: ValveOutput) -> None:
        """What the valve passed on: watermarks into the head, statuses out (if forwarded)."""
        for event in events:
            if isinstance(event, Watermark):
                self._head.process_watermark(event.timestamp)
            elif self.forward_status:
                self.emit_status(event)


def _emit_to(writers: list[RecordWriter]) -> Callable[[list[Any]], None]:
    if len(writers) == 1:
        return writers[0].emit_side

    def emit_all(records: list[Any]) -> None:
        for w in writers:
            w.emit_side(records)

    return emit_all
