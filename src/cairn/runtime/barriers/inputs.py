"""Per-channel facts every handler checks before it decides anything.

Invariant: a finished channel delivers nothing more, and barrier ids strictly increase on
each channel (an upstream task emits its barriers in checkpoint order); a violation raises
before any book is changed.
"""

from __future__ import annotations

from cairn.events import CheckpointBarrier
from cairn.ids import CheckpointId
from cairn.runtime.barriers.api import IllegalBarrierEventError


class InputChannels:
    """Which channels are still open and the last barrier id seen on each."""

    __slots__ = ("_finished", "_last_barrier_id", "num_open")

    def __init__(self, num_channels: int) -> None:
        if num_channels < 1:
            raise ValueError(
                f"a barrier handler needs at least one input channel, got {num_channels}"
            )
        self._finished = [False] * num_channels
        self._last_barrier_id = [CheckpointId(-1)] * num_channels
        self.num_open = num_channels

    @property
    def num_channels(self) -> int:
        return len(self._finished)

    def is_open(self, channel: int) -> bool:
        """True if ``channel`` has not delivered its end of partition yet."""
        return not self._finished[channel]

    def last_barrier_id(self, channel: int) -> CheckpointId:
        """The highest barrier id ``channel`` delivered, -1 before its first."""
        return self._last_barrier_id[channel]

    def check_open(self, channel: int, event: str) -> None:
        """Raise unless ``channel`` exists and has not delivered its end of partition."""
        if not 0 <= channel < len(self._finished):
            raise IllegalBarrierEventError(
                f"{event} on channel {channel}: the task has channels 0..{len(self._finished) - 1}"
            )
        if self._finished[channel]:
            raise IllegalBarrierEventError(
                f"{event} on channel {channel} after its end of partition"
            )

    def accept_barrier(self, channel: int, barrier: CheckpointBarrier) -> None:
        """Check ``barrier`` against its channel's history, then record it."""
        checkpoint_id = barrier.checkpoint_id
        self.check_open(channel, f"barrier {checkpoint_id}")
        last = self._last_barrier_id[channel]
        if checkpoint_id <= last:
            raise IllegalBarrierEventError(
                f"barrier {checkpoint_id} on channel {channel} after barrier {last}: "
                "barrier ids must strictly increase on a channel"
            )
        self._last_barrier_id[channel] = checkpoint_id

    def finish(self, channel: int) -> None:
        """Record the end of partition of ``channel``."""
        self.check_open(channel, "end of partition")
        self._finished[channel] = True
        self.num_open -= 1
