"""An aggregate's input narrowed to the columns it reads (Flink's
``ProjectAggregateTransposeRule`` / ``AggregateProjectMergeRule`` and the column pruning that
follows them).

Invariant: pure, and the rewritten plan computes the same rows. A group aggregate or group
window aggregate whose input has columns none of its keys, time attribute and calls (their
arguments and ``FILTER`` columns) reads gets a projection below it keeping only the ones it
reads, in their order, and its column references renumbered; its output is unchanged. An
aggregate with a row-based call (a function given the whole input row) keeps its input.
What the projection removes is never shuffled, kept in state or, over a scan that computes
projections (``scan_pushdown``), even parsed.

>>> from cairn.table.analysis import AggCall, Columns
>>> from cairn.table.plan import Values
>>> from cairn.table.plan_text import explain
>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("k", DataTypes.INT()), ("note", DataTypes.STRING()),
...     ("v", DataTypes.BIGINT())])
>>> total = AggCall("sum", 2, DataTypes.BIGINT(), DataTypes.BIGINT())
>>> out = Columns.of([("k", DataTypes.INT()), ("s", DataTypes.BIGINT())])
>>> agg = Aggregate(Values(((1, "x", 2),), cols), (0,), (total,), out)
>>> print(explain(prune_aggregate_input(agg)))
GroupAggregate(groupBy=[k], select=[k, SUM(v) AS s]) changelogMode=[I,UB,UA,D]
+- Calc(select=[k, v]) changelogMode=[I]
   +- Values(tuples=[1 rows], fields=[k, note, v]) changelogMode=[I]
"""

from __future__ import annotations

import dataclasses

from cairn.table.analysis import AggCall, Columns, Rex
from cairn.table.plan import Aggregate, Calc, PlanNode, WindowAggregate

__all__ = ["prune_aggregate_input"]


def prune_aggregate_input(node: PlanNode) -> PlanNode:
    """``node`` reading only the input columns it uses (``node`` itself when it uses all,
    or is no group or group window aggregate)."""
    if not isinstance(node, Aggregate | WindowAggregate):
        return node
    if any(c.row_names for c in node.calls):
        return node
    used = set(node.keys)
    if isinstance(node, WindowAggregate):
        used.add(node.time_index)
    for call in node.calls:
        used |= {i for i in (call.arg, call.filter_arg, *call.args) if i >= 0}
    columns = node.input.columns
    if len(used) == len(columns):
        return node
    kept = sorted(used)
    position = {i: k for k, i in enumerate(kept)}
    narrowed = Calc(
        columns=Columns(tuple(columns.columns[i] for i in kept)),
        input=node.input,
        projections=tuple(Rex("input", columns.types[i], index=i) for i in kept),
    )
    calls = tuple(_renumbered(c, position) for c in node.calls)
    keys = tuple(position[k] for k in node.keys)
    if isinstance(node, WindowAggregate):
        return dataclasses.replace(
            node, input=narrowed, keys=keys, calls=calls, time_index=position[node.time_index]
        )
    return Aggregate(narrowed, keys, calls, node.columns, node.final_only, node.state_ttl_ms)


def _renumbered(call: AggCall, position: dict[int, int]) -> AggCall:
    return dataclasses.replace(
        call,
        arg=position.get(call.arg, call.arg),
        filter_arg=position.get(call.filter_arg, call.filter_arg),
        args=tuple(position[a] for a in call.args),
    )
