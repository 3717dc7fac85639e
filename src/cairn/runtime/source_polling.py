"""When a source task polls its source, and for how many records.

Invariants: a source whose reader knows exactly when its next records are due
(``SourceReader.records_due_in_s``) is not polled before then, and after a small batch (fewer
than ``LINGER_BELOW`` records) not sooner than the linger either (``runtime.linger``: its
records wait in the reader and leave together); a poll asks for the pacing's count
(``runtime.batch_pacing``: time-bounded batches), never more than the smallest output buffer;
``ready_at``, when an idle worker should come back for the source, is only ever set by the
last poll (an exact due time, or the reader's hint after an empty poll) and cleared by the
next, so a stale time never keeps a worker awake.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from cairn.runtime.batch_pacing import BatchPacing
from cairn.runtime.linger import source_due

__all__ = ["LINGER_BELOW", "SOURCE_BATCH", "PolledSource", "SourcePolling"]

SOURCE_BATCH = 1024  # records a source is asked for at most
LINGER_BELOW = 128  # a batch smaller than this makes the next poll wait for the linger


class PolledSource(Protocol):
    """What the polling asks a source operator after a poll that returned less than asked."""

    def records_due_in_s(self) -> float | None: ...

    def available_in_s(self) -> float | None: ...


class BufferedOutput(Protocol):
    def min_batch_size(self) -> int: ...


class SourcePolling:
    """One source task's polling state (see the module's invariants).

    >>> class Limited:  # a reader whose next records are due in 1 ms
    ...     def records_due_in_s(self): return 0.001
    ...     def available_in_s(self): return 0.001
    >>> polling = SourcePolling(linger_s=0.050)
    >>> polling.may_poll(time.monotonic()), polling.limit([])
    (True, 1)
    >>> polling.polled(Limited(), count=1, limit=1, elapsed_s=1e-5)  # full: more may be ready
    >>> polling.more, polling.ready_at is None
    (True, True)
    >>> polling.polled(Limited(), count=1, limit=2, elapsed_s=1e-5)  # short and small
    >>> polling.may_poll(time.monotonic())  # not before the linger
    False
    """

    __slots__ = ("_due_at", "linger_s", "more", "pacing", "ready_at")

    def __init__(self, linger_s: float = 0.0) -> None:
        self.pacing = BatchPacing(cap=SOURCE_BATCH)
        self.linger_s = linger_s  # execution.buffer-timeout.linger, seconds
        self.ready_at: float | None = None  # monotonic: when the idle worker comes back
        self.more = True  # the last poll filled its batch: more may be ready now
        self._due_at: float | None = None  # exact: no poll before

    def may_poll(self, now: float) -> bool:
        """Whether to poll now (clears ``ready_at`` when it says yes)."""
        due = self._due_at
        if due is not None:
            if now < due:
                return False  # a poll now would return nothing, or too little to send
            self._due_at = None
        self.ready_at = None
        return True

    def limit(self, outputs: Sequence[BufferedOutput]) -> int:
        """How many records the next poll asks for."""
        limit = self.pacing.records  # at most SOURCE_BATCH, fewer when records are slow
        for output in outputs:  # debloated outputs: emit no more than a buffer at once
            size = output.min_batch_size()
            if size < limit:
                limit = size
        return limit

    def polled(self, source: PolledSource, count: int, limit: int, elapsed_s: float) -> None:
        """Learn from a poll that returned ``count`` records of ``limit`` asked for in
        ``elapsed_s`` seconds (the chain's work included)."""
        if count:
            self.pacing.learn(count, elapsed_s)
        self.more = count >= limit
        if count >= limit:
            return
        due_in = source.records_due_in_s()
        now = time.monotonic()
        if due_in is not None and due_in > 0:
            last = now if 0 < count < LINGER_BELOW else None
            self._due_at = self.ready_at = source_due(now, due_in, last, self.linger_s)
        elif not count:
            hint = source.available_in_s()
            if hint is not None:
                self.ready_at = now + hint
