"""Filters and projections over a join moved below it, to the side they read (Flink's
``FilterJoinRule`` and ``ProjectJoinTransposeRule``).

Invariant: pure, and the rewritten plan computes the same rows in the same changelog. A
conjunct of a ``Calc`` over a regular or interval join moves into one input's ``Calc`` when
it reads only that input's columns, is deterministic (no user-defined function, no function
the registry marks non-deterministic) and that input is not padded with NULLs by the join
(its rows are never replaced by NULLs, so filtering them before the join filters the same
output rows): the left for ``INNER``, ``LEFT``, ``SEMI`` and ``ANTI`` joins, the right for
``INNER`` and ``RIGHT`` joins; ``FULL`` joins keep every filter above. The conjuncts left
above keep their order. A regular join whose output columns the ``Calc`` over it does not
all read gets a projection below each input keeping only the columns the calc, the join keys
and the join condition read (its state then holds only them), references renumbered.

>>> from cairn.table.analysis import Columns, Rex
>>> from cairn.table.plan import Values
>>> from cairn.table.plan_text import explain
>>> from cairn.table.types import DataTypes
>>> one = Columns.of([("k", DataTypes.INT())])
>>> side = Values(((1,),), one)
>>> both = Columns.of([("k", DataTypes.INT()), ("k0", DataTypes.INT())])
>>> join = Join(columns=both, left=side, right=side, left_keys=(0,), right_keys=(0,))
>>> positive = Rex("call", DataTypes.BOOLEAN(), op="greater_than", operands=(
...     Rex("input", DataTypes.INT(), index=1), Rex("literal", DataTypes.INT(False), value=0)))
>>> print(explain(push_filters_into_join(Calc(columns=both, input=join, condition=positive))))
Join(joinType=[InnerJoin], where=[k = k], select=[k, k0]) changelogMode=[I]
+- Values(tuples=[1 rows], fields=[k]) changelogMode=[I]
+- Calc(where=[greater_than(k, 0)]) changelogMode=[I]
   +- Values(tuples=[1 rows], fields=[k]) changelogMode=[I]
"""

from __future__ import annotations

import dataclasses

from cairn.table.analysis import Columns, Rex, conjunction, conjuncts, input_references
from cairn.table.functions import registry
from cairn.table.plan import Calc, IntervalJoin, Join, PlanNode

__all__ = ["prune_join_columns", "push_filters_into_join"]

_LEFT_KEPT = ("INNER", "LEFT", "SEMI", "ANTI")
_RIGHT_KEPT = ("INNER", "RIGHT")


def push_filters_into_join(calc: Calc) -> PlanNode:
    """``calc`` over a join with the conjuncts that can move moved into the join's inputs
    (``calc`` itself when none can)."""
    join = calc.input
    if not isinstance(join, Join | IntervalJoin):
        return calc
    n_left = len(join.left.columns)
    left: list[Rex] = []
    right: list[Rex] = []
    above: list[Rex] = []
    for c in conjuncts(calc.condition):
        refs = set(input_references([c]))
        if not refs or not _deterministic(c):
            above.append(c)
        elif max(refs) < n_left and join.join_type in _LEFT_KEPT:
            left.append(c)
        elif min(refs) >= n_left and join.join_type in _RIGHT_KEPT:
            right.append(_shifted(c, -n_left))
        else:
            above.append(c)
    if not left and not right:
        return calc
    moved = dataclasses.replace(
        join,
        left=_filtered(join.left, left),
        right=_filtered(join.right, right),
    )
    if calc.projections is None and not above:
        return moved
    return dataclasses.replace(calc, input=moved, condition=conjunction(above))


def _filtered(node: PlanNode, conditions: list[Rex]) -> PlanNode:
    if not conditions:
        return node
    return Calc(columns=node.columns, input=node, condition=conjunction(conditions))


def _deterministic(rex: Rex) -> bool:
    if rex.kind == "call":
        if rex.op in ("udf", "proctime"):
            return False
        builtin = registry.lookup(rex.op)
        if builtin is not None and not builtin.deterministic:
            return False
    return all(_deterministic(o) for o in rex.operands)


def _shifted(rex: Rex, by: int) -> Rex:
    if rex.kind == "input":
        return dataclasses.replace(rex, index=rex.index + by)
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(_shifted(o, by) for o in rex.operands))


def prune_join_columns(calc: PlanNode) -> PlanNode:
    """``calc`` over a regular join reading only the columns it needs from each input
    (``calc`` itself when it needs them all, or is no calc)."""
    if not isinstance(calc, Calc):
        return calc
    join = calc.input
    if not isinstance(join, Join) or join.join_type not in ("INNER", "LEFT", "RIGHT", "FULL"):
        return calc
    if calc.projections is None:
        return calc
    n_left = len(join.left.columns)
    needed = set(input_references([*calc.projections, *conjuncts(calc.condition)]))
    needed |= set(join.left_keys) | {n_left + k for k in join.right_keys}
    needed |= set(input_references(conjuncts(join.condition)))
    if len(needed) == len(join.columns):
        return calc
    left_used = sorted(i for i in needed if i < n_left)
    right_used = sorted(i - n_left for i in needed if i >= n_left)
    position = {i: k for k, i in enumerate(left_used)}
    position.update({n_left + i: len(left_used) + k for k, i in enumerate(right_used)})
    pruned = dataclasses.replace(
        join,
        columns=Columns(tuple(join.columns.columns[i] for i in sorted(needed))),
        left=_projected(join.left, left_used),
        right=_projected(join.right, right_used),
        left_keys=tuple(position[k] for k in join.left_keys),
        right_keys=tuple(position[n_left + k] - len(left_used) for k in join.right_keys),
        condition=None if join.condition is None else _renumbered(join.condition, position),
    )
    return dataclasses.replace(
        calc,
        input=pruned,
        projections=tuple(_renumbered(p, position) for p in calc.projections),
        condition=None if calc.condition is None else _renumbered(calc.condition, position),
    )


def _projected(node: PlanNode, used: list[int]) -> PlanNode:
    if len(used) == len(node.columns):
        return node
    types = node.columns.types
    return Calc(
        columns=Columns(tuple(node.columns.columns[i] for i in used)),
        input=node,
        projections=tuple(Rex("input", types[i], index=i) for i in used),
    )


def _renumbered(rex: Rex, position: dict[int, int]) -> Rex:
    if rex.kind == "input":
        return dataclasses.replace(rex, index=position[rex.index])
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(_renumbered(o, position) for o in rex.operands))
