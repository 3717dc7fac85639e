"""The logical plan of a table: immutable nodes and their columns (which changes each one's
output holds: ``cairn.table.changelog``).

Invariant: pure values — a node knows its input(s), its output columns and nothing of a job.
A stateful node's state TTL
(``state_ttl_ms``; a join's per side) is ``None`` until a ``STATE_TTL`` hint or
``table.exec.state.ttl`` sets it (``cairn.table.state_ttl``); it is not part of what the node
computes, so ``explain`` and the operators' uids do not show it.

>>> from cairn.table.analysis import AggCall, Columns
>>> from cairn.table.types import DataTypes
>>> scan = Values((("a", 1),), Columns.of([("k", DataTypes.STRING()), ("v", DataTypes.BIGINT())]))
>>> n = AggCall("count_star", -1, DataTypes.BIGINT(False))
>>> agg = Aggregate(scan, (0,), (n,), Columns.of([("k", DataTypes.STRING()), ("n", n.data_type)]))
>>> agg.inputs == (scan,), agg.columns.names
(True, ['k', 'n'])
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from cairn.table.analysis import AggCall, Columns, Rex

__all__ = [
    "JOIN_TYPES",
    "Aggregate",
    "Calc",
    "ChangelogMode",
    "Correlate",
    "Deduplicate",
    "ExplainDetail",
    "IntervalJoin",
    "Join",
    "Limit",
    "LookupJoin",
    "MiniBatchAssigner",
    "OverAggregate",
    "PlanNode",
    "PythonCalc",
    "Rank",
    "SortField",
    "StreamScan",
    "TableAggregate",
    "TemporalJoin",
    "TemporalSort",
    "TwoInputJoin",
    "Union",
    "Values",
    "WatermarkAssigner",
    "WindowAggregate",
    "WindowDeduplicate",
    "WindowJoin",
    "WindowRank",
    "WindowTableFunction",
    "with_inputs",
]


class ExplainDetail(Enum):
    """Extra details ``explain`` may show (PyFlink's ``ExplainDetail``); Cairn's plan always
    shows the changelog mode and has no cost model, so the others add nothing."""

    ESTIMATED_COST = 0
    CHANGELOG_MODE = 1
    JSON_EXECUTION_PLAN = 2
    PLAN_ADVICE = 3


class ChangelogMode(Enum):
    """The kinds of change a stream of table rows holds (PyFlink's ``ChangelogMode``)."""

    INSERT_ONLY = "I"
    ALL = "I,UB,UA,D"

    @staticmethod
    def insert_only() -> ChangelogMode:
        return ChangelogMode.INSERT_ONLY

    @staticmethod
    def all() -> ChangelogMode:
        return ChangelogMode.ALL


@dataclass(frozen=True)
class PlanNode:
    """A node of the logical plan; ``columns`` are its output's."""

    columns: Columns

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return ()


@dataclass(frozen=True)
class Values(PlanNode):
    """``from_elements``: rows known when the job is planned."""

    rows: tuple[tuple[Any, ...], ...] = ()

    def __init__(self, rows: tuple[tuple[Any, ...], ...], columns: Columns) -> None:
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "rows", rows)


@dataclass(frozen=True, eq=False)
class StreamScan(PlanNode):
    """``from_data_stream`` / a connector's source: records of a DataStream built when the
    job is translated (``build(env)`` returns a DataStream of ``(kind, row)`` records)."""

    name: str = ""
    build: Any = None
    insert_only: bool = True
    #: ``build`` keeps keyed state (an upsert source's ``ChangelogNormalize``): it is called
    #: as ``build(env, state_ttl_ms)``.
    stateful: bool = False
    state_ttl_ms: int | None = None
    #: columns that are rowtime attributes with the stream's own watermarks
    #: (``SOURCE_WATERMARK()``, or a watermark pushed into the scan)
    rowtimes: tuple[int, ...] = ()
    #: the connector's offer to compute projections, filters and the watermark in the scan
    #: (a ``scan_pushdown.ScanPushdown``), and what was pushed (a ``ScanSpec``, or None)
    pushdown: Any = None
    spec: Any = None


@dataclass(frozen=True)
class Calc(PlanNode):
    """Projection and filter fused into one function per record."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    projections: tuple[Rex, ...] | None = None
    condition: Rex | None = None

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)

    @property
    def expressions(self) -> tuple[Rex, ...]:
        """Its projections, then its condition."""
        return (*(self.projections or ()), *(() if self.condition is None else (self.condition,)))


@dataclass(frozen=True)
class PythonCalc(PlanNode):
    """Flink's ``PythonCalc``: the input's columns, then one column per call of a pandas
    (vectorized) function in ``calls`` (each over columns of the input), computed a batch of
    rows at a time (``cairn.table.vectorized_calc``); ``batch_size`` bounds the rows per call
    (``python.fn-execution.arrow.batch.size``), not part of what the node computes."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    calls: tuple[Rex, ...] = ()
    batch_size: int = field(default=10000, compare=False)

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Aggregate(PlanNode):
    """``GROUP BY keys`` computing ``calls``; output: the keys, then one column per call."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    calls: tuple[AggCall, ...] = ()
    final_only: bool = False
    state_ttl_ms: int | None = None
    #: ``(allow-latency ms, size)`` when ``table.exec.mini-batch.enabled`` buffers its input
    #: (``cairn.table.mini_batch``); like the TTL, not part of what the node computes: no uid
    mini_batch: tuple[int, int] | None = None

    def __init__(
        self,
        input: PlanNode,
        keys: tuple[int, ...],
        calls: tuple[AggCall, ...],
        columns: Columns,
        final_only: bool = False,
        state_ttl_ms: int | None = None,
        mini_batch: tuple[int, int] | None = None,
    ) -> None:
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "input", input)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "final_only", final_only)
        object.__setattr__(self, "state_ttl_ms", state_ttl_ms)
        object.__setattr__(self, "mini_batch", mini_batch)

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class WindowAggregate(PlanNode):
    """A group window aggregate: per key and window, ``calls``; output: the keys, the
    window ``properties`` (``start``, ``end``, ``rowtime``), then one column per call."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    window: Any = None
    time_index: int = -1
    calls: tuple[AggCall, ...] = ()
    properties: tuple[str, ...] = ()

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class OverAggregate(PlanNode):
    """Each row with aggregates over its over window; output: the input's columns, then one
    column per call."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    window: Any = None
    time_index: int = -1
    calls: tuple[AggCall, ...] = ()

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class TableAggregate(PlanNode):
    """``group_by(keys).flat_aggregate(f)``: the keys, then the rows ``f`` emits per group;
    ``args`` ``None`` passes the whole row."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    wrapper: Any = None
    args: tuple[int, ...] | None = None
    state_ttl_ms: int | None = None

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class WatermarkAssigner(PlanNode):
    """``WATERMARK FOR col AS col - INTERVAL ...``: the input's rows, stamped with their time
    column, and watermarks ``delay_ms`` behind the highest time seen."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    time_index: int = -1
    delay_ms: int = 0
    #: ``table.exec.source.idle-timeout`` (0: never idle): a subtask without rows for this
    #: long stops holding the watermark back (not part of what the node computes: no uid)
    idle_timeout_ms: int = 0

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True)
class MiniBatchAssigner(PlanNode):
    """Flink's ``MiniBatchAssigner`` above a source (or its watermark assigner) when
    ``table.exec.mini-batch.enabled``: the input's rows unchanged. Cairn's mini-batch
    operators keep their own latency timers, so it runs no operator; it shows the plan's
    mini-batch interval and mode (``ProcTime``, or ``RowTime`` below a node that needs
    watermarks)."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    interval_ms: int = 0
    mode: str = "ProcTime"

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


#: Flink's join types of a stream join and how its plan prints them.
JOIN_TYPES = {
    "INNER": "InnerJoin",
    "LEFT": "LeftOuterJoin",
    "RIGHT": "RightOuterJoin",
    "FULL": "FullOuterJoin",
    "SEMI": "LeftSemiJoin",
    "ANTI": "LeftAntiJoin",
}


@dataclass(frozen=True, eq=False)
class TwoInputJoin(PlanNode):
    """What every join of two tables has: ``left_keys = right_keys [AND condition]``, its
    ``join_type`` (a key of ``JOIN_TYPES``); output: the left's columns, then the right's."""

    left: PlanNode = field(default=None)  # type: ignore[assignment]
    right: PlanNode = field(default=None)  # type: ignore[assignment]
    left_keys: tuple[int, ...] = ()
    right_keys: tuple[int, ...] = ()
    condition: Rex | None = None
    join_type: str = "INNER"

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)

    @property
    def left_outer(self) -> bool:
        """Whether a left row without a match is kept (padded with NULLs)."""
        return self.join_type in ("LEFT", "FULL")

    @property
    def right_outer(self) -> bool:
        """Whether a right row without a match is kept (padded with NULLs)."""
        return self.join_type in ("RIGHT", "FULL")


