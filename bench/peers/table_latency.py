"""The Table API benchmark's latency mode: what a latency is, for all three systems alike.

Invariant: a latency run paces the source at ``rate`` events per second of wall-clock time,
released a second's worth at a time (Flink's ``datagen`` with ``rows-per-second`` does so,
Spark's ``rate`` source makes a second's rows readable when that second ends, Cairn's
:class:`PerSecondBursts` limiter copies Flink's), with event time advancing as fast as wall
time (``events_per_second == rate``). A latency is measured from the moment the source
*offers* an event to the job — Cairn and PyFlink stamp the wall clock as their source emits
the event; Spark's offer is the end of the event's second (``spark_offer_ms``) — to the moment
a result that needs it reaches the sink:

* ``table-wordcount``: per event, the first update of its word's count that includes it. Cairn
  and PyFlink emit one update per event and carry ``MAX(emitted)`` (the newest event folded
  in) with it; Spark's update of a micro-batch includes every event the batch read, each
  measured from its own offer to the end of the batch (``foreachBatch``).
* ``table-window``: per window result, from the offer of the event that closed the window —
  with the source read as ``parallelism`` strided splits, the later of the splits' first
  events with a timestamp at or past the window's end plus the watermark bound
  (:func:`closing_indices`: after it, every split's bounded-out-of-orderness watermark has
  passed the end) — to the result's arrival.

Samples come from the words whose rank is a multiple of :func:`sample_every` (the sink must
not become the bottleneck; Spark's batches are weighted instead), and those offered before
``warmup_s`` after the first result reached the sink are left out (start-up; Spark's ``rate``
source keeps its clock running through its first, slow batch and leaves a backlog).
Percentiles are nearest-rank over the (weighted) samples. A latency only means something
below the system's capacity: the figures include draining each second's burst, so choose a
``rate`` well below the throughput run's events/s. Standard library only: every peer venv
(and Cairn's) loads it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import window_common as wc

__all__ = [
    "NOTE",
    "PerSecondBursts",
    "closing_indices",
    "latency_fields",
    "sample_every",
    "spark_event_samples",
    "spark_offer_ms",
    "weighted_percentile",
    "window_closers",
]

SAMPLES_PER_S = 250  # sampled results per second at most (about)
# The result's note on what its latency columns measure (every system's the same).
NOTE = {
    "table-wordcount": "latency: per event, from its offer by the source to the sink "
    "receiving the first update of its word's count that includes it (sampled words; the "
    "first seconds left out)",
    "table-window": "latency: per window result, from the offer by the source of the event "
    "that closed the window (the later of the 2 splits' first events at or past the window's "
    "end + 500 ms) to the result reaching the sink (sampled words; the first seconds left out)",
}


def sample_every(num_keys: int, rate: int) -> int:
    """Sample the words whose rank is a multiple of this: about ``SAMPLES_PER_S`` updates
    (or window results) a second.

    >>> sample_every(10_000, 10_000), sample_every(10_000, 100), sample_every(3, 100_000)
    (40, 1, 3)
    """
    return max(1, min(num_keys, rate // SAMPLES_PER_S))


def closing_indices(
    window: int, records: int, events_per_second: int, parallelism: int
) -> tuple[int, ...] | None:
    """For each of the ``parallelism`` strided splits (split ``j`` reads ``j, j + p, ...``),
    the first event whose timestamp is at or past window ``window``'s end plus
    ``window_common.BOUND_MS``; ``None`` when a split has none in the input (the end of
    input closes that window, not an event).

    >>> closing_indices(1, 100_000, 1000, 2)  # window 1 ends at 2 s: events at 2.5 s or past
    (1516, 1511)
    >>> closing_indices(1, 1500, 1000, 2) is None
    True
    """
    threshold = wc.T0_MS + (window + 1) * wc.WINDOW_MS + wc.BOUND_MS
    # ts(i) <= the steady clock FIRST_MS + i * 1000 // eps: no earlier index can reach it.
    start = max(0, (threshold - wc.FIRST_MS) * events_per_second // 1000 - 1)
    out = []
    for j in range(parallelism):
        i = start + (j - start) % parallelism
        while i < records and _ts(i, events_per_second) < threshold:
            i += parallelism
        if i >= records:
            return None
        out.append(i)
    return tuple(out)


def _ts(i: int, eps: int) -> int:
    return wc.FIRST_MS + i * 1000 // eps - (i * 7919) % wc.DISORDER_MS


def window_closers(
    records: int, events_per_second: int, parallelism: int
) -> dict[int, tuple[int, ...]]:
    """:func:`closing_indices` of every window of the input that an event closes.

    >>> window_closers(3000, 1000, 2)
    {0: (516, 511), 1: (1516, 1511), 2: (2516, 2511)}
    """
    out = {}
    last = wc.window_index(_ts(records - 1, events_per_second)) if records else -1
    for w in range(last + 1):
        found = closing_indices(w, records, events_per_second, parallelism)
        if found is not None:
            out[w] = found
    return out


def spark_offer_ms(index: int, start_ms: int, rate: int) -> int:
    """When Spark's ``rate`` source (started at ``start_ms``, ``rate`` rows/s) makes row
    ``index`` readable: the end of its second (its offsets count whole seconds).

    >>> spark_offer_ms(0, 10_000, 100), spark_offer_ms(99, 10_000, 100)
    (11000, 11000)
    >>> spark_offer_ms(100, 10_000, 100)
    12000
    """
    return start_ms + (index // rate + 1) * 1000


def spark_event_samples(
    batches: Iterable[tuple[float, int, int]], start_ms: int, rate: int, records: int
) -> list[tuple[float, float, float]]:
    """The word count's samples of Spark: each micro-batch ``(done, epoch s; first second;
    end second)`` read the rows of its seconds, and its update includes every one of them:
    per second, ``(offer, latency ms, the second's events)``.

    >>> spark_event_samples([(12.5, 0, 2)], 10_000, 100, 150)
    [(11.0, 1500.0, 100), (12.0, 500.0, 50)]
    """
    out = []
    for done, first, end in batches:
        for second in range(first, end):
            events = min(records, (second + 1) * rate) - second * rate
            if events <= 0:
                continue
            offer = spark_offer_ms(second * rate, start_ms, rate) / 1000.0
            out.append((offer, (done - offer) * 1000.0, events))
    return out


def weighted_percentile(samples: Sequence[tuple[float, float]], q: float) -> float | None:
    """Nearest-rank percentile of ``(value, weight)`` samples (``None`` when empty): the
    smallest value whose cumulative weight reaches ``q`` % of the total.

    >>> weighted_percentile([(3.0, 1), (1.0, 1), (2.0, 2)], 50)
    2.0
    >>> weighted_percentile([(10.0, 99), (500.0, 1)], 99), weighted_percentile([], 50)
    (10.0, None)
    """
    ordered = sorted((v, w) for v, w in samples if w > 0)
    if not ordered:
        return None
    total = sum(w for _, w in ordered)
    target = max(q / 100.0 * total, min(w for _, w in ordered) * 1e-9)
    seen = 0.0
    for value, weight in ordered:
        seen += weight
        if seen >= target - 1e-9 * total:
            return value
    return ordered[-1][0]


def latency_fields(
    samples: Iterable[tuple[float, float, float]], warmup_s: float
) -> dict[str, float | int | None]:
    """The result's latency columns from ``(offered at, epoch s; latency ms; weight)``
    samples, leaving out those offered before ``warmup_s`` after the first result reached
    the sink (start-up, and the backlog a source that kept its clock running through it
    left behind, are not the steady state); all ``None`` when none is left.

    >>> f = latency_fields([(0.0, 900.0, 1), (5.0, 10.0, 3), (6.0, 30.0, 1)], warmup_s=2)
    >>> f["latency_p50_ms"], f["latency_p99_ms"], f["latency_max_ms"], f["latency_samples"]
    (10.0, 30.0, 30.0, 4)
    >>> latency_fields([(0.0, 900.0, 1)], warmup_s=2)["latency_p99_ms"] is None
    True
    """
    rows = [(t, ms, w) for t, ms, w in samples if w > 0]
    out: dict[str, float | int | None] = dict.fromkeys(
        ("latency_p50_ms", "latency_p99_ms", "latency_max_ms")
    )
    out["latency_samples"] = 0
    if not rows:
        return out
    start = min(t + ms / 1000.0 for t, ms, _ in rows) + warmup_s
    kept = [(ms, w) for t, ms, w in rows if t >= start]
    if not kept:
        return out
    p50, p99 = weighted_percentile(kept, 50), weighted_percentile(kept, 99)
    out["latency_p50_ms"] = None if p50 is None else round(p50, 2)
    out["latency_p99_ms"] = None if p99 is None else round(p99, 2)
    out["latency_max_ms"] = round(max(ms for ms, _ in kept), 2)
    out["latency_samples"] = int(sum(w for _, w in kept))
    return out


class PerSecondBursts:
    """Cairn's source pacing in latency runs, as Flink's ``datagen`` paces: a subtask
    releases ``rate`` records (its share) at once at the start of each second from its
    first poll, and nothing more until the next second; it never skips a second it fell
    behind on. Duck-types ``cairn``'s ``RateLimiter`` (``acquire``, ``seconds_until_ready``).

    >>> now = [100.0]
    >>> bursts = PerSecondBursts(500, lambda: now[0])
    >>> bursts.acquire(300), bursts.acquire(300), bursts.acquire(300)
    (300, 200, 0)
    >>> now[0] = 100.4; bursts.seconds_until_ready(1)
    0.6
    >>> now[0] = 101.0; bursts.acquire(1000)
    500
    """

    def __init__(self, rate: float, clock: object) -> None:
        self._rate = rate
        self._clock = clock
        self._start: float | None = None
        self._granted = 0

    def _allowance(self) -> tuple[int, float]:
        now = self._clock()  # type: ignore[operator]
        if self._start is None:
            self._start = now
        seconds = math.floor(now - self._start)
        return int((seconds + 1) * self._rate) - self._granted, self._start + seconds + 1 - now

    def acquire(self, wanted: int) -> int:
        allowed, _ = self._allowance()
        granted = max(0, min(wanted, allowed))
        self._granted += granted
        return granted

    def seconds_until_ready(self, wanted: int) -> float:
        allowed, until_next = self._allowance()
        return 0.0 if allowed > 0 else round(until_next, 9)
