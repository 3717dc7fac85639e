"""Planning a BATCH job: a stage per job vertex, a blocking, sorting exchange before each.

Invariant: pure functions of the job graph (no Spark, no I/O). Every input of a stage is
fully produced before the stage runs, so a failed stage reruns from its inputs alone. Each
record crossing an exchange gets a target partition (``EdgeRouter``); ``cairn.batch.exchange``
carries the records in blocks ordered so that a keyed head reads its records key by key
(Flink's sorted inputs: a key's records in timestamp order, records of one key and
timestamp in no particular order, as in Flink), every record of a broadcast (non-keyed)
input of a keyed head before any keyed record, and the records of a non-keyed head in the
order each producer emitted them (input by input).

>>> from cairn.graph.transformations import OperatorKind, OperatorSpec, SinkTransformation
>>> from cairn.graph.transformations import SourceTransformation, OneInputTransformation
>>> from cairn.graph.transformations import PartitionTransformation, PartitionKind
>>> from cairn.graph.job_graph import build_job_graph
>>> src = SourceTransformation("words", [], source=object())
>>> keyed = PartitionTransformation("key_by", [src], partition=PartitionKind.HASH,
...                                 key_selector=lambda w: w)
>>> count = OneInputTransformation("count", [keyed], operator=OperatorSpec(
...     OperatorKind.REDUCE, lambda a, b: a, key_selector=lambda w: w))
>>> sink = SinkTransformation("out", [count], operator=OperatorSpec(OperatorKind.SINK, None))
>>> print(plan_batch(build_job_graph("wc", [sink], 2, 128)).describe())
BATCH plan 'wc': 2 stages
  stage v0 "words" parallelism=2 source
  stage v1 "count -> out" parallelism=2 <- v0 hash sorted by key (exchange)
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cairn.common.exceptions import JobSubmissionError
from cairn.graph.job_graph import JobEdge, JobGraph
from cairn.graph.transformations import PartitionKind
from cairn.ids import VertexId
from cairn.state.key_groups import KeyGroupAssigner, subtask_for_key_group

__all__ = [
    "BatchModeError",
    "BatchPlan",
    "EdgeRouter",
    "Stage",
    "StageInput",
    "key_token",
    "plan_batch",
]

# Sort-key classes: a broadcast / non-keyed record sorts before every keyed one.
UNKEYED = 0
KEYED = 1
NO_TIMESTAMP = -(2**63)  # sorts first, as Flink's Long.MIN_VALUE for a record without one

# Key types that compare among themselves; any other key sorts by its pickle.
_ORDERED_KEY_TYPES = (str, int, bytes, float, bool)


class BatchModeError(JobSubmissionError):
    """The job cannot run in BATCH mode (an unbounded source)."""


@dataclass(frozen=True)
class StageInput:
    """One input edge of a stage; ``keyed``: its records sort key by key."""

    edge: JobEdge
    producer_parallelism: int
    keyed: bool


@dataclass(frozen=True)
class Stage:
    """One job vertex run as a blocking stage: reads all its inputs, then ends."""

    vertex: VertexId
    name: str
    parallelism: int
    inputs: tuple[StageInput, ...]
    outputs: tuple[JobEdge, ...]
    keyed_head: bool
    is_source: bool

    @property
    def terminal(self) -> bool:
        return not self.outputs


@dataclass(frozen=True)
class BatchPlan:
    job_name: str
    stages: tuple[Stage, ...]  # in vertex order: producers before consumers

    def stage(self, vertex: VertexId) -> Stage:
        return self.stages[vertex]

    def consumers_of(self, vertex: VertexId) -> list[VertexId]:
        """The stages reading ``vertex``'s output, each once, in order."""
        return sorted({e.target_vertex for e in self.stages[vertex].outputs})

    def describe(self) -> str:
        lines = [f"BATCH plan {self.job_name!r}: {len(self.stages)} stages"]
        for s in self.stages:
            line = f'  stage v{s.vertex} "{s.name}" parallelism={s.parallelism}'
            if s.is_source:
                line += " source"
            for i in s.inputs:
                order = "sorted by key" if i.keyed else "in order"
                line += f" <- v{i.edge.source_vertex} {i.edge.partition.value} {order} (exchange)"
            lines.append(line)
        return "\n".join(lines)


