"""Rewriting a logical plan into the one that runs: adjacent calcs merged, unused columns pruned,
filters and projections over a join moved to the side they read (``join_pushdown``), an
aggregate's input narrowed to what it reads (``aggregate_pruning``).

Invariant: pure, and every rewrite keeps what the plan computes — the same rows, in the same
kinds, under the same column names at the root. A ``Calc`` over a ``Calc`` becomes one
``Calc`` (Flink's ``CalcMergeRule``): the upper one's column references are replaced by the
lower one's expressions, so the lower projections nobody reads are never computed (the
projection pruning Flink gets from ``ProjectRemoveRule``), and the conditions are checked in
order, the lower one first. Two calcs are kept apart when merging would compute a
non-trivial expression twice (an upper calc reading one of them twice, e.g. a UDF result
both filtered on and projected) or when either awaits an async function (it runs on its own
operator). A calc calling pandas (vectorized) functions is first split around the
``PythonCalc`` nodes that run them (``pandas_split``, Flink's ``PythonCalcSplitRule``); its
pieces are then merged with their neighbours, never across a ``PythonCalc``.

>>> from cairn.table.analysis import Columns, resolve
>>> from cairn.table.expressions import col
>>> from cairn.table.plan import Values
>>> from cairn.table.plan_text import explain
>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("a", DataTypes.BIGINT()), ("b", DataTypes.BIGINT())])
>>> scan = Values(((1, 2),), cols)
>>> lower = Calc(columns=cols, input=scan, projections=(resolve(col("b") + 1, cols),
...     resolve(col("a").cast(DataTypes.STRING()), cols)))
>>> upper = Calc(columns=Columns.of([("c", DataTypes.BIGINT())]), input=lower,
...     projections=(resolve(col("a"), cols),))
>>> print(explain(optimize(upper)))
Calc(select=[plus(b, 1) AS c]) changelogMode=[I]
+- Values(tuples=[1 rows], fields=[a, b]) changelogMode=[I]
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from cairn.table.aggregate_pruning import prune_aggregate_input
from cairn.table.analysis import Rex, input_references
from cairn.table.codegen import is_async_calc
from cairn.table.join_pushdown import prune_join_columns, push_filters_into_join
from cairn.table.pandas_split import DEFAULT_BATCH_SIZE, calls_pandas, split_pandas_calc
from cairn.table.plan import (
    Aggregate,
    Calc,
    IntervalJoin,
    Join,
    PlanNode,
    WindowAggregate,
    with_inputs,
)
from cairn.table.types import DataTypes

__all__ = ["merge_calcs", "optimize"]


def optimize(node: PlanNode, arrow_batch_size: int = DEFAULT_BATCH_SIZE) -> PlanNode:
    """``node``'s plan with every rewrite of this module applied, bottom up
    (``arrow_batch_size``: the rows per call of a ``PythonCalc``)."""
    inputs = node.inputs
    if inputs:
        optimized = tuple(optimize(i, arrow_batch_size) for i in inputs)
        if any(o is not i for o, i in zip(optimized, inputs, strict=True)):
            node = with_inputs(node, optimized)
    if isinstance(node, Aggregate | WindowAggregate):
        narrowed = prune_aggregate_input(node)
        if narrowed is not node:  # the projection below merges with the calcs under it
            return optimize(narrowed, arrow_batch_size)
    if isinstance(node, Calc) and isinstance(node.input, Join | IntervalJoin):
        moved = prune_join_columns(push_filters_into_join(node))
        if moved is not node:  # the moved filters and projections merge with calcs below
            return optimize(moved, arrow_batch_size)
    if isinstance(node, Calc) and calls_pandas(node):
        return optimize(split_pandas_calc(node, arrow_batch_size), arrow_batch_size)
    if isinstance(node, Calc) and isinstance(node.input, Calc):
        merged = merge_calcs(node, node.input)
        if merged is not None:
            if isinstance(merged.input, Join | IntervalJoin):  # the join rules see it whole
                return optimize(merged, arrow_batch_size)
            return merged
    return node


def merge_calcs(upper: Calc, lower: Calc) -> Calc | None:
    """``upper`` over ``lower`` as one calc, or ``None`` when they should stay apart."""
    if is_async_calc(upper.projections, upper.condition) or is_async_calc(
        lower.projections, lower.condition
    ):
        return None
    if lower.projections is not None:
        uses = Counter(input_references(upper.expressions))
        for index, count in uses.items():
            if count > 1 and not _trivial(lower.projections[index]):
                return None
    projections: tuple[Rex, ...] | None
    if upper.projections is None:
        projections = lower.projections
    else:
        projections = tuple(_inline(p, lower.projections) for p in upper.projections)
    conditions = [c for c in (lower.condition, _inlined(upper.condition, lower)) if c is not None]
    condition = conditions[0] if len(conditions) == 1 else None
    if len(conditions) == 2:
        # ``and`` of a filter: the calc checks its operands in order, the lower one first
        condition = Rex("call", DataTypes.BOOLEAN(), op="and", operands=tuple(conditions))
    return Calc(
        columns=upper.columns, input=lower.input, projections=projections, condition=condition
    )


def _inlined(rex: Rex | None, lower: Calc) -> Rex | None:
    return None if rex is None else _inline(rex, lower.projections)


def _inline(rex: Rex, projections: tuple[Rex, ...] | None) -> Rex:
    """``rex`` over the lower calc's input: each column reference replaced by its expression."""
    if projections is None:
        return rex
    if rex.kind == "input":
        return projections[rex.index]
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(_inline(o, projections) for o in rex.operands))


def _trivial(rex: Rex) -> bool:
    """Cheap and deterministic to compute twice: a column or a literal."""
    return rex.kind in ("input", "literal")