@dataclass(frozen=True, eq=False)
class Join(TwoInputJoin):
    """A regular join ``left [LEFT|RIGHT|FULL] JOIN right ON ...``: both sides kept in keyed
    state (each with its TTL). A ``SEMI`` or ``ANTI`` join (an ``IN``/``EXISTS`` subquery,
    ``INTERSECT``, ``EXCEPT``) outputs the left's columns only, each left row while it matches
    a right row (``SEMI``) or none (``ANTI``); ``filter_nulls`` False makes its keys equal when
    both are NULL (``IS NOT DISTINCT FROM``). Without keys it runs on one subtask."""

    left_ttl_ms: int | None = None
    right_ttl_ms: int | None = None
    filter_nulls: bool = True


@dataclass(frozen=True, eq=False)
class IntervalJoin(TwoInputJoin):
    """An event-time interval join (Flink's ``IntervalJoin``): a join whose condition also
    has ``left.time - right.time BETWEEN lower_ms AND upper_ms``, both times rowtime
    attributes (``left_time``, ``right_time``: column indexes in each input); insert-only in
    and out."""

    left_time: int = -1
    right_time: int = -1
    lower_ms: int = 0
    upper_ms: int = 0


@dataclass(frozen=True)
class TemporalJoin(TwoInputJoin):
    """An event-time temporal join (Flink's ``TemporalJoin`` on a versioned table): each left
    row joined with the version of the right row of its key that was valid at the left row's
    time (``left_time``: a rowtime attribute of the left; ``right_time`` of the right, whose
    primary key the keys include). Emitted when the watermark passes the left row's time;
    the left's changelog mode is the output's."""

    left_time: int = -1
    right_time: int = -1


