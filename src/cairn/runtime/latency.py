"""Latency tracking as Flink has it (``metrics.latency.*``): sources emit ``LatencyMarker``s
every interval, each operator records how old a marker is when it gets there, in sliding
histograms named as Flink's ``LatencyStats`` names them.

Invariants: markers never reach a user function; a task records a marker at each operator
of its chain (not at a source operator, which emitted it) and forwards it on one output
channel chosen at random (Flink's ``RecordWriter.randomEmit``), behind every record written
before it (``RecordWriter.emit_latency_marker``); a task without outputs (a sink) forwards
nothing. A histogram keeps the last ``history_size`` latencies (Flink's
``DescriptiveStatisticsHistogram``) and is read once per metrics report, never per record.
With the interval at 0 (the default) no tracker exists and nothing of this runs.
"""

from __future__ import annotations

import enum
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cairn.events import LatencyMarker

__all__ = [
    "Granularity",
    "HistogramStatistics",
    "LatencyConfig",
    "LatencyReport",
    "LatencyScope",
    "LatencyStats",
    "LatencyTracker",
    "SlidingHistogram",
    "quantile",
]


class Granularity(enum.Enum):
    """``metrics.latency.granularity``: what a histogram tells apart (Flink's values)."""

    SINGLE = "single"  # per operator subtask only
    OPERATOR = "operator"  # ... and source operator (Flink's default)
    SUBTASK = "subtask"  # ... and source subtask


@dataclass(frozen=True)
class LatencyConfig:
    """``metrics.latency.interval`` (ms between a source subtask's markers, > 0),
    ``metrics.latency.granularity`` and ``metrics.latency.history-size``."""

    interval_ms: int
    granularity: Granularity = Granularity.OPERATOR
    history_size: int = 128

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError(f"metrics.latency.interval must be > 0 here, got {self.interval_ms}")
        if self.history_size < 1:
            raise ValueError(f"metrics.latency.history-size must be >= 1, got {self.history_size}")


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ascending ``ordered`` values as commons-math's ``Percentile``
    computes it by default (what Flink's histogram statistics use): position q·(n+1),
    interpolated between its neighbours, clamped to the ends.

    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.5)
    2.5
    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.99), quantile([5.0], 0.01)
    (4.0, 5.0)
    """
    n = len(ordered)
    if n == 0:
        return math.nan
    pos = q * (n + 1)
    if pos < 1:
        return ordered[0]
    if pos >= n:
        return ordered[-1]
    below = int(pos)
    lower = ordered[below - 1]
    return lower + (pos - below) * (ordered[below] - lower)


@dataclass(frozen=True)
class HistogramStatistics:
    """A histogram's window at one moment (ms); ``count``: values ever recorded, ``size``:
    values in the window. ``fields()`` are Flink's REST suffixes (``latency_p99``, ...)."""

    count: int
    size: int
    min: float
    max: float
    mean: float
    stddev: float
    median: float
    p75: float
    p90: float
    p95: float
    p98: float
    p99: float
    p999: float

    def fields(self) -> dict[str, float]:
        """Flink's REST suffixes of a histogram (``MetricStore``) with their values."""
        return {
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "median": self.median,
            "stddev": self.stddev,
            "p75": self.p75,
            "p90": self.p90,
            "p95": self.p95,
            "p98": self.p98,
            "p99": self.p99,
            "p999": self.p999,
        }

    def quantiles(self) -> dict[float, float]:
        """The quantiles Flink's Prometheus reporter exports of a histogram."""
        return {
            0.5: self.median,
            0.75: self.p75,
            0.95: self.p95,
            0.98: self.p98,
            0.99: self.p99,
            0.999: self.p999,
        }


