"""The fault campaign's load: the rate a run is paced at (a fraction of the maximum measured
for its job kind on the same cluster) and the records/s it actually held, from what its file
sink committed.

Invariant: every rate here is counted from the committed output files on S3 (a file appears
there when its checkpoint's commit ran), sampled by the controller, never from the job's own
counters or its source's pace; the functions that turn samples into rates are pure.

A sample is ``(monotonic time, committed lines so far)``. Commits land once per checkpoint,
so a rate over a window is exact up to one checkpoint's records at each end: windows are
kept long (the maximum's 30 s, steady windows of 10 s or more).

    >>> samples = [(0.0, 0), (10.0, 1000), (20.0, 2000), (30.0, 2500)]
    >>> held_rate(samples, 0.0, 20.0)
    100.0
    >>> steady_rate(samples, [(21.0, 29.0)], 0.0, 30.0, min_window_s=10.0)
    (100.0, 20.0)
"""

from __future__ import annotations

import threading
import time
from typing import Any

Sample = tuple[float, int]


def target_rate(max_rate: float, load: float) -> float:
    """The records/s to pace a run at: ``load`` of the measured maximum.

    >>> target_rate(4000.0, 0.5)
    2000.0
    >>> target_rate(4000.0, 1.5)
    Traceback (most recent call last):
    ...
    ValueError: --load must be in (0, 1], got 1.5
    """
    if not 0.0 < load <= 1.0:
        raise ValueError(f"--load must be in (0, 1], got {load:g}")
    if max_rate <= 0.0:
        raise ValueError(f"the measured maximum must be > 0 records/s, got {max_rate:g}")
    return max_rate * load


def held_rate(samples: list[Sample], start: float, end: float) -> float | None:
    """Records/s committed between the first and the last sample in ``[start, end]``; None
    with fewer than two samples there.

    >>> held_rate([(1.0, 10), (3.0, 50), (9.0, 70)], 0.0, 5.0)
    20.0
    >>> held_rate([(1.0, 10)], 0.0, 5.0) is None
    True
    """
    inside = [(t, n) for t, n in samples if start <= t <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def disturbed_windows(
    faults: list[tuple[float, float]], completions: list[float], settle_s: float
) -> list[tuple[float, float]]:
    """When a run was not steady: each fault from when it was made until the run's first
    checkpoint completed after its heal, plus ``settle_s`` (that checkpoint's commit carries
    records processed since the restore); a fault the run never recovered from lasts on.

    ``faults`` are ``(made, healed)`` of every fault of the campaign (a host or storage fault
    made for another run hits this one too); ``completions`` are the run's checkpoint
    completion times.

    >>> disturbed_windows([(10.0, 14.0)], [5.0, 12.0, 17.0, 18.0], settle_s=2.0)
    [(10.0, 19.0)]
    >>> disturbed_windows([(10.0, 14.0)], [5.0], settle_s=2.0)
    [(10.0, inf)]
    """
    windows = []
    for made, healed in faults:
        after = [t for t in completions if t > healed]
        windows.append((made, min(after) + settle_s if after else float("inf")))
    return windows


def steady_windows(
    disturbed: list[tuple[float, float]], start: float, end: float
) -> list[tuple[float, float]]:
    """The parts of ``[start, end]`` outside every disturbed window, in time order.

    >>> steady_windows([(5.0, 8.0), (7.0, 9.0), (20.0, 40.0)], 0.0, 30.0)
    [(0.0, 5.0), (9.0, 20.0)]
    """
    free = []
    at = start
    for a, b in sorted(disturbed):
        if a > at:
            free.append((at, min(a, end)))
        at = max(at, b)
        if at >= end:
            break
    if at < end:
        free.append((at, end))
    return [(a, b) for a, b in free if b > a]


def steady_rate(
    samples: list[Sample],
    disturbed: list[tuple[float, float]],
    start: float,
    end: float,
    min_window_s: float = 10.0,
) -> tuple[float | None, float]:
    """Records/s held while no fault was in effect or being recovered from, and over how
    many seconds: the committed records over the steady windows whose samples span at least
    ``min_window_s``, by their summed duration; ``(None, 0.0)`` if no window is that long.

    >>> samples = [(float(t), 100 * t) for t in range(0, 41, 2)]
    >>> steady_rate(samples, [(12.0, 25.0)], 0.0, 40.0)
    (100.0, 26.0)
    >>> steady_rate(samples, [(5.0, 36.0)], 0.0, 40.0)
    (None, 0.0)
    """
    records = seconds = 0.0
    for a, b in steady_windows(disturbed, start, end):
        inside = [(t, n) for t, n in samples if a <= t <= b]
        if len(inside) >= 2 and inside[-1][0] - inside[0][0] >= min_window_s:
            records += inside[-1][1] - inside[0][1]
            seconds += inside[-1][0] - inside[0][0]
    return (records / seconds if seconds else None, seconds)


def committed_lines(fs: Any, base: str, known: dict[str, tuple[int, int]]) -> int:
    """Lines in the committed files under ``base`` (hidden in-progress and pending files
    left out, as the verdict does); ``known`` caches ``path -> (size, lines)`` so a file is
    read once (again only if its size changed)."""
    fs.invalidate_cache()
    total = 0
    for path, info in fs.find(base, detail=True).items():
        name = path.rsplit("/", 1)[-1]
        if name.startswith((".", "_")) or "/." in path or "/_" in path:
            continue
        size = int(info.get("size") or 0)
        cached = known.get(path)
        if cached is None or cached[0] != size:
            cached = (size, fs.cat_file(path).count(b"\n"))
            known[path] = cached
        total += cached[1]
    return total


class CommitSampler:
    """Counts a run's committed output lines every ``period_s`` on a thread of its own;
    a sample that fails (the storage down or partitioned) is skipped."""

    def __init__(self, filesystem: Any, out_url: str, period_s: float = 2.0) -> None:
        self._filesystem = filesystem  # a callable: a new fsspec filesystem on S3
        self._base = out_url[len("s3://") :] if out_url.startswith("s3://") else out_url
        self._period_s = period_s
        self._known: dict[str, tuple[int, int]] = {}
        self._samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="commit-sampler")
        self._thread.start()

    @property
    def samples(self) -> list[Sample]:
        return list(self._samples)

    def _run(self) -> None:
        fs: Any = None
        while not self._stop.is_set():
            try:
                if fs is None:
                    fs = self._filesystem()
                lines = committed_lines(fs, self._base, self._known)
                self._samples.append((time.monotonic(), lines))
            except Exception:  # storage down or partitioned from the controller: retry
                fs = None
            self._stop.wait(self._period_s)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
