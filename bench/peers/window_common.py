"""The ``window`` workload's data and result check, shared by Cairn and every peer.

Invariant: event ``i`` is ``(key_of(i), ts(i), value(i))``, a pure function of ``i`` (so each
system generates the same events in its own way), its timestamp at most ``DISORDER_MS`` below
the steady event-time clock ``i / events_per_second``; with a watermark bound of
``BOUND_MS > DISORDER_MS`` and sources that read their part of ``i`` in order, no event is
ever late, so every system must produce exactly the results of :func:`expected`. A window
result ``(key, window index, count, sum)`` contributes :func:`result_hash` to the checksum,
which mixes key, window and figures so that moving counts between keys or windows shows.
Standard library only: every peer venv (and Cairn's) loads it.
"""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Iterable
from typing import Any

from common import GOLDEN64, MASK64, key_table

__all__ = [
    "BOUND_MS",
    "DISORDER_MS",
    "T0_MS",
    "WINDOW_MS",
    "WindowTally",
    "event",
    "expected",
    "result_hash",
    "window_events",
]

WINDOW_MS = 1000
DISORDER_MS = 200  # an event's timestamp is up to this much below the steady clock
BOUND_MS = 500  # the watermarks' bounded out-of-orderness
T0_MS = 1_700_000_000_000  # epoch ms of window 0's start: a whole second, so windows align
FIRST_MS = T0_MS + 1000  # event 0's time: event times never fall before window 0


def event(index: int, keys: list[str], events_per_second: int) -> tuple[str, int, int]:
    """Event ``index``: ``(key, epoch ms, value)``; ``keys`` is ``common.key_table(n)``.

    >>> from common import key_of
    >>> k, ts, v = event(12_345, key_table(100), 1000)
    >>> k == key_of(12_345, 100), ts - FIRST_MS, v
    (True, 12290, 5)
    """
    n = len(keys)
    return (
        keys[(((index * GOLDEN64) & MASK64) >> 32) % n],
        FIRST_MS + index * 1000 // events_per_second - (index * 7919) % DISORDER_MS,
        1 + index % 7,
    )