@dataclass(frozen=True, eq=False)
class LookupJoin(PlanNode):
    """A processing-time lookup join (Flink's ``LookupJoin``): each input row joined with
    the rows ``table`` holds for its ``keys`` (input columns) in the table's ``lookup_keys``
    columns when the row passes; ``condition`` over the joined row; ``join_type`` ``INNER``
    or ``LEFT``. Output: the input's columns, then the table's."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    table: Any = None  # a lookup_source.LookupTable
    keys: tuple[int, ...] = ()
    lookup_keys: tuple[int, ...] = ()
    condition: Rex | None = None
    join_type: str = "INNER"

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class WindowJoin(TwoInputJoin):
    """A window join (Flink's ``WindowJoin``): both sides windowed alike and joined on
    ``window_start`` and ``window_end`` (among the keys); each window's rows are kept until
    the watermark passes its end, then joined and emitted insert-only. ``left_window`` and
    ``right_window``: each side's ``(window_start, window_end)`` columns."""

    window: Any = None
    left_window: tuple[int, int] = (-1, -1)
    right_window: tuple[int, int] = (-1, -1)


@dataclass(frozen=True, eq=False)
class Correlate(PlanNode):
    """A table function per input row: ``join_lateral`` (input columns kept) or
    ``flat_map`` (its columns only); ``args`` ``None`` passes the whole row."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    wrapper: Any = None
    args: tuple[Rex, ...] | None = None
    keep_input: bool = True
    outer: bool = False

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Limit(PlanNode):
    """The first ``count`` rows (after skipping ``offset``)."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    count: int = 0
    state_ttl_ms: int | None = None

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True)
class SortField:
    """One ``ORDER BY`` column of a rank: its position, direction and where nulls go."""

    index: int
    ascending: bool = True
    nulls_first: bool = True


