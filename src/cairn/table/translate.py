"""Translating a logical plan onto Cairn's DataStream API.

Invariant: each plan node becomes DataStream operators whose records are ``(kind, row)``
pairs (``cairn.table.operators``); each operator's uid is a hash of what its node computes
and of its inputs' uids (``plan_uid``), so a savepoint of a table job maps its state back to
the same operators when the job is planned again — also after another statement of the job,
or a node downstream, was edited. Nothing here runs a job; the caller adds a sink and
executes.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from typing import Any

from cairn.common.configuration import Configuration
from cairn.datastream.async_data_stream import AsyncDataStream
from cairn.datastream.data_stream import DataStream
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.analysis import Rex
from cairn.table.codegen import CompiledCalc, calc_source, is_async_calc
from cairn.table.deduplicate import DeduplicateFunction
from cairn.table.group_window import GroupWindowAggFunction
from cairn.table.interval_join import IntervalJoinFunction
from cairn.table.join import JoinFunction
from cairn.table.lookup_join import LookupJoinFunction
from cairn.table.mini_batch import with_mini_batch
from cairn.table.mini_batch_agg import MiniBatchGroupAggFunction
from cairn.table.operators import (
    AsyncCalcFunction,
    CalcFunction,
    CorrelateFunction,
    GroupAggFunction,
    LimitFunction,
    fields_key,
)
from cairn.table.optimize import optimize
from cairn.table.over_window import OverAggFunction
from cairn.table.plan import (
    Aggregate,
    Calc,
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
from cairn.table.plan_text import describe
from cairn.table.rank import RankFunction, process_kind
from cairn.table.scan_pushdown import push_into_scans
from cairn.table.semi_join import SemiAntiJoinFunction
from cairn.table.slices import sliceable
from cairn.table.slicing_window import SlicingWindowAggFunction
from cairn.table.state_ttl import with_state_ttl
from cairn.table.table_aggregate import TableAggFunction
from cairn.table.temporal_join import TemporalJoinFunction
from cairn.table.temporal_sort import TemporalSortFunction
from cairn.table.time_attributes import is_proctime
from cairn.table.time_planner import source_idle_timeout_ms, with_idle_timeout
from cairn.table.timestamps import watermark_strategy
from cairn.table.vectorized_calc import PandasCalcFunction, arrow_batch_size
from cairn.table.window_join import WindowJoinFunction
from cairn.table.window_rank import WindowRankFunction
from cairn.table.window_tvf import SessionTableFunction, WindowTableFunctionFunction

__all__ = ["Uids", "plan_uid", "to_data_stream"]


#: Flink's defaults for async scalar functions (``table.exec.async-scalar.timeout`` and
#: ``.buffer-capacity``): at most this many rows wait for their results per subtask.
ASYNC_SCALAR_TIMEOUT_MS = 180_000
ASYNC_SCALAR_CAPACITY = 10


def plan_uid(node: PlanNode) -> str:
    """A node's uid from what it computes and what it reads (a hash over its description and
    its inputs' uids): it changes when the node or anything upstream of it changes, never
    when another statement or a node downstream does."""
    if isinstance(node, MiniBatchAssigner):  # runs no operator: toggling mini-batch keeps uids
        return plan_uid(node.input)
    content = describe(node)
    if isinstance(node, Values):
        content += repr(node.rows)
    if isinstance(node, WindowAggregate) and sliceable(node.window, node.calls):
        content += "|slices"  # its state is kept by slices, not by windows
    inputs = ",".join(plan_uid(i) for i in node.inputs)
    digest = hashlib.sha256(f"{content}|{inputs}".encode()).hexdigest()[:16]
    return f"table-{type(node).__name__.lower()}-{digest}"


class Uids:
    """The uids of one job's operators: ``plan_uid``, and ``-2``, ``-3``... for a second or
    third identical subplan of the same job (two statements reading the same source).
    ``pinned`` replaces some of them (hashed uid -> uid to use instead): a compiled plan's
    uids, kept across edits of its statements (``cairn.table.compiled_plan``)."""

    def __init__(self, pinned: Mapping[str, str] | None = None) -> None:
        self._seen: Counter[str] = Counter()
        self._pinned = dict(pinned or {})

    def of(self, node: PlanNode) -> str:
        base = plan_uid(node)
        self._seen[base] += 1
        n = self._seen[base]
        hashed = base if n == 1 else f"{base}-{n}"
        return self._pinned.get(hashed, hashed)


def _labelled(stream: Any, node: PlanNode, uids: Uids, name: str) -> DataStream:
    labelled: DataStream = stream.uid(uids.of(node)).name(name)
    return labelled


def to_data_stream(
    node: PlanNode,
    env: StreamExecutionEnvironment,
    uids: Uids | None = None,
    state_ttl_ms: int = 0,
    config: Configuration | None = None,
    mini_batch: tuple[int, int] | None = None,
) -> DataStream:
    """The DataStream of ``(kind, row)`` records computing ``node`` (its plan optimized
    first: ``optimize``); ``uids`` names the operators of one job (give the same one for every
    statement of a statement set); ``state_ttl_ms`` is ``table.exec.state.ttl`` for the
    stateful nodes without a ``STATE_TTL`` hint (``cairn.table.state_ttl``); ``config`` is
    the table configuration (its ``python.fn-execution.arrow.batch.size``); ``mini_batch``
    the ``(allow-latency ms, size)`` of ``table.exec.mini-batch.*`` when it is enabled
    (``cairn.table.mini_batch``)."""
    plan = with_state_ttl(optimize(node, arrow_batch_size(config)), state_ttl_ms)
    plan = push_into_scans(with_idle_timeout(plan, source_idle_timeout_ms(config)))
    plan = with_mini_batch(plan, mini_batch)
    return _translate(plan, env, uids if uids is not None else Uids())


def _translate(node: PlanNode, env: StreamExecutionEnvironment, uids: Uids) -> DataStream:
    if isinstance(node, MiniBatchAssigner):
        return _translate(node.input, env, uids)
    if isinstance(node, Values):
        records = [(0, row) for row in node.rows]
        return _labelled(env.from_collection(records), node, uids, "Values")
    if isinstance(node, StreamScan):
        stream: DataStream = (
            node.build(env, node.state_ttl_ms) if node.stateful else node.build(env)
        )
        return stream
    if isinstance(node, Calc):
        upstream = _translate(node.input, env, uids)
        functions: list[Any] = []
        source = calc_source(node.projections, node.condition, functions)
        compiled = CompiledCalc(source, functions)
        if is_async_calc(node.projections, node.condition):
            waited = AsyncDataStream.ordered_wait(
                upstream,
                AsyncCalcFunction(compiled),
                ASYNC_SCALAR_TIMEOUT_MS,
                ASYNC_SCALAR_CAPACITY,
            )
            return _labelled(waited, node, uids, describe(node))
        calc = CalcFunction(compiled)
        return _labelled(upstream.flat_map(calc), node, uids, describe(node))
    if isinstance(node, PythonCalc):
        upstream = _translate(node.input, env, uids)
        vectorized = PandasCalcFunction(node.calls, node.batch_size)
        return _labelled(upstream.flat_map(vectorized), node, uids, describe(node))
    if isinstance(node, Correlate):
        upstream = _translate(node.input, env, uids)
        args = None
        if node.args is not None:
            arg_functions: list[Any] = []
            arg_source = calc_source(node.args, None, arg_functions)
            args = CompiledCalc(arg_source, arg_functions)
        arity = len(node.wrapper.result_type.fields)
        correlate = CorrelateFunction(
            node.wrapper, args, node.input.columns.names, arity, node.keep_input, node.outer
        )
        return _labelled(upstream.flat_map(correlate), node, uids, describe(node))
    if isinstance(node, Aggregate):
        upstream = _translate(node.input, env, uids)
        keyed: Any = upstream.key_by(fields_key(node.keys))
        group_agg: Any
        if node.mini_batch is not None and not node.final_only:
            latency_ms, size = node.mini_batch
            group_agg = MiniBatchGroupAggFunction(
                node.calls, node.keys, latency_ms, size, node.state_ttl_ms
            )
        else:
            group_agg = GroupAggFunction(node.calls, node.final_only, node.keys, node.state_ttl_ms)
        aggregated = keyed.process(group_agg)
        if not node.keys:
            aggregated = aggregated.set_parallelism(1)
        return _labelled(aggregated, node, uids, describe(node))
    if isinstance(node, WindowAggregate):
        upstream = _translate(node.input, env, uids)
        keyed = upstream.key_by(fields_key(node.keys))
        time_type = node.input.columns.columns[node.time_index].data_type
        window_agg = (
            SlicingWindowAggFunction
            if sliceable(node.window, node.calls)
            else GroupWindowAggFunction
        )
        function = window_agg(
            node.window,
            node.time_index,
            node.calls,
            node.properties,
            is_proctime(time_type),
            node.keys,
        )
        windowed = keyed.process(function)
        if not node.keys:
            windowed = windowed.set_parallelism(1)
        return _labelled(windowed, node, uids, describe(node))
    if isinstance(node, OverAggregate):
        upstream = _translate(node.input, env, uids)
        keyed = upstream.key_by(fields_key(node.keys))
        over = keyed.process(OverAggFunction(node.window, node.time_index, node.calls))
        if not node.keys:
            over = over.set_parallelism(1)
        return _labelled(over, node, uids, describe(node))
    if isinstance(node, TableAggregate):
        upstream = _translate(node.input, env, uids)
        arity = len(node.wrapper.result_type.fields)
        table_agg = TableAggFunction(
            node.wrapper, node.args, node.input.columns.names, arity, node.state_ttl_ms
        )
        flat = upstream.key_by(fields_key(node.keys)).process(table_agg)
        if not node.keys:
            flat = flat.set_parallelism(1)
        return _labelled(flat, node, uids, describe(node))
    if isinstance(node, WatermarkAssigner):
        upstream = _translate(node.input, env, uids)
        strategy = watermark_strategy(node.time_index, node.delay_ms, node.idle_timeout_ms)
        stamped = upstream.assign_timestamps_and_watermarks(strategy)
        return _labelled(stamped, node, uids, describe(node))
    if isinstance(node, Join) and node.join_type in ("SEMI", "ANTI"):
        return _semi_anti_join(node, env, uids)
    if isinstance(node, Join):
        left = _translate(node.left, env, uids)
        right = _translate(node.right, env, uids)
        condition = _compiled_condition(node.condition)
        joiner = JoinFunction(
            len(node.right.columns),
            node.left_outer,
            condition,
            node.left_ttl_ms,
            node.right_ttl_ms,
            right_outer=node.right_outer,
            left_arity=len(node.left.columns),
        )
        connected: Any = left.connect(right).key_by(
            fields_key(node.left_keys), fields_key(node.right_keys)
        )
        joined = connected.process(joiner)
        if not node.left_keys:  # a join without keys (cross_join) runs on one subtask
            joined = joined.set_parallelism(1)
        return _labelled(joined, node, uids, describe(node))
    if isinstance(node, IntervalJoin):
        left = _translate(node.left, env, uids)
        right = _translate(node.right, env, uids)
        interval = IntervalJoinFunction(
            len(node.left.columns),
            len(node.right.columns),
            node.left_time,
            node.right_time,
            node.lower_ms,
            node.upper_ms,
            _compiled_condition(node.condition),
            node.left_outer,
            node.right_outer,
        )
        both: Any = left.connect(right).key_by(
            fields_key(node.left_keys), fields_key(node.right_keys)
        )
        return _labelled(both.process(interval), node, uids, describe(node))
    if isinstance(node, TemporalJoin):
        left = _translate(node.left, env, uids)
        right = _translate(node.right, env, uids)
        temporal = TemporalJoinFunction(
            len(node.right.columns),
            node.left_time,
            node.right_time,
            node.left_outer,
            _compiled_condition(node.condition),
        )
        versions: Any = left.connect(right).key_by(
            fields_key(node.left_keys), fields_key(node.right_keys)
        )
        return _labelled(versions.process(temporal), node, uids, describe(node))
    if isinstance(node, LookupJoin):
        upstream = _translate(node.input, env, uids)
        looked_up = LookupJoinFunction(
            node.table.function(node.lookup_keys),
            node.keys,
            len(node.table.columns),
            node.join_type == "LEFT",
            _compiled_condition(node.condition),
            node.table.cache,
        )
        return _labelled(upstream.flat_map(looked_up), node, uids, describe(node))
    if isinstance(node, TemporalSort):
        upstream = _translate(node.input, env, uids)
        sorting = upstream.key_by(_constant_key).process(
            TemporalSortFunction(node.time_index, node.order)
        )
        return _labelled(sorting.set_parallelism(1), node, uids, describe(node))
    if isinstance(node, Limit):
        upstream = _translate(node.input, env, uids)
        limited = upstream.key_by(_constant_key).process(
            LimitFunction(node.count, node.state_ttl_ms)
        )
        return _labelled(limited.set_parallelism(1), node, uids, describe(node))
    if isinstance(node, Deduplicate | Rank):
        upstream = _translate(node.input, env, uids)
        ranking: Any
        if isinstance(node, Deduplicate):
            ranking = DeduplicateFunction(node.keep_last, node.rowtime_index, node.state_ttl_ms)
        else:
            proctime_first = is_proctime(node.input.columns.types[node.order[0].index])
            kind = process_kind(node.strategy, node.order, proctime_first, node.end)
            ranking = RankFunction(
                kind, node.order, node.start, node.end, node.output_rank_number, node.state_ttl_ms
            )
        ranked = upstream.key_by(fields_key(node.keys)).process(ranking)
        if not node.keys:
            ranked = ranked.set_parallelism(1)
        return _labelled(ranked, node, uids, describe(node))
    if isinstance(node, WindowTableFunction | WindowRank | WindowDeduplicate | WindowJoin):
        return _translate_windowed(node, env, uids)
    if isinstance(node, Union):
        first, *rest = (_translate(i, env, uids) for i in node.inputs)
        return first.union(*rest)
    raise TypeError(f"cannot translate {type(node).__name__}")


def _translate_windowed(node: PlanNode, env: StreamExecutionEnvironment, uids: Uids) -> DataStream:
    """A window TVF, window Top-N, deduplication or join; a Top-N or deduplication is keyed
    by its partition keys and the window's end (one key per partition and window)."""
    if isinstance(node, WindowJoin):
        left = _translate(node.left, env, uids)
        right = _translate(node.right, env, uids)
        joiner = WindowJoinFunction(
            len(node.left.columns),
            len(node.right.columns),
            node.left_window[1],
            node.right_window[1],
            _compiled_condition(node.condition),
            node.left_outer,
            node.right_outer,
        )
        both: Any = left.connect(right).key_by(
            fields_key(node.left_keys), fields_key(node.right_keys)
        )
        return _labelled(both.process(joiner), node, uids, describe(node))
    upstream = _translate(node.inputs[0], env, uids)
    out: Any
    if isinstance(node, WindowTableFunction):
        time_type = node.input.columns.types[node.time_index]
        if node.window.kind != "session":
            assign = WindowTableFunctionFunction(
                node.window, node.time_index, is_proctime(time_type)
            )
            return _labelled(upstream.flat_map(assign), node, uids, describe(node))
        keys = node.partition_keys
        out = upstream.key_by(fields_key(keys) if keys else _constant_key).process(
            SessionTableFunction(node.window, node.time_index)
        )
        if not keys:
            out = out.set_parallelism(1)
        return _labelled(out, node, uids, describe(node))
    ranking: WindowRankFunction
    if isinstance(node, WindowDeduplicate):
        keep = "last" if node.keep_last else "first"
        ranking = WindowRankFunction(node.window_end, keep=keep, time_index=node.time_index)
    else:
        assert isinstance(node, WindowRank)
        ranking = WindowRankFunction(
            node.window_end, node.order, node.start, node.end, node.output_rank_number
        )
    keyed = upstream.key_by(fields_key((*node.keys, node.window_end)))
    return _labelled(keyed.process(ranking), node, uids, describe(node))


def _semi_anti_join(node: Join, env: StreamExecutionEnvironment, uids: Uids) -> DataStream:
    """A semi or anti join (``semi_join``); without keys on one subtask, as Flink's."""
    left = _translate(node.left, env, uids)
    right = _translate(node.right, env, uids)
    joiner = SemiAntiJoinFunction(
        node.join_type == "ANTI",
        _compiled_condition(node.condition),
        node.left_ttl_ms,
        node.right_ttl_ms,
        node.filter_nulls,
    )
    connected: Any = left.connect(right).key_by(
        fields_key(node.left_keys), fields_key(node.right_keys)
    )
    joined = connected.process(joiner)
    if not node.left_keys:
        joined = joined.set_parallelism(1)
    return _labelled(joined, node, uids, describe(node))


def _compiled_condition(condition: Rex | None) -> CompiledCalc | None:
    """A join's condition on each joined pair, compiled (``None``: every pair)."""
    if condition is None:
        return None
    functions: list[Any] = []
    return CompiledCalc(calc_source(None, condition, functions), functions)


def _constant_key(value: Any) -> int:
    return 0
