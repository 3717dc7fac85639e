"""Planning ``ROW_NUMBER()`` filtered by its rank: a ``Deduplicate`` or a ``Rank`` (Top-N) node.

Invariant: pure, and decided as Flink's planner decides it. Ranks ``1..1`` of one order column
that is a time attribute (the processing-time attribute, or an event-time column a
``WATERMARK`` is declared on), without the rank number in the output, become a
``Deduplicate`` — keep the first row on ``ASC``, the last on ``DESC`` — which takes an
insert-only input only (Flink's ``StreamPhysicalDeduplicate``). Everything else becomes a
``Rank``: ``AppendFastStrategy`` over an insert-only input, ``RetractStrategy`` over an
updating one (Cairn infers no upsert keys, so never Flink's ``UpdateFastStrategy``). The rank
number, when kept, is a ``BIGINT NOT NULL`` column appended to the input's.

>>> from cairn.table.analysis import Columns
>>> from cairn.table.plan import Values
>>> from cairn.table.plan_text import explain
>>> from cairn.table.types import DataTypes
>>> rows = Values((), Columns.of([("k", DataTypes.STRING()), ("v", DataTypes.BIGINT())]))
>>> print(explain(rank_plan(rows, (0,), (SortField(1, False, False),), 1, 3, True, "rn")))
Rank(strategy=[AppendFastStrategy], rankType=[ROW_NUMBER], rankRange=[rankStart=1, \
rankEnd=3], partitionBy=[k], orderBy=[v DESC], select=[k, v, rn]) changelogMode=[I,UB,UA,D]
+- Values(tuples=[0 rows], fields=[k, v]) changelogMode=[I]
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.table.analysis import Columns
from cairn.table.changelog import changelog_mode
from cairn.table.errors import ValidationError
from cairn.table.plan import (
    Calc,
    ChangelogMode,
    Deduplicate,
    Limit,
    PlanNode,
    Rank,
    SortField,
    TemporalSort,
    WatermarkAssigner,
)
from cairn.table.time_attributes import is_proctime
from cairn.table.types import DataTypes
from cairn.table.window_planner import window_rank

__all__ = ["is_rowtime_column", "rank_plan"]


def is_rowtime_column(node: PlanNode, index: int) -> bool:
    """Whether column ``index`` of ``node`` is an event-time attribute: the column a
    ``WatermarkAssigner`` stamps, forwarded unchanged through calcs, limits, ranks and
    deduplications."""
    if isinstance(node, WatermarkAssigner):
        return index == node.time_index or is_rowtime_column(node.input, index)
    if isinstance(node, Calc):
        if node.projections is None:
            return is_rowtime_column(node.input, index)
        rex = node.projections[index]
        return rex.kind == "input" and is_rowtime_column(node.input, rex.index)
    if isinstance(node, Limit | Deduplicate | Rank | TemporalSort):
        return index < len(node.input.columns) and is_rowtime_column(node.input, index)
    return False


def rank_plan(
    node: PlanNode,
    keys: Sequence[int],
    order: Sequence[SortField],
    start: int,
    end: int,
    output_rank_number: bool,
    rank_name: str = "w0$o0",
) -> PlanNode:
    """``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY order)`` over ``node`` kept for ranks
    ``start..end``: a ``Deduplicate`` or a ``Rank``; ``rank_name`` names the rank number
    column when ``output_rank_number``."""
    if not order:
        raise ValidationError("ROW_NUMBER() needs ORDER BY in its OVER clause")
    if start < 1 or end < start:
        raise ValidationError(
            f"The rank range [{start}, {end}] is empty: a ROW_NUMBER filter keeps ranks from 1"
            " up to a number (rn <= N, rn = N, rn BETWEEN M AND N)"
        )
    windowed = window_rank(node, keys, order, start, end, output_rank_number, rank_name)
    if windowed is not None:  # partitioned by window_start, window_end: Flink's WindowRank
        return windowed
    insert_only = changelog_mode(node) is ChangelogMode.INSERT_ONLY
    if start == end == 1 and not output_rank_number and len(order) == 1:
        index = order[0].index
        proctime = is_proctime(node.columns.types[index])
        rowtime = not proctime and is_rowtime_column(node, index)
        if proctime or rowtime:
            if not insert_only:
                raise ValidationError(
                    "Deduplicate doesn't support consuming update and delete changes: its"
                    " input must be insert-only (deduplicate the source's rows, before any"
                    " aggregate or outer join)"
                )
            return Deduplicate(
                columns=node.columns,
                input=node,
                keys=tuple(keys),
                keep_last=not order[0].ascending,
                rowtime_index=index if rowtime else None,
            )
    columns = node.columns
    if output_rank_number:
        pairs = list(zip(columns.names, columns.types, strict=True))
        columns = Columns.of([*pairs, (rank_name, DataTypes.BIGINT(False))])
    return Rank(
        columns=columns,
        input=node,
        keys=tuple(keys),
        order=tuple(order),
        start=start,
        end=end,
        output_rank_number=output_rank_number,
        strategy="AppendFastStrategy" if insert_only else "RetractStrategy",
    )
