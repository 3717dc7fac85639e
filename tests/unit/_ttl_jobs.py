"""Helpers of the table state TTL tests: a source that sends each batch only once the job's
output of the previous batches was signalled and a given idle time has passed since, and a
map that signals each output record with a file."""

from __future__ import annotations

import os
import time
from typing import Any

from cairn.datastream.functions import MapFunction, SourceFunction

__all__ = ["IdleSource", "Signal"]


def _signalled(directory: str) -> int:
    return len(os.listdir(directory))


class IdleSource(SourceFunction):
    """Sends each batch of rows, then waits (60 s cap) until at least one output per batch
    sent so far was signalled, then until ``idle_ms`` of wall-clock time (the clock of state
    TTL) passed after that — so the state the batch wrote is that much older than the next
    batch."""

    def __init__(self, batches: list[list[tuple[Any, ...]]], signals: str, idle_ms: int) -> None:
        self.batches = batches
        self.signals = signals
        self.idle_ms = idle_ms

    def run(self, ctx: Any) -> None:
        for sent, batch in enumerate(self.batches, start=1):
            for row in batch:
                ctx.collect(row)
            if sent == len(self.batches):
                return
            deadline = time.monotonic() + 60
            while _signalled(self.signals) < sent and time.monotonic() < deadline:
                time.sleep(0.005)
            idle_until = time.time() + self.idle_ms / 1000
            while time.time() < idle_until:
                time.sleep(0.005)

    def cancel(self) -> None:
        pass


class Signal(MapFunction):
    """Writes one file per record it passes on."""

    def __init__(self, signals: str) -> None:
        self.signals = signals
        self.n = 0

    def map(self, value: Any) -> Any:
        self.n += 1
        open(os.path.join(self.signals, f"{os.getpid()}.{id(self)}.{self.n}"), "w").close()
        return value
