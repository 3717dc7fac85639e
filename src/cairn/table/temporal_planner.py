"""Planning ``JOIN t FOR SYSTEM_TIME AS OF l.time``: a lookup join or an event-time temporal
join, as Flink's planner chooses between them.

Invariant: pure, and what Flink refuses is refused here with Flink's reasons. On a
processing-time attribute the right table must be a lookup table (``jdbc``, ``filesystem``):
a ``LookupJoin`` whose lookup keys are the right table's columns equal to a left column or
expression. On a rowtime attribute the right table must be a versioned table — an event-time
attribute and a primary key (declared, or the keys of a keep-last deduplication on event
time) — and the keys must include that primary key: a ``TemporalJoin``. Only ``INNER`` and
``LEFT`` joins exist, as in Flink.
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.table.analysis import Columns, Rex, conjunction, resolve
from cairn.table.changelog import changelog_mode
from cairn.table.errors import ValidationError
from cairn.table.expressions import Expression
from cairn.table.interval_bounds import rowtime_indexes
from cairn.table.join_keys import check_join_names, keyed_side, shift, split_keys, without_keys
from cairn.table.lookup_source import LookupTable
from cairn.table.plan import (
    Calc,
    ChangelogMode,
    Deduplicate,
    LookupJoin,
    PlanNode,
    TemporalJoin,
)
from cairn.table.time_attributes import is_proctime
from cairn.table.types import DataType

__all__ = ["lookup_join", "temporal_join", "versioned_key"]


def _check_type(join_type: str) -> None:
    if join_type not in ("INNER", "LEFT"):
        raise ValidationError(
            f"Unsupported join type {join_type} for a temporal join: only INNER and LEFT are"
            " supported (Flink's TemporalJoin)"
        )


def _columns(left: Columns, right: Columns, join_type: str) -> list[tuple[str, DataType]]:
    right_types = [t.nullable_() for t in right.types] if join_type == "LEFT" else right.types
    return [*zip(left.names, left.types, strict=True), *zip(right.names, right_types, strict=True)]


def lookup_join(
    left: PlanNode, table: LookupTable, predicate: Expression, join_type: str, time_column: str
) -> PlanNode:
    """``left [LEFT] JOIN table FOR SYSTEM_TIME AS OF left.<time_column>`` on a processing
    time attribute: a lookup join."""
    _check_type(join_type)
    if not is_proctime(left.columns.types[left.columns.index(time_column)]):
        raise ValidationError(
            f"Table '{table.name}' of connector '{table.connector}' is a lookup table: it is"
            f" joined FOR SYSTEM_TIME AS OF a processing-time attribute, and {time_column}"
            " is not one"
        )
    pairs = _columns(left.columns, table.columns, join_type)
    check_join_names([n for n, _ in pairs])
    rex = resolve(predicate, Columns.of(pairs))
    keys = split_keys(rex, len(left.columns))
    lookup_keys: list[int] = []
    left_exprs: list[Rex] = []
    rest = list(keys.rest)
    for lk, rk in zip(keys.left, keys.right, strict=True):
        if rk.kind == "input":
            lookup_keys.append(rk.index)
            left_exprs.append(lk)
        else:  # an expression of the table's columns cannot be looked up: a filter
            rest.append(
                Rex("call", rex.data_type, op="equals", operands=(lk, shift(rk, len(left.columns))))
            )
    if not lookup_keys:
        raise ValidationError(
            f"Temporal table join requires an equality condition on fields of table [{table.name}]."
        )
    keyed, key_indexes = keyed_side(left, tuple(left_exprs), "$lookup_key")
    added = len(keyed.columns) - len(left.columns)
    columns = Columns.of(_columns(keyed.columns, table.columns, join_type))
    joined = LookupJoin(
        columns=columns,
        input=keyed,
        table=table,
        keys=key_indexes,
        lookup_keys=tuple(lookup_keys),
        condition=conjunction([shift(c, added, len(left.columns)) for c in rest]),
        join_type=join_type,
    )
    if not added:
        return joined
    return without_keys(
        joined, Columns.of(pairs), len(left.columns), len(keyed.columns), len(table.columns)
    )


def versioned_key(node: PlanNode, declared: Sequence[str]) -> tuple[int, ...]:
    """The primary key of a versioned table: the declared one, else the keys of the
    keep-last deduplication on event time ``node`` is (Flink's versioned view)."""
    if declared:
        return tuple(node.columns.index(k) for k in declared)
    inner, positions = node, list(range(len(node.columns)))
    while isinstance(inner, Calc) and inner.condition is None and inner.projections is not None:
        mapped = []
        for p in positions:
            rex = inner.projections[p]
            mapped.append(rex.index if rex.kind == "input" else -1)
        inner, positions = inner.input, mapped
    if isinstance(inner, Deduplicate) and inner.keep_last and inner.rowtime_index is not None:
        found = [positions.index(k) for k in inner.keys if k in positions]
        if len(found) == len(inner.keys):
            return tuple(found)
    return ()


def temporal_join(
    left: PlanNode,
    right: PlanNode,
    predicate: Expression,
    join_type: str,
    time_column: str,
    right_name: str,
    primary_key: Sequence[str] = (),
) -> PlanNode:
    """``left [LEFT] JOIN right FOR SYSTEM_TIME AS OF left.<time_column>`` on a rowtime
    attribute: an event-time temporal join against the versioned table ``right``."""
    _check_type(join_type)
    left_time = left.columns.index(time_column)
    time_type = left.columns.types[left_time]
    if is_proctime(time_type):
        raise ValidationError(
            "Processing-time temporal join is not supported yet: the table"
            f" '{right_name}' is not a lookup table (jdbc, filesystem)"
        )
    if left_time not in rowtime_indexes(left):
        raise ValidationError(
            "Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's"
            f" time attribute field, {time_column} is not one"
        )
    right_times = sorted(rowtime_indexes(right))
    if not right_times:
        raise ValidationError(
            f"Event-Time Temporal Table Join requires both primary key and row time attribute"
            f" in versioned table, but no row time attribute can be found in '{right_name}'."
        )
    key = versioned_key(right, primary_key)
    if not key:
        raise ValidationError(
            "Temporal Table Join requires primary key in versioned table, but no primary key"
            f" can be found in '{right_name}'."
        )
    if changelog_mode(left) is not ChangelogMode.INSERT_ONLY and join_type == "LEFT":
        raise ValidationError("A LEFT temporal join takes an insert-only left table")
    pairs = _columns(left.columns, right.columns, join_type)
    check_join_names([n for n, _ in pairs])
    rex = resolve(predicate, Columns.of(pairs))
    keys = split_keys(rex, len(left.columns))
    right_plain = [k.index for k in keys.right if k.kind == "input"]
    if not set(key) <= set(right_plain):
        names = ", ".join(right.columns.names[k] for k in key)
        raise ValidationError(
            f"Temporal table's primary key [{names}] must be included in the equivalence"
            " condition of temporal join"
        )
    keyed_left, left_keys = keyed_side(left, keys.left, "$left_key")
    keyed_right, right_keys = keyed_side(right, keys.right, "$right_key")
    added = len(keyed_left.columns) - len(left.columns)
    rest = [shift(c, added, len(left.columns)) for c in keys.rest]
    columns = Columns.of(_columns(keyed_left.columns, keyed_right.columns, join_type))
    joined = TemporalJoin(
        columns=columns,
        left=keyed_left,
        right=keyed_right,
        left_keys=left_keys,
        right_keys=right_keys,
        condition=conjunction(rest),
        join_type=join_type,
        left_time=left_time,
        right_time=right_times[0],
    )
    if keyed_left is left and keyed_right is right:
        return joined
    return without_keys(
        joined, Columns.of(pairs), len(left.columns), len(keyed_left.columns), len(right.columns)
    )
