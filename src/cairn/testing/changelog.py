"""The rows a changelog leaves, for tests of updating tables.

Invariant: ``+I``/``+U`` add a row, ``-U``/``-D`` retract one the view holds (a retraction
of a row not there fails the test, naming it); the result holds the rows left, with their
multiplicity.

>>> from cairn.common.types import Row, RowKind
>>> gone = Row(1); gone.set_row_kind(RowKind.UPDATE_BEFORE)
>>> rows_view([Row(1), Row(2), gone])
Counter({(2,): 1})
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["rows_view"]


def rows_view(rows: Iterable[Any]) -> Counter[tuple[Any, ...]]:
    """The multiset of rows ``rows`` (``Row``s with their kinds, as ``collect()`` gives
    them) leave."""
    view: Counter[tuple[Any, ...]] = Counter()
    for r in rows:
        row = tuple(r)
        if r.get_row_kind().short_string() in ("+I", "+U"):
            view[row] += 1
        else:
            assert view[row] > 0, f"retracted a row not in the view: {row}"
            view[row] -= 1
    return +view
