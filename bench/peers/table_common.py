"""The Table API benchmark's data, queries and result check, shared by Cairn and the peers.

Invariant: event ``i`` is ``window_common.event(i)`` — ``(word, epoch ms, value)`` with the
word ``common.key_of(i)`` — on every system: Cairn and the peers generate it from ``i`` in
their own way (Cairn and Spark in their engines, PyFlink in Flink SQL with
:func:`rank_sql`), so all read the same input. Two queries run over it: ``table-wordcount``
(``GROUP BY word`` with a running ``COUNT(*)``, an updating result) and ``table-window``
(1 s ``TUMBLE`` on event time per word, ``COUNT(*)`` and ``SUM(v)``, a 500 ms
bounded-out-of-orderness watermark); with ``udf`` the word goes through a Python scalar
function first (``normalize``, called ``normalize_word`` in the queries: ``upper()``; NORMALIZE
is a keyword of Flink SQL), which changes the words but none of the figures
(:func:`word_rank` reads the rank of either spelling). A run counts only if its final results
give the figures of :func:`expected` (results, events, checksum; the window adds the sum of
the values). Standard library only: every peer venv (and Cairn's) loads it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import window_common as wc
from common import GOLDEN64, key_table, key_width

__all__ = [
    "WORKLOADS",
    "SourceMarks",
    "WordCountTally",
    "default_events_per_second",
    "expected",
    "normalize",
    "rank_sql",
    "steady_rate",
    "word_hash",
    "word_rank",
]

WORKLOADS = ("table-wordcount", "table-window")
MARK_EVERY = 2048  # source progress marks: one per this many events of a subtask
_G_HIGH = GOLDEN64 >> 32
_G_LOW = GOLDEN64 & 0xFFFFFFFF
_2_32 = 1 << 32


def normalize(word: str) -> str:
    """The benchmark's Python scalar function: trivial, so its cost is the call itself.

    >>> normalize("k000042")
    'K000042'
    """
    return word.upper()


def default_events_per_second(records: int) -> int:
    """Events per second of event time: ten 1 s windows over the input (at least 1,000/s).

    >>> default_events_per_second(2_000_000), default_events_per_second(5_000)
    (200000, 1000)
    """
    return max(1000, records // 10)


def word_rank(word: str) -> int:
    """The rank of a word in either spelling (``k000042`` or, after the UDF, ``K000042``)."""
    return int(word[1:])


def word_hash(word: str, count: int) -> int:
    """One word count result's share of the checksum.

    >>> word_hash("k000003", 10), word_hash("K000003", 10)
    (3001249, 3001249)
    """
    rank = word_rank(word)
    return rank * 1_000_003 + count * (rank + 1) * 31


def rank_sql(index: str, num_keys: int) -> str:
    """SQL (integer arithmetic that never overflows a BIGINT for ``index < 2**31``) of the
    word's rank ``((index * GOLDEN64) mod 2**64 >> 32) mod num_keys``: the high 32 bits of the
    product are ``index * G_high + (index * G_low) div 2**32``, modulo ``2**32``.

    >>> i = 123_456_789
    >>> ((i * _G_HIGH) % _2_32 + (i * _G_LOW) // _2_32) % _2_32 % 7 == (
    ...     ((i * GOLDEN64) % 2**64) >> 32) % 7
    True
    """
    return (
        f"MOD(MOD(MOD({index} * {_G_HIGH}, {_2_32}) + ({index} * {_G_LOW}) / {_2_32}, "
        f"{_2_32}), {num_keys})"
    )


def word_sql(index: str, num_keys: int) -> str:
    """Flink SQL of ``common.key_of(index)``: ``'k'`` and the zero-padded rank."""
    width = key_width(num_keys)
    return f"CONCAT('k', LPAD(CAST({rank_sql(index, num_keys)} AS STRING), {width}, '0'))"


def ts_sql(index: str, events_per_second: int) -> str:
    """SQL (BIGINT) of ``window_common.event(index)``'s timestamp, epoch ms."""
    return (
        f"{wc.FIRST_MS} + ({index} * 1000) / {events_per_second} - "
        f"MOD({index} * 7919, {wc.DISORDER_MS})"
    )


# ---- expected results ---------------------------------------------------------------------


def expected(workload: str, records: int, num_keys: int, events_per_second: int) -> dict[str, int]:
    """The figures every system must produce for ``workload`` (UDF or not: the same).

    >>> expected("table-wordcount", 10, 3, 1000)
    {'results': 2, 'events': 10, 'checksum': 2000750}
    """
    if workload == "table-window":
        return wc.expected(records, num_keys, events_per_second)
    keys = key_table(num_keys)
    counts: dict[str, int] = {}
    step = 1_000_000
    for lo in range(0, records, step):
        for word, _, _ in wc.events(range(lo, min(records, lo + step)), keys, events_per_second):
            counts[word] = counts.get(word, 0) + 1
    tally = WordCountTally()
    tally.update(counts.items())
    return tally.figures()


