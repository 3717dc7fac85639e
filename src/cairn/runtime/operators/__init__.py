"""Runtime operators: what a task runs for each operator of its chain.

``create_operator`` maps an ``OperatorNode`` of the job graph to its runtime operator.
"""

from __future__ import annotations

from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import OperatorKind
from cairn.runtime.operators.async_wait import AsyncWaitOperator
from cairn.runtime.operators.base import StreamOperator
from cairn.runtime.operators.basic import (
    FilterOperator,
    FlatMapOperator,
    MapOperator,
    ProcessOperator,
)
from cairn.runtime.operators.keyed import KeyedProcessOperator, KeyedRecordOperator, ReduceOperator
from cairn.runtime.operators.sink_writer import SinkWriterOperator
from cairn.runtime.operators.sinks import CollectSinkOperator, SinkFunctionOperator, SinkOperator
from cairn.runtime.operators.sources import SourceFunctionOperator, SourceOperator
from cairn.runtime.operators.timestamps import TimestampsAndWatermarksOperator
from cairn.runtime.operators.two_input import TWO_INPUT_KINDS, CoOperator, KeyedCoOperator

_BY_KIND: dict[str, type[StreamOperator]] = {
    OperatorKind.MAP.value: MapOperator,
    OperatorKind.FLAT_MAP.value: FlatMapOperator,
    OperatorKind.FILTER.value: FilterOperator,
    OperatorKind.PROCESS.value: ProcessOperator,
    OperatorKind.TIMESTAMPS.value: TimestampsAndWatermarksOperator,
    OperatorKind.KEYED_PROCESS.value: KeyedProcessOperator,
    OperatorKind.REDUCE.value: ReduceOperator,
    OperatorKind.SINK_FUNCTION.value: SinkFunctionOperator,
    OperatorKind.SINK.value: SinkOperator,
    OperatorKind.SINK_WRITER.value: SinkWriterOperator,
    OperatorKind.COLLECT.value: CollectSinkOperator,
    OperatorKind.ASYNC_WAIT.value: AsyncWaitOperator,
    "source": SourceOperator,
    "source_function": SourceFunctionOperator,
}


_KEYED_RECORD_KINDS = {
    OperatorKind.MAP.value,
    OperatorKind.FLAT_MAP.value,
    OperatorKind.FILTER.value,
    OperatorKind.PROCESS.value,
}


def operator_class(node: OperatorNode) -> type[StreamOperator]:
    """The runtime operator class that runs ``node``."""
    if node.kind in TWO_INPUT_KINDS:
        return KeyedCoOperator if node.keyed else CoOperator
    if node.keyed and node.kind in _KEYED_RECORD_KINDS:
        return KeyedRecordOperator
    cls = _BY_KIND.get(node.kind)
    if cls is None:
        raise ValueError(f"unknown operator kind {node.kind!r} for operator {node.name!r}")
    return cls


def takes_key_groups(node: OperatorNode) -> bool:
    """Whether a hash edge into ``node`` (a chain's head) should send its records' key groups
    along: its operator sets the key per record with them, and its function does not set keys
    per batch itself (the window operator's batch path: ``sets_keys_per_batch``)."""
    if not operator_class(node).takes_key_groups:
        return False
    function = node.spec.function if node.spec is not None else None
    return not getattr(function, "sets_keys_per_batch", False)


def create_operator(node: OperatorNode) -> StreamOperator:
    return operator_class(node)(node)


__all__ = ["StreamOperator", "create_operator", "operator_class", "takes_key_groups"]
