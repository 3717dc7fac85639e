"""Helpers of the processing-time window tests: a source that waits for the windows it fed
to fire (watching signal files) before it sends more, and a map that signals each result."""

from __future__ import annotations

import os
import time
from typing import Any

from cairn.datastream.functions import MapFunction, SourceFunction

__all__ = ["Signal", "WaitingSource", "fired_rows"]


def fired_rows(directory: str) -> int:
    """How many input rows the windows signalled so far aggregated (their counts summed)."""
    return sum(int(name.split("-")[1]) for name in os.listdir(directory))


class WaitingSource(SourceFunction):
    """Sends each batch of rows, then waits (60 s cap) until windows counting all rows sent
    so far fired, so each batch lands in windows that open after the previous ones fired."""

    def __init__(self, batches: list[list[tuple[str, int]]], signals: str) -> None:
        self.batches = batches
        self.signals = signals

    def run(self, ctx: Any) -> None:
        sent = 0
        for batch in self.batches:
            for row in batch:
                ctx.collect(row)
            sent += len(batch)
            deadline = time.monotonic() + 60
            while fired_rows(self.signals) < sent and time.monotonic() < deadline:
                time.sleep(0.01)

    def cancel(self) -> None:
        pass


class Signal(MapFunction):
    """Writes a file ``<n>-<count>`` per window result row (its count at ``count_index``)."""

    def __init__(self, signals: str, count_index: int) -> None:
        self.signals = signals
        self.count_index = count_index
        self.n = 0

    def map(self, value: Any) -> Any:
        self.n += 1
        name = f"{os.getpid()}.{id(self)}.{self.n}-{value[self.count_index]}"
        open(os.path.join(self.signals, name), "w").close()
        return value
