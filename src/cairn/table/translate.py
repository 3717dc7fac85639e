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
from cairn.table.operators import (
    CalcFunction,
    FieldsKeySelector,
    GroupAggFunction,
    LimitFunction,
)
from cairn.table.plan import (
    Aggregate,
    Calc,
    Limit,
    PlanNode,
    StreamScan,
    Union,
    Values,
    describe,
)

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
        calc = CalcFunction(CompiledCalc(calc_source(node.projections, node.condition)))
        return _labelled(upstream.flat_map(calc), node, path, describe(node))
    if isinstance(node, Aggregate):
        upstream = to_data_stream(node.input, env, path + ".0")
        keyed: Any = upstream.key_by(FieldsKeySelector(node.keys))
        aggregated = keyed.process(GroupAggFunction(node.calls, node.final_only))
        if not node.keys:
            aggregated = aggregated.set_parallelism(1)
        return _labelled(aggregated, node, path, describe(node))
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
