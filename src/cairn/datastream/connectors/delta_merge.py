"""The Delta sink's upsert mode: a keyed changelog applied with one Delta MERGE per commit.

Invariant: the changes a commit applies are reduced to the last one per key, in the order
the writers saw them (checkpoint, then subtask's file sequence, then row); a key's changes
come from one subtask (the stream is keyed by the upsert keys), so that order is the
key's. ``-U`` rows are dropped before they are staged (the ``+U`` after them overwrites the
row); a ``-D`` deletes the key's row, ``+I``/``+U`` insert or replace it.

>>> import pyarrow as pa
>>> t = pa.table({"k": ["a", "b", "a"], "n": [1, 2, 3], DELETE_COLUMN: [False, False, True]})
>>> last_change_per_key(t, ("k",)).to_pydict()
{'k': ['b', 'a'], 'n': [2, 3], '__cairn_delete': [False, True]}
>>> merge_predicate(("k", "my id"))
't.`k` = s.`k` AND t.`my id` = s.`my id`'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cairn.common.types import Row, RowKind

__all__ = ["DELETE_COLUMN", "change_rows", "last_change_per_key", "merge_predicate"]

DELETE_COLUMN = "__cairn_delete"
_ORDER = "__cairn_order"


def change_rows(records: Sequence[Any]) -> tuple[list[Any], list[bool]]:
    """The rows to stage and whether each deletes its key: ``Row``s by their kind (``-U``
    dropped), or the Table API's ``(kind, row)`` pairs (kind 0..3 as ``RowKind``).

    >>> r = Row(k="a", n=1); r.set_row_kind(RowKind.DELETE)
    >>> change_rows([Row(k="a", n=0), r, (1, ("a", 5)), (2, ("a", 6))])
    ([Row(k='a', n=0), Row(k='a', n=1), ('a', 6)], [False, True, False])
    """
    rows, deletes = [], []
    for record in records:
        if isinstance(record, Row):
            kind = record.get_row_kind().value
            row: Any = record
        else:
            kind, row = record
        if kind == RowKind.UPDATE_BEFORE.value:
            continue
        rows.append(row)
        deletes.append(kind == RowKind.DELETE.value)
    return rows, deletes


def last_change_per_key(changes: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The last row of each key, in the order of the keys' last changes."""
    numbered = changes.append_column(_ORDER, pa.array(range(changes.num_rows), pa.int64()))
    last = numbered.group_by(list(keys), use_threads=False).aggregate([(_ORDER, "max")])
    order = pc.sort_indices(last.column(f"{_ORDER}_max"))
    taken = numbered.take(pc.take(last.column(f"{_ORDER}_max"), order))
    return taken.drop_columns([_ORDER])


def merge_predicate(keys: Sequence[str]) -> str:
    """The MERGE's join of target ``t`` and source ``s`` on the keys."""
    return " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
