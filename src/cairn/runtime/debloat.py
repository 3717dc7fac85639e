"""Buffer debloating (Flink's ``BufferDebloater``): size network buffers by measured throughput.

Invariant: the decision is a pure function of the measured throughput and the configuration:
the in-flight data of an input gate (its channels' buffers, each of the chosen size) should take
about ``target`` to process; the size stays within [min, max] records and changes only when the
new value differs from the current one by more than ``threshold`` percent.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DebloatConfig:
    target_ms: int = 1_000
    period_ms: int = 200
    samples: int = 20
    threshold_percent: int = 25
    min_size: int = 16
    max_size: int = 1024


def desired_buffer_size(
    throughput_per_s: float, buffers_in_flight: int, config: DebloatConfig
) -> int:
    """Records per buffer so that ``buffers_in_flight`` buffers drain in ``target``.

    >>> desired_buffer_size(1_000.0, 8, DebloatConfig())  # 1000 rec/s, 8 buffers, 1 s
    125
    >>> desired_buffer_size(10_000_000.0, 8, DebloatConfig())
    1024
    >>> desired_buffer_size(0.0, 8, DebloatConfig())
    16
    """
    total = throughput_per_s * config.target_ms / 1000.0
    size = int(total / max(1, buffers_in_flight))
    return max(config.min_size, min(config.max_size, size))


def should_change(current: int, new: int, threshold_percent: int) -> bool:
    """Flink's threshold: ignore changes of at most ``threshold_percent`` percent.

    >>> should_change(100, 120, 25), should_change(100, 130, 25), should_change(16, 16, 0)
    (False, True, False)
    """
    if new == current:
        return False
    return abs(new - current) * 100 > threshold_percent * current


class BufferDebloater:
    """Throughput of one input gate (exponential moving average) and the buffer size it calls for.

    ``observe`` is called at least every ``period`` with the records consumed so far; it
    returns the new buffer size when the size should change, else None.

    >>> d = BufferDebloater(DebloatConfig(), buffers_in_flight=8, now_ms=0)
    >>> d.observe(records_total=1_000, now_ms=1_000)  # 1000 records/s
    125
    >>> d.observe(records_total=2_050, now_ms=2_000) is None  # 1050/s: within the threshold
    True
    """

    def __init__(self, config: DebloatConfig, buffers_in_flight: int, now_ms: int) -> None:
        self.config = config
        self.buffers_in_flight = buffers_in_flight
        self.size = config.max_size
        self.throughput = 0.0
        self._last_ms = now_ms
        self._last_records = 0
        self._measured = False
        self.next_ms = now_ms + config.period_ms

    def observe(self, records_total: int, now_ms: int) -> int | None:
        elapsed = now_ms - self._last_ms
        if elapsed <= 0:
            return None
        rate = (records_total - self._last_records) * 1000.0 / elapsed
        self._last_ms, self._last_records = now_ms, records_total
        self.next_ms = now_ms + self.config.period_ms
        if not self._measured:
            self.throughput, self._measured = rate, True
        else:
            alpha = 2.0 / (self.config.samples + 1)
            self.throughput += alpha * (rate - self.throughput)
        new = desired_buffer_size(self.throughput, self.buffers_in_flight, self.config)
        if should_change(self.size, new, self.config.threshold_percent):
            self.size = new
            return new
        return None
