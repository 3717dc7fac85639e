"""Turn what the benchmark sinks left on disk into numbers: rates, latencies, throughput dips.

Invariant: pure functions of the files and timings given (no clocks, no engine), so every
figure in RESULTS.md can be recomputed from a run's output directory.
"""

from __future__ import annotations

import bisect
import glob
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "LatencySummary",
    "Progress",
    "merge_latency",
    "nearest_rank",
    "read_progress",
    "throughput_dip",
]

_PROGRESS_NAME = re.compile(r"progress-(\d+)-(\d+)\.log$")

Marks = list[tuple[float, int]]  # (epoch seconds, records so far), increasing


def read_progress(out_dir: str) -> dict[tuple[int, int], Marks]:
    """``(subtask, attempt) -> marks`` of every progress file in ``out_dir``."""
    result: dict[tuple[int, int], Marks] = {}
    for path in glob.glob(os.path.join(out_dir, "progress-*.log")):
        match = _PROGRESS_NAME.search(path)
        if match is None:
            continue
        marks: Marks = []
        with open(path, encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2:  # a killed writer may leave a torn last line
                    try:
                        marks.append((float(parts[0]), int(parts[1])))
                    except ValueError:
                        continue
        result[(int(match.group(1)), int(match.group(2)))] = marks
    return result


@dataclass(frozen=True)
class Progress:
    """Records processed by all subtasks together over time: the subtasks' marks merged into
    one step per mark, interpolated linearly between consecutive merged marks (marks are a
    few milliseconds apart, so this is exact enough).

    >>> p = Progress.of([[(0.0, 0), (1.0, 100)], [(0.0, 0), (2.0, 100)]])
    >>> p.total, p.time_reaching(150), p.count_at(1.5)
    (200, 1.5, 150.0)
    """

    times: tuple[float, ...]
    counts: tuple[int, ...]  # cumulative over all subtasks at ``times``

    @classmethod
    def of(cls, per_subtask: Iterable[Marks]) -> Progress:
        events: list[tuple[float, int]] = []
        for marks in per_subtask:
            previous = 0
            for t, n in marks:
                if n != previous:
                    events.append((t, n - previous))
                    previous = n
            if marks:
                events.append((marks[0][0], 0))  # the subtask's start
        events.sort()
        times: list[float] = []
        counts: list[int] = []
        total = 0
        for t, delta in events:
            total += delta
            times.append(t)
            counts.append(total)
        return cls(tuple(times), tuple(counts))

    @property
    def total(self) -> int:
        return self.counts[-1] if self.counts else 0

    @property
    def first_output(self) -> float | None:
        """When the first record was processed (``None`` if none was)."""
        for t, n in zip(self.times, self.counts, strict=True):
            if n > 0:
                return t
        return None

    def time_reaching(self, n: float) -> float | None:
        """Interpolated time at which the cumulative count reached ``n``."""
        i = bisect.bisect_left(self.counts, n)
        if i >= len(self.counts):
            return None
        if i == 0:
            return self.times[0]
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = self.counts[i - 1], self.counts[i]
        return t0 + (t1 - t0) * (n - c0) / (c1 - c0)

    def count_at(self, t: float) -> float:
        """Interpolated cumulative count at time ``t``."""
        i = bisect.bisect_right(self.times, t)
        if i == 0:
            return 0.0
        if i >= len(self.times):
            return float(self.total)
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = self.counts[i - 1], self.counts[i]
        return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else float(c1)

    def steady_rate(self, expected: int, lo: float = 0.1, hi: float = 0.9) -> float | None:
        """Records/s between the moments ``lo`` and ``hi`` of ``expected`` were processed.

        Start-up and the drain at the end are outside the window by construction.
        """
        t_lo, t_hi = self.time_reaching(lo * expected), self.time_reaching(hi * expected)
        if t_lo is None or t_hi is None or t_hi <= t_lo:
            return None
        return (hi - lo) * expected / (t_hi - t_lo)


def nearest_rank(sorted_values: Sequence[float], p: float) -> float:
    """The ``p``-quantile by nearest rank (as Flink's and the checkpoint stats' summaries).

    >>> nearest_rank([1, 2, 3, 4], 0.5), nearest_rank([1, 2, 3, 4], 0.99)
    (2, 4)
    """
    if not sorted_values:
        raise ValueError("no values")
    return sorted_values[max(0, math.ceil(p * len(sorted_values)) - 1)]


@dataclass(frozen=True)
class LatencySummary:
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    skipped: int  # warm-up records not timed
    p999_ms: float = 0.0


def merge_latency(out_dir: str) -> LatencySummary | None:
    """Merge the per-subtask histograms; a bucket's upper edge stands for its values."""
    counts: dict[int, int] = {}
    max_ns = skipped = 0
    bucket_ns = 1
    for path in glob.glob(os.path.join(out_dir, "latency-*.json")):
        with open(path, encoding="ascii") as f:
            data = json.load(f)
        bucket_ns = int(data["bucket_ns"])
        for k, v in data["counts"].items():
            counts[int(k)] = counts.get(int(k), 0) + int(v)
        max_ns = max(max_ns, int(data["max_ns"]))
        skipped += int(data["skipped"])
    total = sum(counts.values())
    if total == 0:
        return None

    def quantile_ms(p: float) -> float:
        rank = max(1, math.ceil(p * total))
        seen = 0
        for bucket in sorted(counts):
            seen += counts[bucket]
            if seen >= rank:
                return min((bucket + 1) * bucket_ns, max_ns) / 1e6
        return max_ns / 1e6

    return LatencySummary(
        total, quantile_ms(0.5), quantile_ms(0.99), max_ns / 1e6, skipped, quantile_ms(0.999)
    )


@dataclass(frozen=True)
class Dip:
    """Mean throughput in windows overlapping checkpoint async parts vs. quiet windows."""

    busy_rate: float
    quiet_rate: float
    busy_windows: int
    quiet_windows: int

    @property
    def dip_pct(self) -> float:
        """How much lower the rate is while async parts run (negative: higher)."""
        return 100.0 * (1.0 - self.busy_rate / self.quiet_rate) if self.quiet_rate else 0.0


def throughput_dip(
    progress: Progress,
    busy: Sequence[tuple[float, float]],
    quiet_exclusions: Sequence[tuple[float, float]],
    start: float,
    end: float,
    window_s: float = 0.1,
) -> Dip | None:
    """Compare the rate in ``window_s`` windows of ``[start, end)`` that overlap a ``busy``
    interval with windows overlapping neither ``busy`` nor ``quiet_exclusions`` (e.g. the
    synchronous parts, during which processing pauses by design).

    >>> p = Progress.of([[(0.0, 0), (1.0, 100), (2.0, 150), (3.0, 250)]])
    >>> d = throughput_dip(p, [(1.0, 2.0)], [], 0.0, 3.0, window_s=1.0)
    >>> round(d.dip_pct), d.busy_windows, d.quiet_windows
    (50, 1, 2)
    """
    busy_rates: list[float] = []
    quiet_rates: list[float] = []
    n = int((end - start) / window_s)
    for k in range(n):
        a = start + k * window_s
        b = a + window_s
        rate = (progress.count_at(b) - progress.count_at(a)) / window_s
        if _overlaps(a, b, busy):
            busy_rates.append(rate)
        elif not _overlaps(a, b, quiet_exclusions):
            quiet_rates.append(rate)
    if not busy_rates or not quiet_rates:
        return None
    return Dip(
        sum(busy_rates) / len(busy_rates),
        sum(quiet_rates) / len(quiet_rates),
        len(busy_rates),
        len(quiet_rates),
    )


def _overlaps(a: float, b: float, intervals: Sequence[tuple[float, float]]) -> bool:
    return any(lo < b and hi > a for lo, hi in intervals)
