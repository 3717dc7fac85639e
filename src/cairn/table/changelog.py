"""Which changes a plan node's output holds (Flink's changelog mode inference).

Invariant: pure, inferred bottom up as Flink's planner does: a scan of elements or of an
insert-only stream is insert-only, a calc or a limit keeps its input's mode, a group aggregate
produces updates (``+I``, ``-U``, ``+U``, ``-D``) unless it runs in batch mode (final results
only), a Top-N ``Rank`` always does, and a ``Deduplicate`` does unless it keeps the first row
by processing time (``plan_text.explain`` prints the tree with each node's mode).

>>> from cairn.table.analysis import AggCall, Columns
>>> from cairn.table.types import DataTypes
>>> scan = Values((("a", 1),), Columns.of([("k", DataTypes.STRING()), ("v", DataTypes.BIGINT())]))
>>> n = AggCall("count_star", -1, DataTypes.BIGINT(False))
>>> agg = Aggregate(scan, (0,), (n,), Columns.of([("k", DataTypes.STRING()), ("n", n.data_type)]))
>>> changelog_mode(agg).value
'I,UB,UA,D'
"""

from __future__ import annotations

from cairn.table.plan import (
    Aggregate,
    Calc,
    ChangelogMode,
    Correlate,
    Deduplicate,
    IntervalJoin,
    Join,
    Limit,
    LookupJoin,
    MiniBatchAssigner,
    OverAggregate,
    PlanNode,
    PythonCalc,
    Rank,
    StreamScan,
    TableAggregate,
    TemporalJoin,
    TemporalSort,
    Union,
    Values,
    WatermarkAssigner,
    WindowAggregate,
    WindowDeduplicate,
    WindowJoin,
    WindowRank,
    WindowTableFunction,
)

__all__ = ["changelog_mode"]


def changelog_mode(node: PlanNode) -> ChangelogMode:
    """Which changes ``node``'s output holds, inferred from its inputs."""
    if isinstance(node, Values):
        return ChangelogMode.INSERT_ONLY
    if isinstance(node, StreamScan):
        return ChangelogMode.INSERT_ONLY if node.insert_only else ChangelogMode.ALL
    if isinstance(node, Aggregate):
        if node.final_only:
            return ChangelogMode.INSERT_ONLY
        no_calls_on_insert_only = (
            not node.calls and changelog_mode(node.input) is ChangelogMode.INSERT_ONLY
        )
        return ChangelogMode.INSERT_ONLY if no_calls_on_insert_only else ChangelogMode.ALL
    if isinstance(
        node,
        WindowAggregate
        | OverAggregate
        | WindowTableFunction
        | WindowRank
        | WindowDeduplicate
        | WindowJoin,
    ):
        return ChangelogMode.INSERT_ONLY
    if isinstance(node, TableAggregate | Rank):
        return ChangelogMode.ALL
    if isinstance(node, Deduplicate):  # only keep-first on processing time never updates
        first_on_proctime = not node.keep_last and node.rowtime_index is None
        return ChangelogMode.INSERT_ONLY if first_on_proctime else ChangelogMode.ALL
    if isinstance(node, Join):
        inputs_insert_only = all(
            changelog_mode(n) is ChangelogMode.INSERT_ONLY for n in node.inputs
        )
        return (
            ChangelogMode.INSERT_ONLY
            if inputs_insert_only and node.join_type in ("INNER", "SEMI")
            else ChangelogMode.ALL
        )
    if isinstance(node, IntervalJoin):
        return ChangelogMode.INSERT_ONLY
    if isinstance(node, TemporalJoin):
        return changelog_mode(node.left)
    if isinstance(node, TemporalSort):
        return ChangelogMode.INSERT_ONLY
    if isinstance(
        node,
        Calc | PythonCalc | Limit | Correlate | WatermarkAssigner | LookupJoin | MiniBatchAssigner,
    ):
        return changelog_mode(node.inputs[0])
    if isinstance(node, Union):  # the union of its inputs' modes
        modes = {changelog_mode(i) for i in node.inputs}
        return (
            ChangelogMode.INSERT_ONLY if modes == {ChangelogMode.INSERT_ONLY} else ChangelogMode.ALL
        )
    raise TypeError(f"unknown plan node {type(node).__name__}")