@dataclass(frozen=True)
class Deduplicate(PlanNode):
    """``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY time) ... WHERE rn = 1`` on a time
    attribute: per key the first row (``ASC``) or the last (``DESC``), by processing time
    (arrival) or event time (``rowtime``: the row time column's position, else None)."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    keep_last: bool = False
    rowtime_index: int | None = None
    state_ttl_ms: int | None = None

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Rank(PlanNode):
    """Top-N: ``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY order) ... WHERE rn <= end``
    (ranks ``start``..``end``); output: the input's columns, then the rank number when
    ``output_rank_number``. ``strategy`` is Flink's ``AppendFastStrategy`` (insert-only
    input) or ``RetractStrategy`` (updating input)."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    order: tuple[SortField, ...] = ()
    start: int = 1
    end: int = 1
    output_rank_number: bool = False
    strategy: str = "AppendFastStrategy"
    state_ttl_ms: int | None = None

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class WindowTableFunction(PlanNode):
    """A window TVF not aggregated (Flink's ``WindowTableFunction``): each input row once per
    window it belongs to, with ``window_start``, ``window_end`` and ``window_time`` appended;
    a session window's rows (per ``partition_keys``) come out when their session closes."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    window: Any = None
    time_index: int = -1
    partition_keys: tuple[int, ...] = ()

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class WindowRank(PlanNode):
    """Window Top-N (Flink's ``WindowRank``): per window (its ``window_end`` column) and
    partition ``keys``, the rows ranked ``start..end`` by ``order``, emitted insert-only when
    the watermark passes the window's end; the rank number appended when
    ``output_rank_number``."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    order: tuple[SortField, ...] = ()
    start: int = 1
    end: int = 1
    output_rank_number: bool = False
    window: Any = None
    window_start: int = -1
    window_end: int = -1

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class WindowDeduplicate(PlanNode):
    """Window deduplication (Flink's ``WindowDeduplicate``): per window and ``keys`` the
    first (earliest ``time_index``) or last row, emitted insert-only when the window closes."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    keys: tuple[int, ...] = ()
    keep_last: bool = False
    time_index: int = -1
    window: Any = None
    window_start: int = -1
    window_end: int = -1

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True)
class TemporalSort(PlanNode):
    """``ORDER BY rowtime ASC [, more]`` (Flink's ``TemporalSort``): rows released in time
    order by the watermark; ``order``: the sort keys after the time (``time_index``)."""

    input: PlanNode = field(default=None)  # type: ignore[assignment]
    time_index: int = -1
    order: tuple[SortField, ...] = ()

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Union(PlanNode):
    """``UNION ALL``: the rows of every input, in no particular order across inputs."""

    all_inputs: tuple[PlanNode, ...] = ()

    @property
    def inputs(self) -> tuple[PlanNode, ...]:
        return self.all_inputs


def with_inputs(node: PlanNode, inputs: tuple[PlanNode, ...]) -> PlanNode:
    """``node`` over other ``inputs`` (as many, in the same order), everything else kept."""
    if isinstance(node, TwoInputJoin):
        return replace(node, left=inputs[0], right=inputs[1])
    if isinstance(node, Union):
        return replace(node, all_inputs=inputs)
    return replace(node, input=inputs[0])  # type: ignore[call-arg]