def plan_batch(graph: JobGraph) -> BatchPlan:
    """The stages of ``graph``; raises ``BatchModeError`` for an unbounded source.

    Chains stay as the job graph made them (operators between two exchanges run in one
    stage, one Spark task per partition); every edge between vertices is an exchange.
    """
    unbounded = [v.name for v in graph.vertices if v.is_source and not v.bounded]
    if unbounded:
        raise BatchModeError(
            "execution.runtime-mode: BATCH needs bounded sources; unbounded: "
            + ", ".join(repr(n) for n in unbounded)
            + " (give the source an end, e.g. a bounded Kafka source, or run in STREAMING mode)"
        )
    stages = []
    for v in graph.vertices:
        head = v.operators[0]
        inputs = tuple(
            StageInput(
                e,
                graph.vertex(e.source_vertex).parallelism,
                keyed=head.keyed and e.partition is PartitionKind.HASH,
            )
            for e in graph.inputs_of(v.id)
        )
        stages.append(
            Stage(
                vertex=v.id,
                name=v.name,
                parallelism=v.parallelism,
                inputs=inputs,
                outputs=tuple(graph.outputs_of(v.id)),
                keyed_head=head.keyed and not v.is_source,
                is_source=v.is_source,
            )
        )
    return BatchPlan(graph.job_name, tuple(stages))


def key_token(key: Any) -> tuple[Any, ...]:
    """What a key sorts by: the key itself for keys of one simple type, else its pickle
    (equal keys of those types pickle alike).

    >>> sorted([key_token("b"), key_token(3), key_token("a"), key_token(("x", 1))])
    [(0, 'int', 3), (0, 'str', 'a'), (0, 'str', 'b'), (1, '', b'...')]
    """
    if type(key) in _ORDERED_KEY_TYPES:
        return (0, type(key).__name__, key)
    return (1, "", pickle.dumps(key, protocol=pickle.HIGHEST_PROTOCOL))


class EdgeRouter:
    """Target partitions of one output edge's records (the producer's side of an exchange).
    ``targets(record, seq)``: ``seq`` numbers the producer partition's records (round
    robin); a keyed edge (``keyed_hash``) routes by key group instead (``key_lookup``,
    ``target_of_key_group``), grouping its records by key on the way.

    >>> from cairn.graph.job_graph import JobEdge
    >>> e = JobEdge(VertexId(0), VertexId(1), PartitionKind.REBALANCE, None, 128, 0)
    >>> r = EdgeRouter(StageInput(e, 2, keyed=False), consumer_parallelism=3, producer=1)
    >>> [r.targets("x", seq) for seq in range(3)]
    [[2], [0], [1]]
    """

    def __init__(self, input: StageInput, consumer_parallelism: int, producer: int) -> None:
        edge = input.edge
        self.edge = edge
        self._n = consumer_parallelism
        self._producer = producer
        self._assigner = KeyGroupAssigner(edge.target_max_parallelism)
        # The consumer subtask of each key group, looked up instead of computed per record.
        self._subtask_of = [
            subtask_for_key_group(edge.target_max_parallelism, consumer_parallelism, kg)
            for kg in range(edge.target_max_parallelism)
        ]
        selector: Callable[[Any], Any] | None = edge.key_selector
        self._select = selector
        kind = edge.partition
        self.keyed_hash = kind is PartitionKind.HASH and input.keyed
        self.targets: Callable[[Any, int], list[int]]
        if kind is PartitionKind.HASH:
            self.targets = self._hash
        elif kind is PartitionKind.BROADCAST:
            self.targets = self._broadcast
        elif kind is PartitionKind.CUSTOM:
            self.targets = self._custom
        elif kind is PartitionKind.GLOBAL or consumer_parallelism == 1:
            self.targets = self._first
        elif kind is PartitionKind.FORWARD:
            self.targets = self._forward
        else:  # REBALANCE, SHUFFLE, RESCALE: round robin (any spread gives the same result)
            self.targets = self._round_robin

    def key_lookup(self) -> tuple[Callable[[Any], Any], dict[Any, int], Callable[[Any], int]]:
        """The key selector, the key group cache (read-only) and the key group function."""
        assert self._select is not None
        return self._select, self._assigner.cache, self._assigner.key_group

    def target_of_key_group(self, key_group: int) -> int:
        return self._subtask_of[key_group]

    def _hash(self, record: Any, seq: int) -> list[int]:
        assert self._select is not None
        return [self._subtask_of[self._assigner.key_group(self._select(record))]]

    def _broadcast(self, record: Any, seq: int) -> list[int]:
        return list(range(self._n))

    def _custom(self, record: Any, seq: int) -> list[int]:
        return [self._select.channel(record, self._n)]  # type: ignore[union-attr]

    def _first(self, record: Any, seq: int) -> list[int]:
        return [0]

    def _forward(self, record: Any, seq: int) -> list[int]:
        return [self._producer]

    def _round_robin(self, record: Any, seq: int) -> list[int]:
        return [(self._producer + seq + 1) % self._n]
