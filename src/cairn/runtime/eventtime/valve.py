"""The watermark valve of a task with input channels (Flink's ``StatusWatermarkValve``).

Invariant: the valve's output watermark never decreases and equals the minimum watermark over
the channels that are active and aligned (caught up with the output); idle channels hold
nothing back; when every channel is idle the valve outputs the largest channel watermark it
has not yet passed on, then the idle status; a channel that ended counts as one at
``MAX_WATERMARK``. Each method returns the events to send downstream, in order (usually none).

>>> v = StatusWatermarkValve(2)
>>> v.on_watermark(0, 10)
()
>>> v.on_watermark(1, 7)
(Watermark(timestamp=7),)
>>> v.on_status(1, IDLE)
(Watermark(timestamp=10),)
>>> v.on_status(0, IDLE)
(WatermarkStatus(idle=True),)
"""

from __future__ import annotations

from cairn.events import (
    ACTIVE,
    IDLE,
    MAX_WATERMARK,
    MIN_WATERMARK,
    Watermark,
    WatermarkStatus,
)

__all__ = ["StatusWatermarkValve", "ValveOutput"]

ValveOutput = tuple[Watermark | WatermarkStatus, ...]

_NOTHING: ValveOutput = ()


class StatusWatermarkValve:
    """Per-channel watermarks and statuses of one task's input gate."""

    __slots__ = ("_aligned", "_idle", "_watermarks", "idle", "watermark")

    def __init__(self, num_channels: int) -> None:
        if num_channels < 1:
            raise ValueError(f"a valve needs at least one channel, got {num_channels}")
        self._watermarks = [MIN_WATERMARK] * num_channels
        self._idle = [False] * num_channels
        # Aligned: active and not behind the output (counts for the minimum).
        self._aligned = [True] * num_channels
        self.watermark = MIN_WATERMARK  # last output watermark
        self.idle = False  # last output status

    def on_watermark(self, channel: int, timestamp: int) -> ValveOutput:
        """A watermark arrived on ``channel``; ignored while the channel (or all) is idle."""
        if self.idle or self._idle[channel] or timestamp <= self._watermarks[channel]:
            return _NOTHING
        self._watermarks[channel] = timestamp
        if not self._aligned[channel] and timestamp >= self.watermark:
            self._aligned[channel] = True
        return self._new_min()

    def on_status(self, channel: int, status: WatermarkStatus) -> ValveOutput:
        """``channel`` became idle or active again."""
        if status.idle and not self._idle[channel]:
            self._idle[channel] = True
            self._aligned[channel] = False
            if all(self._idle):
                out: ValveOutput = _NOTHING
                if self._watermarks[channel] == self.watermark:
                    out = self._new_max()
                self.idle = True
                return (*out, IDLE)
            if self._watermarks[channel] == self.watermark:
                return self._new_min()
            return _NOTHING
        if not status.idle and self._idle[channel]:
            self._idle[channel] = False
            if self._watermarks[channel] >= self.watermark:
                self._aligned[channel] = True
            if self.idle:
                self.idle = False
                return (ACTIVE,)
        return _NOTHING

    def on_end_of_partition(self, channel: int) -> ValveOutput:
        """``channel`` ended: it holds nothing back any more."""
        out = self.on_status(channel, ACTIVE) if self._idle[channel] else _NOTHING
        return out + self.on_watermark(channel, MAX_WATERMARK)

    def _new_min(self) -> ValveOutput:
        aligned = [w for w, a in zip(self._watermarks, self._aligned, strict=True) if a]
        if aligned:
            low = min(aligned)
            if low > self.watermark:
                self.watermark = low
                return (Watermark(low),)
        return _NOTHING

    def _new_max(self) -> ValveOutput:
        high = max(self._watermarks)
        if high > self.watermark:
            self.watermark = high
            return (Watermark(high),)
        return _NOTHING