class WordCountTally:
    """The final count of each word, from the changelog or from updated rows; figures."""

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}

    def update(self, rows: Iterable[tuple[str, int]]) -> None:
        """``(word, count)`` rows that are a word's current count (``+I``/``+U``)."""
        latest = self.latest
        for word, count in rows:
            latest[word] = count

    def figures(self) -> dict[str, int]:
        return {
            "results": len(self.latest),
            "events": sum(self.latest.values()),
            "checksum": sum(word_hash(w, c) for w, c in self.latest.items()),
        }


def window_figures(rows: Iterable[tuple[str, int, int, int]]) -> dict[str, int]:
    """Figures of window results ``(word, window start epoch ms, count, sum)``."""
    tally = wc.WindowTally()
    for word, start_ms, count, total in rows:
        tally.add("k" + word[1:], wc.window_index(start_ms), count, total)
    return tally.figures()


def verify(result: dict[str, Any], want: dict[str, int]) -> None:
    """Mark ``result`` ``verified`` when its ``result_*`` figures equal ``want``; a run that
    does not verify keeps its figures but gets no events/s (it did other work).

    >>> r = {"result_results": 1, "result_events": 2, "steady_records_per_s": 5}
    >>> verify(r, {"results": 1, "events": 3}); r["verified"], r["steady_records_per_s"]
    (False, None)
    """
    got = {name: result.get(f"result_{name}") for name in want}
    if all(v is None for v in got.values()):
        return
    result["verified"] = got == want
    if not result["verified"]:
        diff = ", ".join(f"{k} {got[k]} (expected {v})" for k, v in want.items() if got[k] != v)
        result["note"] = "; ".join(filter(None, [f"results differ: {diff}", result.get("note")]))
        result["unverified_events_per_s"] = result.get("steady_records_per_s")
        result["steady_records_per_s"] = None


# ---- throughput from input progress -------------------------------------------------------


def merge_marks(per_source: Iterable[Sequence[tuple[float, int]]]) -> list[tuple[float, int]]:
    """One progress curve ``[(time, events read by all sources)]`` from each source
    subtask's ``(time, its events read so far)`` marks.

    >>> merge_marks([[(1.0, 10), (3.0, 20)], [(2.0, 5)]])
    [(1.0, 10), (2.0, 15), (3.0, 25)]
    """
    events = sorted((t, i, n) for i, marks in enumerate(per_source) for t, n in marks)
    latest: dict[int, int] = {}
    total = 0
    out = []
    for t, i, n in events:
        total += n - latest.get(i, 0)
        latest[i] = n
        out.append((t, total))
    return out


def steady_rate(curve: Sequence[tuple[float, int]], records: int) -> float | None:
    """Events/s between the moments the input read reached 10 % and 90 % of ``records``
    (start-up and the end of input left out), each moment interpolated linearly between the
    two samples around it (a sample every 100 ms is coarse next to a run of a few seconds).

    >>> steady_rate([(0.0, 0), (1.0, 10), (2.0, 50), (3.0, 90), (4.0, 100)], 100)
    40.0
    >>> steady_rate([(0.0, 0), (10.0, 100)], 100)  # 10 % at 1 s, 90 % at 9 s
    10.0
    """

    def reaching(target: float) -> float | None:
        before = None
        for t, n in curve:
            if n >= target:
                if before is None or n == before[1]:
                    return t
                t0, n0 = before
                return t0 + (t - t0) * (target - n0) / (n - n0)
            before = (t, n)
        return None

    lo, hi = reaching(0.1 * records), reaching(0.9 * records)
    if lo is None or hi is None or hi <= lo:
        return None
    return 0.8 * records / (hi - lo)


class SourceMarks:
    """Appends ``"<epoch s> <events read>"`` to a file of its own every ``MARK_EVERY`` events
    (flushed), so a source subtask leaves its progress curve behind."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.count = 0
        self._next = 1
        self._file: Any = None

    def add(self, n: int, now: float, force: bool = False) -> None:
        """``n`` more events read at ``now``; ``force``: mark now (the subtask's last batch)."""
        self.count += n
        if self.count >= self._next or force:
            if self._file is None:
                os.makedirs(self.out_dir, exist_ok=True)
                name = f"source-{os.getpid()}-{id(self):x}.marks"
                self._file = open(os.path.join(self.out_dir, name), "a", encoding="ascii")  # noqa: SIM115
            self._file.write(f"{now:.6f} {self.count}\n")
            self._file.flush()
            self._next = (self.count // MARK_EVERY + 1) * MARK_EVERY


def read_marks(out_dir: str) -> list[list[tuple[float, int]]]:
    """Every source subtask's marks under ``out_dir``."""
    out = []
    if not os.path.isdir(out_dir):
        return out
    for name in sorted(os.listdir(out_dir)):
        if name.endswith(".marks"):
            with open(os.path.join(out_dir, name), encoding="ascii") as f:
                marks = [
                    (float(t), int(n)) for t, n in (line.split() for line in f if line.strip())
                ]
            out.append(marks)
    return out