class SlidingHistogram:
    """The last ``size`` values (Flink's ``DescriptiveStatisticsHistogram``): a ring buffer.

    >>> h = SlidingHistogram(3)
    >>> for v in (9.0, 1.0, 2.0, 3.0):
    ...     h.update(v)
    >>> s = h.statistics()
    >>> s.count, s.size, s.min, s.max, s.median
    (4, 3, 1.0, 3.0, 2.0)
    """

    __slots__ = ("_next", "_values", "count", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: list[float] = []
        self._next = 0
        self.count = 0

    def update(self, value: float) -> None:
        values = self._values
        if len(values) < self.size:
            values.append(value)
        else:
            values[self._next] = value
            self._next = (self._next + 1) % self.size
        self.count += 1

    def statistics(self) -> HistogramStatistics:
        ordered = sorted(self._values)
        n = len(ordered)
        mean = sum(ordered) / n if n else math.nan
        var = sum((v - mean) ** 2 for v in ordered) / (n - 1) if n > 1 else 0.0
        return HistogramStatistics(
            count=self.count,
            size=n,
            min=ordered[0] if n else math.nan,
            max=ordered[-1] if n else math.nan,
            mean=mean,
            stddev=math.sqrt(var),
            median=quantile(ordered, 0.5),
            p75=quantile(ordered, 0.75),
            p90=quantile(ordered, 0.9),
            p95=quantile(ordered, 0.95),
            p98=quantile(ordered, 0.98),
            p99=quantile(ordered, 0.99),
            p999=quantile(ordered, 0.999),
        )


@dataclass(frozen=True)
class LatencyScope:
    """Where a histogram sits, as Flink's scope: ``source_id`` (granularity operator and
    subtask), ``source_subtask_index`` (subtask), ``operator_id`` and
    ``operator_subtask_index``; its metric is named ``latency``.

    >>> LatencyScope("numbers-0", None, "sum-3", 1).metric_id("p99")
    'latency.source_id.numbers-0.operator_id.sum-3.operator_subtask_index.1.latency_p99'
    >>> LatencyScope(None, None, "sum-3", 1).labels()
    (('operator_id', 'sum-3'), ('operator_subtask_index', '1'))
    """

    source_id: str | None
    source_subtask_index: int | None
    operator_id: str
    operator_subtask_index: int

    def labels(self) -> tuple[tuple[str, str], ...]:
        """The scope's variables in Flink's order (the Prometheus labels)."""
        out: list[tuple[str, str]] = []
        if self.source_id is not None:
            out.append(("source_id", self.source_id))
        if self.source_subtask_index is not None:
            out.append(("source_subtask_index", str(self.source_subtask_index)))
        out.append(("operator_id", self.operator_id))
        out.append(("operator_subtask_index", str(self.operator_subtask_index)))
        return tuple(out)

    def metric_id(self, field: str | None = None) -> str:
        """Flink's REST id under the job (``/jobs/:jobid/metrics``), with a histogram field
        suffix (``p99`` → ``..._latency_p99``)."""
        parts = ["latency"] + [f"{k}.{v}" for k, v in self.labels()] + ["latency"]
        name = ".".join(parts)
        return name if field is None else f"{name}_{field}"


@dataclass(frozen=True)
class LatencyReport:
    """One histogram's statistics, as a task reports them to the job master."""

    scope: LatencyScope
    stats: HistogramStatistics


class LatencyStats:
    """The histograms of one operator subtask (Flink's ``LatencyStats``), one per
    granularity key, created on the first marker of that key."""

    __slots__ = ("_granularity", "_histograms", "_history", "operator_id", "subtask_index")

    def __init__(
        self, operator_id: str, subtask_index: int, granularity: Granularity, history: int
    ) -> None:
        self.operator_id = operator_id
        self.subtask_index = subtask_index
        self._granularity = granularity
        self._history = history
        self._histograms: dict[tuple[str, int] | tuple[str] | tuple[()], SlidingHistogram] = {}

    def report(self, marker: LatencyMarker, now_ms: float) -> None:
        g = self._granularity
        key: tuple[str, int] | tuple[str] | tuple[()]
        if g is Granularity.OPERATOR:
            key = (marker.source_id,)
        elif g is Granularity.SUBTASK:
            key = (marker.source_id, marker.subtask_index)
        else:
            key = ()
        h = self._histograms.get(key)
        if h is None:
            h = self._histograms[key] = SlidingHistogram(self._history)
        h.update(now_ms - marker.marked_time_ms)

    def reports(self) -> list[LatencyReport]:
        out = []
        for key, h in self._histograms.items():
            source = key[0] if len(key) > 0 else None
            source_subtask = key[1] if len(key) > 1 else None
            scope = LatencyScope(source, source_subtask, self.operator_id, self.subtask_index)
            out.append(LatencyReport(scope, h.statistics()))
        return out


class MarkerOutput(Protocol):
    """An output that forwards markers (``runtime.record_writer.RecordWriter``)."""

    def emit_latency_marker(self, marker: LatencyMarker) -> None: ...


class LatencyTracker:
    """One task's side of latency tracking: records markers at ``operator_ids`` (its chain
    without a source head) and forwards them on a random one of ``outputs``; a source task
    (``source_id`` set) also emits a marker every interval from :meth:`emit_due`."""

    __slots__ = (
        "_clock",
        "_interval",
        "_outputs",
        "_stats",
        "next_marker_ms",
        "source_id",
        "subtask_index",
    )

    def __init__(
        self,
        config: LatencyConfig,
        operator_ids: Sequence[str],
        subtask_index: int,
        outputs: Sequence[MarkerOutput],
        source_id: str | None = None,
        clock_ms: Callable[[], float] | None = None,
    ) -> None:
        self._clock = clock_ms if clock_ms is not None else _wall_clock_ms
        self._interval = float(config.interval_ms)
        self._stats = [
            LatencyStats(op, subtask_index, config.granularity, config.history_size)
            for op in operator_ids
        ]
        self._outputs = list(outputs)
        self.source_id = source_id
        self.subtask_index = subtask_index
        # Flink's emitter runs at a fixed rate from the start: the first marker goes at once.
        self.next_marker_ms = self._clock() if source_id is not None else math.inf

    def emit_due(self, now_ms: float | None = None) -> bool:
        """A source task: emit a marker if one is due; True if it did."""
        now = self._clock() if now_ms is None else now_ms
        if self.source_id is None or now < self.next_marker_ms:
            return False
        self.next_marker_ms += self._interval
        if self.next_marker_ms <= now:  # late: one marker, not a burst to catch up
            self.next_marker_ms = now + self._interval
        self.on_marker(LatencyMarker(now, self.source_id, self.subtask_index), now)
        return True

    def on_marker(self, marker: LatencyMarker, now_ms: float | None = None) -> None:
        """Record ``marker`` at every operator of the chain, then pass it on."""
        if self._stats:
            now = self._clock() if now_ms is None else now_ms
            for stats in self._stats:
                stats.report(marker, now)
        outputs = self._outputs
        if len(outputs) == 1:
            outputs[0].emit_latency_marker(marker)
        elif outputs:
            outputs[random.randrange(len(outputs))].emit_latency_marker(marker)

    def reports(self) -> tuple[LatencyReport, ...]:
        """Every histogram of the chain, read now (once per metrics report)."""
        return tuple(r for stats in self._stats for r in stats.reports())


def _wall_clock_ms() -> float:
    return time.time() * 1000.0
