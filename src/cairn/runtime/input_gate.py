"""Input gate: the merged, fair view of a task's input channels.

Invariants: a channel the barrier handler blocked is never polled, and entries of one channel
are returned in the order they were sent; a priority barrier that is not overtaken is returned
exactly when every entry sent before it has been taken; remote batches are unpickled here,
once, by the consuming task, and a credit is returned (and their size counted) for each.
While an unaligned checkpoint records a channel, every record batch taken from it is
recorded before it is returned.
"""

from __future__ import annotations

import pickle
from collections.abc import Container, Sequence
from typing import Any

from cairn.events import CheckpointBarrier, Watermark, WatermarkStatus
from cairn.runtime.channel_state import ChannelStateRecorder, HeldBatch
from cairn.runtime.channels import InputChannel, PrioritySignal
from cairn.runtime.eventtime.stamped import StampedBatch
from cairn.runtime.keyed_batch import KeyGroupedBatch

_NOT_BLOCKED: frozenset[int] = frozenset()
# What an unaligned checkpoint persists of a channel's in-flight data: record batches and
# the watermark events between them (barriers, cancel markers and end of partition are not).
_IN_FLIGHT = (list, bytes, HeldBatch, StampedBatch, KeyGroupedBatch, Watermark, WatermarkStatus)


class InputGate:
    __slots__ = (
        "_blocked",
        "_next",
        "bytes_in",
        "channels",
        "measuring",
        "num_finished",
        "processed_bytes",
        "recorder",
        "signal",
    )

    def __init__(self, channels: Sequence[InputChannel]) -> None:
        self.channels = list(channels)
        self._next = 0
        self.num_finished = 0
        self._blocked: Container[int] = _NOT_BLOCKED
        self.recorder: ChannelStateRecorder | None = None
        self.signal = PrioritySignal()
        # While a checkpoint aligns: bytes of the (remote, serialized) batches processed.
        self.measuring = False
        self.processed_bytes = 0
        # Flink's numBytesIn: pickled bytes of the remote batches taken (local ones have none).
        self.bytes_in = 0
        for ch in self.channels:
            ch.signal = self.signal
            if ch.announced:
                self.signal.raised = True

    def set_blocked_view(self, blocked: Container[int]) -> None:
        """The barrier handler's live set of blocked channel indexes."""
        self._blocked = blocked

    @property
    def all_finished(self) -> bool:
        return self.num_finished == len(self.channels)

    def has_data(self) -> bool:
        blocked = self._blocked
        for i, ch in enumerate(self.channels):
            if (ch.queue or ch.announced) and i not in blocked:
                return True
        return False

    def poll(self) -> tuple[int, Any] | None:
        """Next entry (record batch or event) of a non-blocked channel, round-robin.

        Record batches come back as lists, or as ``HeldBatch`` for input the task put back.
        """
        channels = self.channels
        n = len(channels)
        blocked = self._blocked
        start = self._next
        for k in range(n):
            i = start + k
            if i >= n:
                i -= n
            ch = channels[i]
            if i in blocked:
                continue
            announced = ch.announced
            if announced and announced[0][0] <= ch.consumed:
                self._next = i + 1 if i + 1 < n else 0
                return i, announced.popleft()[1]  # a priority barrier reached in order
            if ch.queue:
                self._next = i + 1 if i + 1 < n else 0
                entry = ch.queue.popleft()
                ch.consumed += 1
                recorder = self.recorder
                if recorder is not None and i in recorder.channels:
                    self._record(recorder, i, entry)
                if type(entry) is bytes:
                    self.bytes_in += len(entry)
                    if self.measuring:
                        self.processed_bytes += len(entry)
                    ch.consumed_remote_batch()
                    entry = pickle.loads(entry)
                return i, entry
        return None

    @staticmethod
    def _record(recorder: ChannelStateRecorder, channel: int, entry: Any) -> None:
        if type(entry) in _IN_FLIGHT:
            recorder.add(channel, entry)

    # ------------------------------------------------------------------ priority barriers

    def pending_announcements(self) -> list[tuple[int, CheckpointBarrier]]:
        """The oldest announced barrier of each channel that has one (clears the signal)."""
        self.signal.raised = False
        return [(i, ch.announced[0][1]) for i, ch in enumerate(self.channels) if ch.announced]

    def overtake(self, index: int) -> tuple[CheckpointBarrier, list[Any]]:
        """Take channel ``index``'s oldest announced barrier ahead of the entries in front of it.

        Returns the barrier and the record batches and watermark events it overtook (still
        queued: they will be processed after it), oldest first, as they sit in the queue
        (lists, pickled bytes, ``HeldBatch``, watermarks). Other events in front of it stay
        queued and are not returned.
        """
        ch = self.channels[index]
        position, barrier = ch.announced.popleft()
        queue = ch.queue
        ahead = position - ch.consumed
        # Index access (not iteration): the receiving thread may append concurrently.
        overtaken = [queue[j] for j in range(ahead)]
        return barrier, [e for e in overtaken if type(e) in _IN_FLIGHT]

    def put_back(self, index: int, held: HeldBatch) -> None:
        """Return the unprocessed rest of the batch just taken from ``index`` to its front."""
        ch = self.channels[index]
        ch.queue.appendleft(held)
        ch.consumed -= 1

    def replay(self, index: int, batches: Sequence[Any]) -> None:
        """Put restored in-flight batches (and watermark events) in front of everything
        channel ``index`` holds."""
        ch = self.channels[index]
        for entry in reversed(batches):
            if type(entry) is Watermark or type(entry) is WatermarkStatus:
                ch.queue.appendleft(entry)
            else:
                ch.queue.appendleft(HeldBatch(entry, replayed=True))
        ch.consumed -= len(batches)

    # -------------------------------------------------------------------- housekeeping

    def mark_finished(self, index: int) -> None:
        ch = self.channels[index]
        if not ch.finished:
            ch.finished = True
            self.num_finished += 1

    def buffered_batches(self) -> int:
        return sum(len(ch.queue) for ch in self.channels)
