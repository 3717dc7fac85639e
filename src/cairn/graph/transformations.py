"""Logical plan: one ``Transformation`` per DataStream API call.

Invariant: transformations are created by the API only, ids are unique in the process and
increase in creation order, and a transformation never changes after it became the input of
another one, except for ``name``/``uid``/``parallelism`` setters that the API applies to the
transformation it just returned. What must be stable across processes (auto-generated uids)
uses ``job_positions``, a transformation's place within its own job, never the id itself.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class OperatorKind(enum.Enum):
    """What a runtime operator does with the function it wraps."""

    MAP = "map"  # MapFunction or callable
    FLAT_MAP = "flat_map"  # FlatMapFunction or callable returning an iterable
    FILTER = "filter"  # FilterFunction or predicate
    PROCESS = "process"  # ProcessFunction (non-keyed)
    TIMESTAMPS = "timestamps"  # assign_timestamps_and_watermarks: the function is the strategy
    KEYED_PROCESS = "keyed_process"  # KeyedProcessFunction (keyed input)
    REDUCE = "reduce"  # ReduceFunction (keyed input); sum/min/max are reducers too
    SINK_FUNCTION = "sink_function"  # legacy SinkFunction (add_sink, print)
    SINK = "sink"  # Sink (sink_to): writer + optional two-phase committer
    # The parallel writers of a Sink with a global committer (``Sink.global_committer``): at
    # each barrier they emit their committables downstream, to the one committer subtask.
    SINK_WRITER = "sink_writer"
    COLLECT = "collect"  # execute_and_collect(): exactly-once results to the client
    ASYNC_WAIT = "async_wait"  # AsyncDataStream: an AsyncFunction; options: ``AsyncWaitConfig``
    # Two inputs (``TwoInputTransformation``): the function has a method per input.
    CO_MAP = "co_map"  # CoMapFunction
    CO_FLAT_MAP = "co_flat_map"  # CoFlatMapFunction
    CO_PROCESS = "co_process"  # CoProcessFunction
    KEYED_CO_PROCESS = "keyed_co_process"  # KeyedCoProcessFunction (both inputs keyed)
    BROADCAST_PROCESS = "broadcast_process"  # BroadcastProcessFunction
    KEYED_BROADCAST_PROCESS = "keyed_broadcast_process"  # KeyedBroadcastProcessFunction


class PartitionKind(enum.Enum):
    FORWARD = "forward"
    REBALANCE = "rebalance"
    SHUFFLE = "shuffle"
    BROADCAST = "broadcast"
    HASH = "hash"  # key_by: key group of the key decides the channel
    GLOBAL = "global"  # everything to subtask 0
    RESCALE = "rescale"
    # partition_custom: the edge's key selector is a ``CustomPartitioning`` whose
    # ``channel(record, n)`` names the channel (the user's Partitioner on the record's key).
    CUSTOM = "custom"


@dataclass(frozen=True)
class OperatorSpec:
    kind: OperatorKind
    function: Any
    # For keyed operators: the key selector of the KeyedStream this operator consumes.
    key_selector: Callable[[Any], Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


_ids = itertools.count(1)


@dataclass(eq=False)
class Transformation:
    name: str
    inputs: list[Transformation]
    parallelism: int | None = None  # None: the environment's default
    max_parallelism: int | None = None
    uid: str | None = None
    output_type: Any = None  # a cairn.common.typeinfo.TypeInformation, or None
    id: int = field(default_factory=lambda: next(_ids))
    # Operators whose parallelism the user fixed (or that are inherently non-parallel).
    parallelism_fixed: bool = False
    # set_uid_hash(): recorded so that submission can refuse it by name (state is per uid).
    uid_hash: str | None = None

    def describe(self) -> str:
        return f"{type(self).__name__}({self.name!r}, id={self.id})"


@dataclass(eq=False)
class SourceTransformation(Transformation):
    # A cairn.api.connectors.Source, or a legacy SourceFunction.
    source: Any = None
    bounded: bool = True
    # The WatermarkStrategy given to from_source (None for add_source).
    watermark_strategy: Any = None


@dataclass(eq=False)
class OneInputTransformation(Transformation):
    operator: OperatorSpec | None = None


@dataclass(eq=False)
class TwoInputTransformation(OneInputTransformation):
    """An operator with two logical inputs: ``inputs == [first, second]``. With keys, the
    spec's ``key_selector`` keys the first input and ``options[KEY_SELECTOR2]`` the second
    (absent: the second input is not keyed, e.g. a broadcast stream)."""


# OperatorSpec options of two-input operators.
KEY_SELECTOR2 = "key_selector2"  # the second input's key selector
BROADCAST_STATES = "broadcast_states"  # the MapStateDescriptors of a broadcast stream


@dataclass(eq=False)
class PartitionTransformation(Transformation):
    """Virtual: changes how records reach the next operator; never becomes a task."""

    partition: PartitionKind = PartitionKind.FORWARD
    key_selector: Callable[[Any], Any] | None = None


@dataclass(eq=False)
class SideOutputTransformation(Transformation):
    """Virtual: the records its input operator emitted with the output tag ``tag_id``."""

    tag_id: str = ""


@dataclass(eq=False)
class UnionTransformation(Transformation):
    """Virtual: merges its inputs; never becomes a task."""


@dataclass(eq=False)
class SinkTransformation(OneInputTransformation):
    """A terminal operator (``add_sink``, ``sink_to``, ``print``, ``execute_and_collect``)."""


def reachable(sinks: Iterable[Transformation]) -> list[Transformation]:
    """Every transformation the sinks read from (sinks included), in creation order."""
    seen: dict[int, Transformation] = {}
    stack = list(sinks)
    while stack:
        t = stack.pop()
        if t.id not in seen:
            seen[t.id] = t
            stack.extend(t.inputs)
    return [seen[i] for i in sorted(seen)]


def job_positions(sinks: Iterable[Transformation]) -> dict[int, int]:
    """Transformation id -> its position (from 1) in creation order within the job of ``sinks``.

    Only the job's own transformations count (virtual ones too), so the positions, and the
    uids generated from them, depend on the job script alone, not on what else the process
    built before, as Flink's ``StreamGraphHasher`` derives ids from the job's own topology.

    >>> _ = SourceTransformation("built for another job", [])
    >>> src = SourceTransformation("numbers", [])
    >>> out = SinkTransformation("out", [src])
    >>> sorted(job_positions([out]).values()), job_positions([out])[out.id]
    ([1, 2], 2)
    """
    return {t.id: position for position, t in enumerate(reachable(sinks), 1)}
