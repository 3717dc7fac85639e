"""Reference results of some Nexmark queries, computed in plain Python from the CSV files.

Invariant: ``oracle(query, folder)`` is the ``nexmark_common.figures`` of the rows Flink's
semantics give for the query over every event of the files (all windows closed at the end
of the bounded input), or ``None`` for a query it does not compute (the driver then takes
Flink SQL's result as the reference). It parses the files with the ``csv`` module alone, so
it shares no code with any engine.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))

import nexmark_common as nc  # noqa: E402

__all__ = ["ORACLES", "oracle"]

_BID = [name for name, _ in nc.COLUMNS].index("b_auction")


def _bids(folder: Path) -> Iterator[tuple[int, int, int, datetime.datetime, str]]:
    """``(auction, bidder, price, dateTime, extra)`` of every bid."""
    for part in sorted(folder.glob("part-*.csv")):
        with open(part, newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                if row[0] != "2":
                    continue
                auction, bidder, price, _, _, when, extra = row[_BID : _BID + 7]
                moment = datetime.datetime.strptime(when, nc.FLINK_TIMESTAMP_FORMAT)
                yield int(auction), int(bidder), int(price), moment, extra or None  # type: ignore[misc]


def _q0(folder: Path) -> list[tuple[Any, ...]]:
    return list(_bids(folder))


def _q1(folder: Path) -> list[tuple[Any, ...]]:
    rate = decimal.Decimal("0.908")
    return [(a, b, rate * p, t, e) for a, b, p, t, e in _bids(folder)]


def _q2(folder: Path) -> list[tuple[Any, ...]]:
    return [(a, p) for a, _, p, _, _ in _bids(folder) if a % 123 == 0]


def _q5(folder: Path) -> list[tuple[Any, ...]]:
    """HOP 10 s every 2 s: bids per auction and window, those at the window's maximum."""
    counts: Counter[tuple[int, int]] = Counter()
    for auction, _, _, moment, _ in _bids(folder):
        ms = round(moment.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
        last = ms - ms % 2000
        for start in range(last, ms - 10_000, -2000):
            counts[(auction, start)] += 1
    best: dict[int, int] = defaultdict(int)
    for (_, start), num in counts.items():
        best[start] = max(best[start], num)
    return [(a, num) for (a, start), num in counts.items() if num >= best[start]]


ORACLES = {"q0": _q0, "q1": _q1, "q2": _q2, "q5": _q5}


def oracle(query: str, folder: Path) -> dict[str, int] | None:
    """The reference figures of ``query`` over the files in ``folder`` (``None``: unknown)."""
    compute = ORACLES.get(query)
    if compute is None:
        return None
    figures: dict[str, int] = nc.figures(("+I", row) for row in compute(folder))
    return figures
