"""A batch computation of Top-N and deduplication in plain Python (the oracle the streaming
operators' final views are checked against), and the view a changelog leaves."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

Row = tuple[Any, ...]
#: (column, ascending, nulls_first)
Order = Sequence[tuple[int, bool, bool]]

ADDS = (0, 2)


def changelog_view(changes: Iterable[tuple[int, Row]]) -> Counter[Row]:
    """The rows left after ``changes``: +I/+U add a row, -U/-D retract one that is there."""
    view: Counter[Row] = Counter()
    for kind, row in changes:
        if kind in ADDS:
            view[row] += 1
        else:
            assert view[row] > 0, f"kind {kind} of {row} retracts a row the view does not hold"
            view[row] -= 1
    return +view


def present_rows(events: Iterable[tuple[int, Row]], key: int) -> dict[Any, list[Row]]:
    """Per partition key, the rows an input's changes leave, in arrival order (a retraction
    removes the first equal row)."""
    rows: dict[Any, list[Row]] = {}
    for kind, row in events:
        group = rows.setdefault(row[key], [])
        if kind in ADDS:
            group.append(row)
        else:
            group.remove(row)
    return rows


def ranked(rows: list[Row], order: Order) -> list[Row]:
    """``rows`` sorted by ``order``; ties keep their arrival order."""
    out = list(rows)
    for index, ascending, nulls_first in reversed(order):
        null_rank = 0 if nulls_first == ascending else 2

        def sort_key(r: Row, i: int = index, n: int = null_rank) -> tuple[Any, ...]:
            return (n,) if r[i] is None else (1, r[i])

        out.sort(key=sort_key, reverse=not ascending)
    return out


def top_n(
    events: Iterable[tuple[int, Row]],
    key: int,
    order: Order,
    start: int,
    end: int,
    with_rank: bool,
) -> Counter[Row]:
    """The rows ranked ``start..end`` per key (with their rank appended when ``with_rank``)
    once ``events`` are applied."""
    out: Counter[Row] = Counter()
    for rows in present_rows(events, key).values():
        for rank, row in enumerate(ranked(rows, order), 1):
            if start <= rank <= end:
                out[(*row, rank) if with_rank else row] += 1
    return out
