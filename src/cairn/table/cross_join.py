"""Joins without an equality between the two sides: ``CROSS JOIN``, ``ON`` a non-equi
condition, and the join of a scalar subquery's one row.

Invariant: pure. Such a join is a regular ``Join`` node without keys — every left row meets
every right row, ``condition`` (over the left's columns then the right's, ``None``: always)
deciding which pairs are joined — and, as Flink's planner does (its ``Exchange`` to a single
distribution), it runs on one subtask: its state holds both whole inputs.

>>> from cairn.table.analysis import Columns
>>> from cairn.table.plan import Values
>>> from cairn.table.plan_text import describe
>>> from cairn.table.types import DataTypes
>>> left = Values((), Columns.of([("a", DataTypes.INT())]))
>>> right = Values((), Columns.of([("b", DataTypes.INT())]))
>>> describe(cross_join(left, right, None, "INNER"))
'Join(joinType=[InnerJoin], where=[], select=[a, b])'
"""

from __future__ import annotations

from cairn.table.analysis import Columns, Rex, resolve
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression
from cairn.table.join_keys import split_keys
from cairn.table.plan import Join, PlanNode

__all__ = ["cross_join", "keyless_condition"]


def cross_join(left: PlanNode, right: PlanNode, condition: Rex | None, join_type: str) -> PlanNode:
    """``left`` joined with ``right`` on ``condition`` only (``join_type``: ``INNER``,
    ``LEFT``, ``RIGHT`` or ``FULL``); the side an outer join pads is nullable."""
    if condition is not None and condition.data_type.root != "BOOLEAN":
        raise ValidationError(f"A join condition must be BOOLEAN, got {condition.data_type}")
    left_types, right_types = left.columns.types, right.columns.types
    if join_type in ("RIGHT", "FULL"):
        left_types = [t.nullable_() for t in left_types]
    if join_type in ("LEFT", "FULL"):
        right_types = [t.nullable_() for t in right_types]
    columns = Columns.of(
        [
            *zip(left.columns.names, left_types, strict=True),
            *zip(right.columns.names, right_types, strict=True),
        ]
    )
    return Join(columns=columns, left=left, right=right, condition=condition, join_type=join_type)


def keyless_condition(left: PlanNode, right: PlanNode, predicate: Expression) -> Rex | None:
    """``predicate`` over the joined row when it has no equality between the two sides (a
    join of ``cross_join``), else ``None`` (a regular or interval join's); a predicate that
    does not resolve is left to the regular join's planner to refuse."""
    columns = Columns.of(
        [
            *zip(left.columns.names, left.columns.types, strict=True),
            *zip(right.columns.names, right.columns.types, strict=True),
        ]
    )
    try:
        rex = resolve(predicate, columns)
    except ValidationError:
        return None
    return None if split_keys(rex, len(left.columns)).left else rex
