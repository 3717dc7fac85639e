"""A join condition's equalities between the two sides, as the join's keys.

Invariant: pure. A conjunct ``l = r`` is a key when one operand reads only columns of the
left input and the other only columns of the right (each at least one); everything else stays
a condition on the joined pair. A key that is an expression, not a column
(``MOD(b.auction, 10000) = s.key``), is computed by a projection pushed below the join onto
its side, as Flink's planner pushes join-key expressions into a ``Calc`` (its
``JoinPushExpressionsRule``): the side gains one column per such key, appended after its own,
and the conditions left over are re-indexed to the widened sides.

>>> from cairn.table.analysis import Columns, Rex
>>> from cairn.table.types import DataTypes
>>> big = DataTypes.BIGINT()
>>> a, b = Rex("input", big, 0), Rex("input", big, 1)
>>> ten = Rex("literal", big, value=10)
>>> eq = Rex("call", DataTypes.BOOLEAN(), op="equals",
...          operands=(Rex("call", big, op="mod", operands=(a, ten)), b))
>>> keys = split_keys(eq, 1)
>>> [str(k) for k in keys.left], [str(k) for k in keys.right], keys.rest
(['mod($0, 10)'], ['$0'], ())
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from cairn.table.analysis import Columns, Rex, conjuncts, input_references
from cairn.table.errors import ValidationError
from cairn.table.plan import Calc, PlanNode

__all__ = ["JoinKeys", "check_join_names", "keyed_side", "shift", "split_keys", "without_keys"]


@dataclass(frozen=True)
class JoinKeys:
    """The key pairs of a join (``left[i] = right[i]``, each over its own side's columns) and
    the other conjuncts (over the joined row)."""

    left: tuple[Rex, ...]
    right: tuple[Rex, ...]
    rest: tuple[Rex, ...]


def check_join_names(names: Sequence[str]) -> None:
    """Refuse a joined row whose two sides share a column name (Flink asks to rename)."""
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValidationError(
            f"Join tables have duplicate column names: {', '.join(duplicates)}; rename them"
            " first (rename_columns)"
        )


def split_keys(condition: Rex, n_left: int) -> JoinKeys:
    """The key equalities of ``condition`` over a joined row whose first ``n_left`` columns
    are the left input's."""
    left: list[Rex] = []
    right: list[Rex] = []
    rest: list[Rex] = []
    for c in conjuncts(condition):
        if c.kind == "call" and c.op == "equals":
            a, b = c.operands
            side_a, side_b = _side(a, n_left), _side(b, n_left)
            if side_a == "left" and side_b == "right":
                left.append(a)
                right.append(shift(b, -n_left))
                continue
            if side_a == "right" and side_b == "left":
                left.append(b)
                right.append(shift(a, -n_left))
                continue
        rest.append(c)
    return JoinKeys(tuple(left), tuple(right), tuple(rest))


def _side(rex: Rex, n_left: int) -> str | None:
    refs = list(input_references([rex]))
    if not refs:
        return None
    if all(i < n_left for i in refs):
        return "left"
    if all(i >= n_left for i in refs):
        return "right"
    return None


def shift(rex: Rex, by: int, at_or_above: int = 0) -> Rex:
    """``rex`` with each column reference ``>= at_or_above`` moved by ``by``."""
    if rex.kind == "input":
        return dataclasses.replace(rex, index=rex.index + by) if rex.index >= at_or_above else rex
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(shift(o, by, at_or_above) for o in rex.operands))


def keyed_side(
    node: PlanNode, keys: tuple[Rex, ...], prefix: str
) -> tuple[PlanNode, tuple[int, ...]]:
    """``node`` with a column appended for each key that is not one of its columns (named
    ``<prefix><i>``), and each key's column position."""
    if all(k.kind == "input" for k in keys):
        return node, tuple(k.index for k in keys)
    n = len(node.columns)
    projections = [Rex("input", t, i) for i, t in enumerate(node.columns.types)]
    pairs = list(zip(node.columns.names, node.columns.types, strict=True))
    indexes = []
    for k in keys:
        if k.kind == "input":
            indexes.append(k.index)
            continue
        indexes.append(len(projections))
        pairs.append((f"{prefix}{len(projections) - n}", k.data_type))
        projections.append(k)
    calc = Calc(columns=Columns.of(pairs), input=node, projections=tuple(projections))
    return calc, tuple(indexes)


def without_keys(
    joined: PlanNode, columns: Columns, left_arity: int, keyed_left_arity: int, right_arity: int
) -> PlanNode:
    """``joined`` (a keyed left side of ``keyed_left_arity`` columns, then the right side)
    without the key columns ``keyed_side`` added, as ``columns`` (the join's own)."""
    kept = [*range(left_arity), *range(keyed_left_arity, keyed_left_arity + right_arity)]
    types = joined.columns.types
    return Calc(
        columns=columns,
        input=joined,
        projections=tuple(Rex("input", types[i], i) for i in kept),
    )