def events(indices: range, keys: list[str], events_per_second: int) -> list[tuple[str, int, int]]:
    """``event(i)`` for ``i`` in ``indices``, in one comprehension (the sources' batch path)."""
    g, m, n, eps, first, d = GOLDEN64, MASK64, len(keys), events_per_second, FIRST_MS, DISORDER_MS
    return [
        (keys[(((i * g) & m) >> 32) % n], first + i * 1000 // eps - (i * 7919) % d, 1 + i % 7)
        for i in indices
    ]


def window_index(start_ms: int) -> int:
    """A window's index from its start (epoch ms)."""
    return (start_ms - T0_MS) // WINDOW_MS


def result_hash(key: str, window: int, count: int, total: int) -> int:
    """One window result's share of the checksum (``key`` is ``"k"`` + its rank).

    >>> result_hash("k000003", 2, 10, 40)
    3017287
    """
    rank = int(key[1:])
    return rank * 1_000_003 + window * 7_919 + count * (rank + 1) * 31 + total * (window + 3)


def expected(records: int, num_keys: int, events_per_second: int) -> dict[str, int]:
    """The results every system must produce: their number, events and checksum.

    Pure Python over every event (about 1 s per million events).

    >>> expected(10, 3, 5)
    {'results': 3, 'events': 10, 'value_sum': 34, 'checksum': 4032581}
    """
    keys = key_table(num_keys)
    acc: dict[tuple[str, int], list[int]] = {}
    step = 1_000_000
    for lo in range(0, records, step):
        for key, ts, value in events(range(lo, min(records, lo + step)), keys, events_per_second):
            slot = acc.get((key, (ts - T0_MS) // WINDOW_MS))
            if slot is None:
                acc[(key, (ts - T0_MS) // WINDOW_MS)] = [1, value]
            else:
                slot[0] += 1
                slot[1] += value
    tally = WindowTally()
    for (key, window), (count, total) in acc.items():
        tally.add(key, window, count, total)
    return tally.figures()


class WindowTally:
    """What a result sink saw: results, events in them, checksum, and per window index the
    wall-clock times (epoch s) of its first and last result."""

    def __init__(self) -> None:
        self.results = 0
        self.events = 0
        self.value_sum = 0
        self.checksum = 0
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def add(self, key: str, window: int, count: int, total: int, now: float = 0.0) -> None:
        self.results += 1
        self.events += count
        self.value_sum += total
        self.checksum += result_hash(key, window, count, total)
        if now:
            if window not in self.first:
                self.first[window] = now
            self.last[window] = now

    def add_all(self, rows: Iterable[tuple[str, int, int, int]]) -> None:
        now = time.time()
        for key, window, count, total in rows:
            self.add(key, window, count, total, now)

    def figures(self) -> dict[str, int]:
        return {
            "results": self.results,
            "events": self.events,
            "value_sum": self.value_sum,
            "checksum": self.checksum,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.figures(),
            "first": {str(k): v for k, v in self.first.items()},
            "last": {str(k): v for k, v in self.last.items()},
        }


def merge_tallies(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum the figures of several sinks' tallies; per window: earliest first, latest last."""
    out: dict[str, Any] = {"results": 0, "events": 0, "value_sum": 0, "checksum": 0}
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for part in parts:
        for name in ("results", "events", "value_sum", "checksum"):
            out[name] += int(part[name])
        for k, v in part.get("first", {}).items():
            first[int(k)] = min(v, first.get(int(k), v))
        for k, v in part.get("last", {}).items():
            last[int(k)] = max(v, last.get(int(k), v))
    out["first"], out["last"] = first, last
    return out


def window_events(records: int, events_per_second: int) -> dict[int, int]:
    """How many events fall in each window by their steady clock (window ``w >= 1`` holds
    events ``(w - 1) * eps`` up to ``w * eps``; jitter moves a few hundred across each
    boundary, which does not matter for rates over several windows).

    >>> window_events(25, 10)
    {1: 10, 2: 10, 3: 5}
    """
    eps = events_per_second
    return {w: min(records, w * eps) - (w - 1) * eps for w in range(1, -(-records // eps) + 1)}


def steady_rate(merged: dict[str, Any], records: int, events_per_second: int) -> float | None:
    """Events/s from when windows complete: the events of the windows after ``a`` up to ``b``
    over the time between the last results of ``a`` and ``b``, where ``a`` is the first
    window by which 10 % of the input is done and ``b`` the last by which at most 90 % is. A
    window completes once the watermark passes its end, a constant event-time offset behind
    the events processed, so start-up and the final flush stay outside.

    >>> steady_rate({"last": {1: 10.0, 2: 11.0, 3: 12.0, 4: 13.0}}, 40, 10)
    10.0
    """
    last: dict[int, float] = merged["last"]
    per = window_events(records, events_per_second)
    a = b = None
    done = 0
    for w in sorted(per):
        done += per[w]
        if a is None and done >= 0.1 * records:
            a = w
        if done <= 0.9 * records:
            b = w
    if a is None or b is None or b <= a or a not in last or b not in last:
        return None
    if last[b] <= last[a]:
        return None
    return sum(per[w] for w in range(a + 1, b + 1)) / (last[b] - last[a])


def read_tallies(folder: str) -> list[dict[str, Any]]:
    """The tallies the sinks wrote as ``tally-*.json`` into ``folder``."""
    parts = []
    for path in sorted(glob.glob(os.path.join(folder, "tally-*.json"))):
        with open(path) as f:
            parts.append(json.load(f))
    return parts


def result_fields(
    parts: Iterable[dict[str, Any]], records: int, events_per_second: int, started: float
) -> dict[str, Any]:
    """The shared window figures of a run from its sinks' tallies: ``window_results``,
    ``window_events``, ``window_value_sum``, ``window_checksum``, ``steady_records_per_s``
    (:func:`steady_rate`) and ``startup_s`` (``started`` -> the first result)."""
    merged = merge_tallies(parts)
    fields: dict[str, Any] = {
        f"window_{name}": merged[name] for name in ("results", "events", "value_sum", "checksum")
    }
    rate = steady_rate(merged, records, events_per_second)
    fields["steady_records_per_s"] = None if rate is None else round(rate)
    fields["startup_s"] = (
        round(min(merged["first"].values()) - started, 3) if merged["first"] else None
    )
    return fields
