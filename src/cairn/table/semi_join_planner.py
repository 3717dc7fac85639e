"""Planning semi and anti joins: subqueries (``IN``, ``EXISTS``) and ``INTERSECT``/``EXCEPT``.

Invariant: pure. A semi (anti) join is a ``Join`` node of type ``SEMI`` (``ANTI``) whose
output is its left input's columns: the condition's equalities between the sides are its keys
(an expression key computed below the join, as for a regular join), the rest a condition on
each pair. ``NOT IN`` is null-aware as in Flink (its ``SubQueryRemoveRule``): ``x NOT IN
(SELECT y ...)`` is an anti join on ``x = y OR x IS NULL OR y IS NULL`` — a NULL on either side
makes the ``NOT IN`` unknown, so the left row is dropped — where each ``IS NULL`` of a column
that cannot be NULL is left out; a condition without an equality left over has no keys and
runs on one subtask. ``INTERSECT``/``EXCEPT`` are a semi/anti join on every column with NULLs
equal, then distinct rows (Flink's ``ReplaceIntersectWithSemiJoinRule`` and
``ReplaceMinusWithAntiJoinRule``).

>>> from cairn.table.analysis import Columns, Rex
>>> from cairn.table.plan import Values
>>> from cairn.table.plan_text import describe
>>> from cairn.table.types import DataTypes
>>> left = Values((), Columns.of([("a", DataTypes.INT())]))
>>> right = Values((), Columns.of([("b", DataTypes.INT(False))]))
>>> a, b = Rex("input", DataTypes.INT(), 0), Rex("input", DataTypes.INT(False), 1)
>>> describe(semi_join(left, right, in_condition([(a, b)], True), anti=True))
'Join(joinType=[LeftAntiJoin], where=[or(is_null(a), equals(a, b))], select=[a])'
>>> describe(set_operation(left, right, "EXCEPT").inputs[0])
'Join(joinType=[LeftAntiJoin], where=[a IS NOT DISTINCT FROM b], select=[a])'
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.table.analysis import Rex, conjunction
from cairn.table.errors import ValidationError
from cairn.table.join_keys import keyed_side, shift, split_keys
from cairn.table.plan import Aggregate, Calc, Join, PlanNode
from cairn.table.types import DataTypes

__all__ = ["in_condition", "semi_join", "set_operation"]


def _call(op: str, *operands: Rex) -> Rex:
    return Rex("call", DataTypes.BOOLEAN(), op=op, operands=operands)


def in_condition(pairs: Sequence[tuple[Rex, Rex]], negated: bool) -> Rex:
    """``(l1, l2...) [NOT] IN (SELECT r1, r2...)`` as a condition over the joined row (each
    pair: an ``l`` and its ``r``): the equalities, and for ``NOT IN`` each made null-aware
    (``l = r OR l IS NULL OR r IS NULL``)."""
    parts: list[Rex] = []
    for a, b in pairs:
        equal = _call("equals", a, b)
        if not negated:
            parts.append(equal)
            continue
        nulls = [_call("is_null", x) for x in (a, b) if x.data_type.nullable]
        for null in reversed(nulls):
            equal = _call("or", null, equal)
        parts.append(equal)
    condition = conjunction(parts)
    assert condition is not None, "IN compares at least one pair"
    return condition


def semi_join(
    left: PlanNode, right: PlanNode, condition: Rex, anti: bool, filter_nulls: bool = True
) -> PlanNode:
    """The left rows with a right row satisfying ``condition`` (over the left's columns then
    the right's), or with none when ``anti``."""
    if condition.data_type.root != "BOOLEAN":
        raise ValidationError(f"A subquery's condition must be BOOLEAN, got {condition.data_type}")
    keys = split_keys(condition, len(left.columns))
    keyed_left, left_keys = keyed_side(left, keys.left, "$left_key")
    keyed_right, right_keys = keyed_side(right, keys.right, "$right_key")
    added_left = len(keyed_left.columns) - len(left.columns)
    rest = [shift(c, added_left, len(left.columns)) for c in keys.rest]
    combined = conjunction(rest)
    joined = Join(
        columns=keyed_left.columns,
        left=keyed_left,
        right=keyed_right,
        left_keys=left_keys,
        right_keys=right_keys,
        condition=combined,
        join_type="ANTI" if anti else "SEMI",
        filter_nulls=filter_nulls,
    )
    if keyed_left is left:
        return joined
    return Calc(
        columns=left.columns,
        input=joined,
        projections=tuple(Rex("input", t, i) for i, t in enumerate(left.columns.types)),
    )


def set_operation(left: PlanNode, right: PlanNode, kind: str) -> PlanNode:
    """``left INTERSECT right`` or ``left EXCEPT right`` (``kind``), both sides with the same
    column types: the distinct left rows found (not found) among the right's, NULLs equal."""
    if [t.root for t in left.columns.types] != [t.root for t in right.columns.types]:
        raise ValidationError(f"{kind} needs both sides' columns of the same types")
    every = tuple(range(len(left.columns)))
    joined = Join(
        columns=left.columns,
        left=left,
        right=right,
        left_keys=every,
        right_keys=every,
        join_type="ANTI" if kind == "EXCEPT" else "SEMI",
        filter_nulls=False,
    )
    return Aggregate(joined, every, (), left.columns)
