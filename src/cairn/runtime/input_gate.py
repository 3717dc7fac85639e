"""Input gate: the merged, fair view of a task's input channels.

Invariant: a channel the barrier handler blocked is never polled, and entries of one channel
are returned in the order they were sent; remote batches are unpickled here, once, by the
consuming task, and a credit is returned for each of them.
"""

from __future__ import annotations

import pickle
from collections.abc import Container, Sequence
from typing import Any

from cairn.runtime.channels import InputChannel

_NOT_BLOCKED: frozenset[int] = frozenset()


class InputGate:
    __slots__ = ("_blocked", "_next", "channels", "num_finished")

    def __init__(self, channels: Sequence[InputChannel]) -> None:
        self.channels = list(channels)
        self._next = 0
        self.num_finished = 0
        self._blocked: Container[int] = _NOT_BLOCKED

    def set_blocked_view(self, blocked: Container[int]) -> None:
        """The barrier handler's live set of blocked channel indexes."""
        self._blocked = blocked

    @property
    def all_finished(self) -> bool:
        return self.num_finished == len(self.channels)

    def has_data(self) -> bool:
        blocked = self._blocked
        return any(ch.queue and i not in blocked for i, ch in enumerate(self.channels))

    def poll(self) -> tuple[int, Any] | None:
        """Next entry (record batch or event) of a non-blocked channel, round-robin."""
        channels = self.channels
        n = len(channels)
        blocked = self._blocked
        start = self._next
        for k in range(n):
            i = start + k
            if i >= n:
                i -= n
            ch = channels[i]
            if ch.queue and i not in blocked:
                self._next = i + 1 if i + 1 < n else 0
                entry = ch.queue.popleft()
                if type(entry) is bytes:
                    ch.consumed_remote_batch()
                    entry = pickle.loads(entry)
                return i, entry
        return None

    def mark_finished(self, index: int) -> None:
        ch = self.channels[index]
        if not ch.finished:
            ch.finished = True
            self.num_finished += 1

    def buffered_batches(self) -> int:
        return sum(len(ch.queue) for ch in self.channels)
