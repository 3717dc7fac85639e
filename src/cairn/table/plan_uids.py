"""Pinned operator uids: a compiled plan's nodes, and matching an edited plan onto them.

Invariant: pure functions of plan trees. ``node_entries`` lists the nodes of a job's
statements in a fixed order (post-order, inputs left to right, statement by statement — the
order ``translate.to_data_stream`` visits them), each with its kind, description, the uid the
job would give it, and the layout of the state it keeps. ``pinned_uids`` maps the nodes of a
re-planned (edited) job onto a stored list position by position: it succeeds only when every
node keeps its kind and statement (the plan's shape) and every stateful node its state
layout, and then gives each new node the stored uid, so a savepoint's state goes back to the
node that held it however the statement's expressions were edited.

>>> from cairn.table.analysis import AggCall, Columns
>>> from cairn.table.plan import Aggregate, Values
>>> from cairn.table.types import DataTypes
>>> rows = Values((("a",),), Columns.of([("k", DataTypes.STRING())]))
>>> n = AggCall("count_star", -1, DataTypes.BIGINT(False))
>>> agg = Aggregate(rows, (0,), (n,), Columns.of([("k", DataTypes.STRING()), ("n", n.data_type)]))
>>> [(e.type, e.state) for e in node_entries([agg])]
[('Values', None), ('GroupAggregate', 'keys=[STRING], accumulators=[COUNT_STAR(*) -> BIGINT]')]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.table.analysis import AggCall, Columns
from cairn.table.codegen import is_async_calc
from cairn.table.errors import TableException
from cairn.table.optimize import optimize
from cairn.table.plan import (
    Aggregate,
    Calc,
    Deduplicate,
    IntervalJoin,
    Join,
    OverAggregate,
    PlanNode,
    Rank,
    StreamScan,
    TableAggregate,
    TemporalJoin,
    TemporalSort,
    TwoInputJoin,
    Union,
    WindowAggregate,
    WindowDeduplicate,
    WindowJoin,
    WindowRank,
    WindowTableFunction,
)
from cairn.table.plan_text import describe
from cairn.table.rank import process_kind
from cairn.table.scan_pushdown import push_into_scans
from cairn.table.slices import SliceAssigner, sliceable
from cairn.table.time_attributes import is_proctime
from cairn.table.translate import Uids

__all__ = ["NodeEntry", "node_entries", "pinned_uids", "state_layout"]


@dataclass(frozen=True)
class NodeEntry:
    """One node of a compiled plan: its statement (1-based), kind (``GroupAggregate``),
    description (as ``explain`` shows it), operator uid (None for a scan or a union: a scan's
    operators are named by its connector, ``table-source-<table>``, a union has none) and
    state layout (None: stateless)."""

    statement: int
    type: str
    description: str
    uid: str | None
    state: str | None

    def to_json(self, node_id: int) -> dict[str, Any]:
        return {
            "id": node_id,
            "statement": self.statement,
            "type": self.type,
            "description": self.description,
            "uid": self.uid,
            "state": self.state,
        }

    @staticmethod
    def from_json(node: Any) -> NodeEntry:
        """A node of a plan file (``KeyError``/``TypeError`` if a field is missing)."""
        uid, state = node["uid"], node["state"]
        return NodeEntry(
            int(node["statement"]),
            str(node["type"]),
            str(node["description"]),
            None if uid is None else str(uid),
            None if state is None else str(state),
        )


def node_entries(plans: Sequence[PlanNode]) -> list[NodeEntry]:
    """The nodes of one job's statements as they run (``optimize``d, as ``to_data_stream``
    translates them), with the uids the job gives them (``Uids``)."""
    uids = Uids()
    entries = []
    for statement, plan in enumerate(plans, 1):
        for node in _post_order(push_into_scans(optimize(plan))):
            text = describe(node)
            kind = text.split("(", 1)[0]
            uid = None if isinstance(node, StreamScan | Union) else uids.of(node)
            entries.append(NodeEntry(statement, kind, text, uid, state_layout(node)))
    return entries


def _post_order(node: PlanNode) -> Iterator[PlanNode]:
    for i in node.inputs:
        yield from _post_order(i)
    yield node


def pinned_uids(stored: Sequence[NodeEntry], planned: Sequence[NodeEntry]) -> dict[str, str]:
    """``planned`` uid -> ``stored`` uid, node by node; a ``TableException`` names the first
    node whose kind or state layout differs (or that one list has and the other lacks).

    >>> a = NodeEntry(1, "Calc", "Calc(where=[>(v, 0)])", "table-calc-1", None)
    >>> b = NodeEntry(1, "Calc", "Calc(where=[>(v, 5)])", "table-calc-2", None)
    >>> pinned_uids([a], [b])
    {'table-calc-2': 'table-calc-1'}
    """
    for k, (old, new) in enumerate(zip(stored, planned, strict=False), 1):
        if (old.statement, old.type) != (new.statement, new.type):
            raise TableException(
                f"The edited plan differs in shape from the compiled one at node {k}"
                f" (statement {new.statement}): the plan file has {old.description}, the"
                f" statement now plans {new.description}. Uids are kept only while every"
                " node keeps its kind: compile the plan again (its state starts empty)."
            )
        if old.state != new.state:
            raise TableException(
                f"Node {k} (statement {new.statement}) {new.description} keeps state of"
                f" another layout than the compiled plan's: {old.state} before, {new.state}"
                " now; its savepoint state could not be read. Compile the plan again (its"
                " state starts empty)."
            )
    if len(stored) != len(planned):
        k = min(len(stored), len(planned)) + 1
        extra = (stored if len(stored) > len(planned) else planned)[k - 1]
        where = "the plan file has" if len(stored) > len(planned) else "the statement now plans"
        raise TableException(
            f"The edited plan differs in shape from the compiled one at node {k}"
            f" (statement {extra.statement}): only {where} {extra.description}. Uids are"
            " kept only while every node keeps its kind: compile the plan again (its state"
            " starts empty)."
        )
    pairs = zip(stored, planned, strict=True)
    return {new.uid: old.uid for old, new in pairs if new.uid is not None and old.uid is not None}


def state_layout(node: PlanNode) -> str | None:
    """What a stateful node keeps per key, as text (equal text: the same layout), or None
    for a node without state of its own."""
    if isinstance(node, Aggregate):
        return _keyed(node.input.columns, node.keys, node.calls)
    if isinstance(node, WindowAggregate):
        window = node.window.describe()
        text = f"window=[{window}], {_keyed(node.input.columns, node.keys, node.calls)}"
        if sliceable(node.window, node.calls):
            text += f", slices=[{SliceAssigner.of(node.window).slice_ms}]"
        return text
    if isinstance(node, OverAggregate):
        rows = _types(node.input.columns, range(len(node.input.columns)))
        keyed = _keyed(node.input.columns, node.keys, node.calls)
        return f"window=[{node.window.describe()}], rows=[{rows}], {keyed}"
    if isinstance(node, TableAggregate):
        keys = _types(node.input.columns, node.keys)
        args = range(len(node.input.columns)) if node.args is None else node.args
        function = f"{node.wrapper.name}({_types(node.input.columns, args)})"
        return f"keys=[{keys}], accumulator=[{function}]"
    if isinstance(node, TwoInputJoin):
        left, right = node.left.columns, node.right.columns
        # INNER and LEFT keep the uids they had before RIGHT and FULL joins were built
        kind = {"INNER": "outer=False", "LEFT": "outer=True"}.get(
            node.join_type, f"joinType={node.join_type}"
        )
        text = (
            f"keys=[{_types(left, node.left_keys)}], left=[{_types(left, range(len(left)))}],"
            f" right=[{_types(right, range(len(right)))}], {kind}"
        )
        if isinstance(node, Join) and not node.filter_nulls:
            text += ", nulls=equal"
        if isinstance(node, IntervalJoin):
            text += (
                f", interval=[{node.left_time}, {node.right_time},"
                f" {node.lower_ms}, {node.upper_ms}]"
            )
        if isinstance(node, TemporalJoin):
            text += f", temporal=[{node.left_time}, {node.right_time}]"
        if isinstance(node, WindowJoin):
            text += ", window"
        return text
    if isinstance(node, TemporalSort):
        rows = _types(node.input.columns, range(len(node.input.columns)))
        return f"sort=[{node.time_index}], rows=[{rows}]"
    if isinstance(node, WindowRank | WindowDeduplicate):
        rows = _types(node.input.columns, range(len(node.input.columns)))
        keys = _types(node.input.columns, node.keys)
        what = (
            f"rank=[{node.start}, {node.end}]"
            if isinstance(node, WindowRank)
            else f"keep={'last' if node.keep_last else 'first'}"
        )
        return f"window=[{node.window.describe()}], keys=[{keys}], rows=[{rows}], {what}"
    if isinstance(node, WindowTableFunction) and node.window.kind == "session":
        rows = _types(node.input.columns, range(len(node.input.columns)))
        return f"window=[{node.window.describe()}], rows=[{rows}]"
    if isinstance(node, Deduplicate | Rank):
        rows = _types(node.input.columns, range(len(node.input.columns)))
        keys = _types(node.input.columns, node.keys)
        what = (
            f"keep={'last' if node.keep_last else 'first'}"
            if isinstance(node, Deduplicate)
            else f"function={_rank_kind(node)}"
        )
        return f"keys=[{keys}], rows=[{rows}], {what}"
    if isinstance(node, Calc) and is_async_calc(node.projections, node.condition):
        return f"in-flight rows=[{_types(node.input.columns, range(len(node.input.columns)))}]"
    return None


def _rank_kind(node: Rank) -> str:
    proctime_first = is_proctime(node.input.columns.types[node.order[0].index])
    return process_kind(node.strategy, node.order, proctime_first, node.end)


def _keyed(columns: Columns, keys: Sequence[int], calls: Sequence[AggCall]) -> str:
    accumulators = ", ".join(_call(c, columns) for c in calls)
    return f"keys=[{_types(columns, keys)}], accumulators=[{accumulators}]"


def _call(call: AggCall, columns: Columns) -> str:
    if call.wrapper is not None:
        args = _types(columns, call.args)
        return f"{call.wrapper.name}({args}) -> {call.data_type.nullable_()}"
    arg = "*" if call.arg < 0 else str(columns.types[call.arg].nullable_())
    text = f"{call.function.upper()}({'DISTINCT ' if call.distinct else ''}{arg})"
    if call.extra_args:
        text = f"{text[:-1]}, {', '.join(map(repr, call.extra_args))})"
    if call.filter_arg >= 0:
        text += f" FILTER {columns.types[call.filter_arg].nullable_()}"
    return f"{text} -> {call.data_type.nullable_()}"


def _types(columns: Columns, indexes: Iterator[int] | Sequence[int] | range) -> str:
    return ", ".join(str(columns.types[i].nullable_()) for i in indexes)
