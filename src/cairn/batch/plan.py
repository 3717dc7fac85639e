"""Planning a BATCH job: a stage per job vertex, a blocking, sorting exchange before each.

Invariant: pure functions of the job graph (no Spark, no I/O). Every input of a stage is
fully produced before the stage runs, so a failed stage reruns from its inputs alone. Each
record crossing an exchange gets a target partition and a sort key; within a partition the
stage reads its records in sort-key order, which puts a keyed head's records key by key
(key group, then the key, then the timestamp: Flink's sorted inputs; records of one key and
timestamp in no particular order, as in Flink), every record of a
broadcast (non-keyed) input of a keyed head before any keyed record, and the records of a
non-keyed head in the order each producer emitted them (input by input).

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
    "same_key",
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


def same_key(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two sort keys belong to one key's run of records.

    >>> k = lambda key, ts: (KEYED, 5, key_token(key), ts)
    >>> same_key(k("a", 1), k("a", 9)), same_key(k("a", 1), k("b", 1))
    (True, False)
    """
    return bool(a[0] == KEYED and b[0] == KEYED and a[1] == b[1] and a[2] == b[2])


Route = tuple[int, tuple[Any, ...]]  # (target partition, sort key)


class EdgeRouter:
    """Target partitions and sort keys of one output edge's records (the producer's side of
    an exchange). ``routes(record, timestamp, seq)``: ``seq`` numbers the producer
    partition's records, keeping each producer's order where no key sorts them.

    >>> from cairn.graph.job_graph import JobEdge
    >>> e = JobEdge(VertexId(0), VertexId(1), PartitionKind.REBALANCE, None, 128, 0)
    >>> r = EdgeRouter(StageInput(e, 2, keyed=False), consumer_parallelism=3, producer=1)
    >>> [r.routes("x", None, seq) for seq in range(3)]
    [[(2, (0, 0, 1, 0))], [(0, (0, 0, 1, 1))], [(1, (0, 0, 1, 2))]]
    """

    def __init__(self, input: StageInput, consumer_parallelism: int, producer: int) -> None:
        edge = input.edge
        self.edge = edge
        self._n = consumer_parallelism
        self._producer = producer
        self._side = edge.input_side
        self._keyed = input.keyed
        self._assigner = KeyGroupAssigner(edge.target_max_parallelism)
        # The consumer subtask of each key group, looked up instead of computed per record.
        self._subtask_of = [
            subtask_for_key_group(edge.target_max_parallelism, consumer_parallelism, kg)
            for kg in range(edge.target_max_parallelism)
        ]
        selector: Callable[[Any], Any] | None = edge.key_selector
        self._select = selector
        kind = edge.partition
        self._keyed_hash = kind is PartitionKind.HASH and input.keyed
        self.routes: Callable[[Any, int | None, int], list[Route]]
        if kind is PartitionKind.HASH:
            self.routes = self._hash
        elif kind is PartitionKind.BROADCAST:
            self.routes = self._broadcast
        elif kind is PartitionKind.CUSTOM:
            self.routes = self._custom
        elif kind is PartitionKind.GLOBAL or consumer_parallelism == 1:
            self.routes = self._first
        elif kind is PartitionKind.FORWARD:
            self.routes = self._forward
        else:  # REBALANCE, SHUFFLE, RESCALE: round robin (any spread gives the same result)
            self.routes = self._round_robin

    def emit_into(
        self,
        out: list[Any],
        consumer: int,
        records: list[Any],
        stamps: list[int | None] | None,
        seq: int,
    ) -> None:
        """Append ``(consumer, partition, sort key, side, timestamp, record)`` for each
        route of each record (``stamps``: the records' timestamps, or ``None``)."""
        side = self.edge.input_side
        if self._keyed_hash:
            self._emit_keyed(out, consumer, records, stamps)
            return
        routes = self.routes
        for i, r in enumerate(records):
            ts = stamps[i] if stamps is not None else None
            for part, key in routes(r, ts, seq + i):
                out.append((consumer, part, key, side, ts, r))

    def _emit_keyed(
        self, out: list[Any], consumer: int, records: list[Any], stamps: list[int | None] | None
    ) -> None:
        # The hot path of a keyed exchange: ``_hash`` inlined, a str key's token built here.
        select, side, subtask_of = self._select, self.edge.input_side, self._subtask_of
        assert select is not None
        cache, key_group = self._assigner.cache, self._assigner.key_group
        append = out.append
        for i, r in enumerate(records):
            key = select(r)
            kg = cache.get(key)
            if kg is None:
                kg = key_group(key)
            token = (0, "str", key) if type(key) is str else key_token(key)
            ts = stamps[i] if stamps is not None else None
            order = (KEYED, kg, token, NO_TIMESTAMP if ts is None else ts)
            append((consumer, subtask_of[kg], order, side, ts, r))

    def _order(self, seq: int) -> tuple[Any, ...]:
        return (UNKEYED, self._side, self._producer, seq)

    def _hash(self, record: Any, ts: int | None, seq: int) -> list[Route]:
        assert self._select is not None
        key = self._select(record)
        kg = self._assigner.key_group(key)
        target = self._subtask_of[kg]
        if not self._keyed:
            return [(target, self._order(seq))]
        # Ties (a key's records of one timestamp) may come in any order, as in Flink.
        return [(target, (KEYED, kg, key_token(key), NO_TIMESTAMP if ts is None else ts))]

    def _broadcast(self, record: Any, ts: int | None, seq: int) -> list[Route]:
        order = self._order(seq)
        return [(target, order) for target in range(self._n)]

    def _custom(self, record: Any, ts: int | None, seq: int) -> list[Route]:
        channel = self._select.channel(record, self._n)  # type: ignore[union-attr]
        return [(channel, self._order(seq))]

    def _first(self, record: Any, ts: int | None, seq: int) -> list[Route]:
        return [(0, self._order(seq))]

    def _forward(self, record: Any, ts: int | None, seq: int) -> list[Route]:
        return [(self._producer, self._order(seq))]

    def _round_robin(self, record: Any, ts: int | None, seq: int) -> list[Route]:
        return [((self._producer + seq + 1) % self._n, self._order(seq))]
