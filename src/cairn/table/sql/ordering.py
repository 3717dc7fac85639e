"""``ORDER BY``, ``LIMIT`` and ``OFFSET`` of a streaming query, as Flink plans them.

Invariant: with ``LIMIT`` (and an optional ``OFFSET``) an ``ORDER BY`` is a Top-N over the
whole result — a ``Rank`` without partition keys keeping ranks ``offset + 1`` to ``offset +
limit`` (an updating result, on one subtask; Flink's ``SortLimit`` in streaming); without
``LIMIT`` an ``ORDER BY`` must start with a rowtime attribute ascending — a ``TemporalSort``
releasing rows in time order with the watermark — else it is refused with Flink's message at
its position. ``LIMIT`` alone keeps the first rows (``Table.limit``); ``OFFSET`` needs an
``ORDER BY``. The sort keys are the query's output columns, by name or position.
"""

from __future__ import annotations

from sqlglot import exp

from cairn.table.interval_bounds import rowtime_indexes
from cairn.table.plan import SortField, TemporalSort
from cairn.table.rank_planner import rank_plan
from cairn.table.sql.errors import SqlErrors
from cairn.table.table import Table
from cairn.table.time_attributes import is_proctime

__all__ = ["ordered"]


def _number(errors: SqlErrors, clause: exp.Expr, what: str) -> int:
    count = clause.expression if clause.expression is not None else clause.this
    if not isinstance(count, exp.Literal) or count.is_string or int(count.this) < 0:
        raise errors.at(clause, f"{what} takes a number", what)
    return int(count.this)


def _sort_fields(errors: SqlErrors, order: exp.Order, table: Table) -> list[SortField]:
    names = table.get_schema().names
    fields = []
    for item in order.expressions:
        target = item.this
        if isinstance(target, exp.Column) and target.name in names:
            index = names.index(target.name)
        elif isinstance(target, exp.Literal) and not target.is_string:
            index = int(target.this) - 1
            if not 0 <= index < len(names):
                raise errors.at(target, f"ORDER BY position {target.this} is not in the SELECT")
        else:
            raise errors.at(target, "ORDER BY takes the query's output columns here")
        descending = bool(item.args.get("desc"))
        nulls_first = item.args.get("nulls_first")
        # Flink's default: NULLs first ascending, last descending
        first = (not descending) if nulls_first is None else bool(nulls_first)
        fields.append(SortField(index, not descending, first))
    return fields


def ordered(errors: SqlErrors, node: exp.Expr, table: Table) -> Table:
    """``table`` as the ``ORDER BY`` / ``LIMIT`` / ``OFFSET`` of ``node`` say."""
    order = node.args.get("order")
    limit = node.args.get("limit")
    offset = node.args.get("offset")
    for key in ("qualify",):
        if node.args.get(key) is not None:
            raise errors.at(node.args[key], "QUALIFY is not supported", "QUALIFY")
    skip = _number(errors, offset, "OFFSET") if offset is not None else 0
    if order is None:
        if offset is not None:
            raise errors.at(offset, "OFFSET needs ORDER BY in a streaming query", "OFFSET")
        if limit is None:
            return table
        count = _number(errors, limit, "LIMIT")
        return errors.run(limit, lambda: table.limit(count))
    fields = _sort_fields(errors, order, table)
    plan = table.plan
    if limit is not None:
        count = _number(errors, limit, "LIMIT")
        if count == 0:
            raise errors.at(limit, "LIMIT 0 keeps no row: remove the query", "LIMIT")
        return errors.run(
            order,
            lambda: Table(
                rank_plan(plan, (), fields, skip + 1, skip + count, False), table.context
            ),
        )
    first = fields[0]
    time_type = plan.columns.types[first.index]
    rowtime = first.index in rowtime_indexes(plan)
    if not first.ascending or not (rowtime or is_proctime(time_type)):
        raise errors.at(
            order,
            "Sort on a non-time-attribute field is not supported: a streaming ORDER BY starts"
            " with a time attribute ascending (or add LIMIT for a Top-N)",
            "ORDER",
        )
    if not rowtime:
        if len(fields) > 1:
            raise errors.at(order, "ORDER BY a processing-time attribute takes no other keys")
        return table  # rows already leave in the order they arrive
    return Table(
        TemporalSort(
            columns=plan.columns, input=plan, time_index=first.index, order=tuple(fields[1:])
        ),
        table.context,
    )
