"""Translating a logical plan onto Cairn's DataStream API.

Invariant: each plan node becomes DataStream operators whose records are ``(kind, row)``
pairs (``cairn.table.operators``); the operators get uids derived from the node's place in
the plan and its description (``uid_of``), so a savepoint of a table job maps its state back
to the same operators when the job is planned again from the same query. Nothing here runs a
job; the caller adds a sink and executes.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cairn.datastream.data_stream import DataStream
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.codegen import CompiledCalc, calc_source
from cairn.table.group_window import GroupWindowAggFunction
from cairn.table.join import JoinFunction
from cairn.table.operators import (
    CalcFunction,
    CorrelateFunction,
    FieldsKeySelector,
    GroupAggFunction,
    LimitFunction,
)
from cairn.table.over_window import OverAggFunction
from cairn.table.plan import (
    Aggregate,
    Calc,
    Correlate,
    Join,
    Limit,
    OverAggregate,
    PlanNode,
    StreamScan,
    TableAggregate,
    Union,
    Values,
    WatermarkAssigner,
    WindowAggregate,
    describe,
)
from cairn.table.table_aggregate import TableAggFunction
from cairn.table.timestamps import watermark_strategy

__all__ = ["to_data_stream", "uid_of"]


def uid_of(node: PlanNode, path: str) -> str:
    """A stable uid: the node's description and its path from the sink, hashed."""
    digest = hashlib.sha256(f"{path}|{describe(node)}".encode()).hexdigest()[:16]
    return f"table-{type(node).__name__.lower()}-{digest}"


def _labelled(stream: Any, node: PlanNode, path: str, name: str) -> DataStream:
    labelled: DataStream = stream.uid(uid_of(node, path)).name(name)
    return labelled


def to_data_stream(node: PlanNode, env: StreamExecutionEnvironment, path: str = "0") -> DataStream:
    """The DataStream of ``(kind, row)`` records computing ``node``."""
    if isinstance(node, Values):
        records = [(0, row) for row in node.rows]
        return _labelled(env.from_collection(records), node, path, "Values")
    if isinstance(node, StreamScan):
        stream: DataStream = node.build(env)
        return stream
    if isinstance(node, Calc):
        upstream = to_data_stream(node.input, env, path + ".0")
        functions: list[Any] = []
        source = calc_source(node.projections, node.condition, functions)
        calc = CalcFunction(CompiledCalc(source, functions))
        return _labelled(upstream.flat_map(calc), node, path, describe(node))
    if isinstance(node, Correlate):
        upstream = to_data_stream(node.input, env, path + ".0")
        args = None
        if node.args is not None:
            arg_functions: list[Any] = []
            arg_source = calc_source(node.args, None, arg_functions)
            args = CompiledCalc(arg_source, arg_functions)
        arity = len(node.wrapper.result_type.fields)
        correlate = CorrelateFunction(
            node.wrapper, args, node.input.columns.names, arity, node.keep_input, node.outer
        )
        return _labelled(upstream.flat_map(correlate), node, path, describe(node))
    if isinstance(node, Aggregate):
        upstream = to_data_stream(node.input, env, path + ".0")
        keyed: Any = upstream.key_by(FieldsKeySelector(node.keys))
        aggregated = keyed.process(GroupAggFunction(node.calls, node.final_only))
        if not node.keys:
            aggregated = aggregated.set_parallelism(1)
        return _labelled(aggregated, node, path, describe(node))
    if isinstance(node, WindowAggregate):
        upstream = to_data_stream(node.input, env, path + ".0")
        keyed = upstream.key_by(FieldsKeySelector(node.keys))
        function = GroupWindowAggFunction(node.window, node.time_index, node.calls, node.properties)
        windowed = keyed.process(function)
        if not node.keys:
            windowed = windowed.set_parallelism(1)
        return _labelled(windowed, node, path, describe(node))
    if isinstance(node, OverAggregate):
        upstream = to_data_stream(node.input, env, path + ".0")
        keyed = upstream.key_by(FieldsKeySelector(node.keys))
        over = keyed.process(OverAggFunction(node.window, node.time_index, node.calls))
        if not node.keys:
            over = over.set_parallelism(1)
        return _labelled(over, node, path, describe(node))
    if isinstance(node, TableAggregate):
        upstream = to_data_stream(node.input, env, path + ".0")
        arity = len(node.wrapper.result_type.fields)
        table_agg = TableAggFunction(node.wrapper, node.args, node.input.columns.names, arity)
        flat = upstream.key_by(FieldsKeySelector(node.keys)).process(table_agg)
        if not node.keys:
            flat = flat.set_parallelism(1)
        return _labelled(flat, node, path, describe(node))
    if isinstance(node, WatermarkAssigner):
        upstream = to_data_stream(node.input, env, path + ".0")
        strategy = watermark_strategy(node.time_index, node.delay_ms)
        stamped = upstream.assign_timestamps_and_watermarks(strategy)
        return _labelled(stamped, node, path, describe(node))
    if isinstance(node, Join):
        left = to_data_stream(node.left, env, path + ".0")
        right = to_data_stream(node.right, env, path + ".1")
        condition = None
        if node.condition is not None:
            condition_functions: list[Any] = []
            source = calc_source(None, node.condition, condition_functions)
            condition = CompiledCalc(source, condition_functions)
        joiner = JoinFunction(len(node.right.columns), node.outer, condition)
        connected: Any = left.connect(right).key_by(
            FieldsKeySelector(node.left_keys), FieldsKeySelector(node.right_keys)
        )
        return _labelled(connected.process(joiner), node, path, describe(node))
    if isinstance(node, Limit):
        upstream = to_data_stream(node.input, env, path + ".0")
        limited = upstream.key_by(_constant_key).process(LimitFunction(node.count))
        return _labelled(limited.set_parallelism(1), node, path, describe(node))
    if isinstance(node, Union):
        first, *rest = (to_data_stream(i, env, f"{path}.{n}") for n, i in enumerate(node.inputs))
        return first.union(*rest)
    raise TypeError(f"cannot translate {type(node).__name__}")


def _constant_key(value: Any) -> int:
    return 0
