"""Job graph: chains of operators (vertices) and the channels between them (edges).

Invariant: vertex ids are positions in a topological order (sources first, ties broken by
transformation id), so the same script always yields the same ids and operator uids, whatever
else the process built before; every edge goes from the tail of one chain to the head of
another.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.graph.chaining import (
    JobGraphError,
    StreamEdge,
    StreamNode,
    build_chains,
    build_stream_graph,
)
from cairn.graph.transformations import (
    OperatorSpec,
    PartitionKind,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    job_positions,
)
from cairn.ids import OperatorUid, VertexId

__all__ = [
    "JobEdge",
    "JobGraph",
    "JobGraphError",
    "JobVertex",
    "OperatorNode",
    "auto_uid",
    "build_job_graph",
]


@dataclass(frozen=True)
class OperatorNode:
    """One operator of a chain; its state in checkpoints is keyed by ``uid``."""

    uid: OperatorUid
    name: str
    transformation_id: int
    # "source" (connectors.base.Source), "source_function" (has run()/cancel()),
    # or an OperatorKind value ("map", "keyed_process", "sink", ...).
    kind: str
    spec: OperatorSpec | None  # non-source operators
    source: Any | None  # sources
    parallelism: int
    max_parallelism: int
    keyed: bool  # spec.key_selector is not None
    watermark_strategy: Any = None  # sources: the WatermarkStrategy of from_source


@dataclass(frozen=True)
class JobEdge:
    """A channel from every subtask of ``source_vertex`` to subtasks of ``target_vertex``."""

    source_vertex: VertexId
    target_vertex: VertexId
    partition: PartitionKind
    key_selector: Callable[[Any], Any] | None  # for HASH
    target_max_parallelism: int  # key groups of the consumer, used by the hash partitioner
    input_index: int  # position among the target vertex's input edges
    output_tag: str | None = None  # side output (tag id) this edge carries; None: main output
    input_side: int = 0  # which logical input of a two-input target it feeds (0 or 1)


@dataclass(frozen=True)
class JobVertex:
    """A chain of operators run by one task per subtask (head first)."""

    id: VertexId
    name: str  # chained operator names joined with " -> "
    parallelism: int
    max_parallelism: int
    operators: tuple[OperatorNode, ...]
    is_source: bool
    # Sources: SourceTransformation.bounded; other vertices: all their inputs are bounded.
    bounded: bool


@dataclass(frozen=True)
class JobGraph:
    """What the runtime deploys. ``vertices[i].id == i``; edges sorted by target and input.

    >>> from cairn.graph.transformations import OperatorKind
    >>> src = SourceTransformation("numbers", [], source=object())
    >>> sink = SinkTransformation("out", [src], operator=OperatorSpec(OperatorKind.SINK, None))
    >>> print(build_job_graph("demo", [sink], 1, 128).describe())
    Job 'demo': 1 vertices, 0 edges
      v0 "numbers -> out" parallelism=1 max_parallelism=128 source bounded
    """

    job_name: str
    vertices: tuple[JobVertex, ...]  # topologically sorted, sources first
    edges: tuple[JobEdge, ...]

    def vertex(self, vid: VertexId) -> JobVertex:
        if not 0 <= vid < len(self.vertices):
            raise KeyError(f"Job {self.job_name!r} has no vertex {vid}")
        return self.vertices[vid]

    def inputs_of(self, vid: VertexId) -> list[JobEdge]:
        """Input edges of the vertex, ordered by ``input_index``."""
        self.vertex(vid)
        return sorted((e for e in self.edges if e.target_vertex == vid), key=_input_order)

    def outputs_of(self, vid: VertexId) -> list[JobEdge]:
        """Output edges of the vertex (all leave its tail operator), by target vertex."""
        self.vertex(vid)
        return [e for e in self.edges if e.source_vertex == vid]

    def operator_uids(self) -> list[OperatorUid]:
        """Every operator's uid, in vertex order and chain order."""
        return [op.uid for v in self.vertices for op in v.operators]

    def describe(self) -> str:
        """Human-readable plan: a header, then one line per vertex with its edges."""
        lines = [f"Job {self.job_name!r}: {len(self.vertices)} vertices, {len(self.edges)} edges"]
        for v in self.vertices:
            line = (
                f"  v{v.id} {_quote(v.name)} parallelism={v.parallelism} "
                f"max_parallelism={v.max_parallelism}"
            )
            if v.is_source:
                line += " source " + ("bounded" if v.bounded else "unbounded")
            ins = self.inputs_of(v.id)
            if ins:
                line += " <- " + ", ".join(f"v{e.source_vertex} {e.partition.value}" for e in ins)
            outs = self.outputs_of(v.id)
            if outs:
                line += " -> " + ", ".join(f"v{e.target_vertex} {e.partition.value}" for e in outs)
            lines.append(line)
        return "\n".join(lines)


def build_job_graph(
    job_name: str,
    sinks: Sequence[SinkTransformation],
    default_parallelism: int,
    default_max_parallelism: int,
    chaining_enabled: bool = True,
) -> JobGraph:
    """Translate the plan ending in ``sinks`` into chained vertices and edges.

    Raises ``JobGraphError`` for invalid parallelism, forward edges that change parallelism,
    duplicate uids, or malformed plans.

    >>> from cairn.graph.transformations import OperatorKind, OneInputTransformation
    >>> src = SourceTransformation("numbers", [], source=object())
    >>> m = OneInputTransformation("double", [src], operator=OperatorSpec(OperatorKind.MAP, None))
    >>> sink = SinkTransformation("out", [m], operator=OperatorSpec(OperatorKind.SINK, None))
    >>> [v.name for v in build_job_graph("demo", [sink], 2, 128).vertices]
    ['numbers -> double -> out']
    """
    graph = build_stream_graph(sinks, default_parallelism, default_max_parallelism)
    positions = job_positions(sinks)
    chains = build_chains(graph, chaining_enabled)
    chain_of = {node.id: ci for ci, chain in enumerate(chains) for node in chain}
    # Chains are linear, so an edge between two chains always leaves a tail and enters a head.
    cross = [e for e in graph.edges if chain_of[e.source_id] != chain_of[e.target_id]]
    order = _topological_order(chains, cross, chain_of)
    vid_of_chain = {ci: VertexId(vid) for vid, ci in enumerate(order)}
    vid_of = {tid: vid_of_chain[ci] for tid, ci in chain_of.items()}
    edges = sorted(
        (_job_edge(e, vid_of, graph.nodes[e.target_id]) for e in cross), key=_input_order
    )
    vertices: list[JobVertex] = []
    for ci in order:
        chain, vid = chains[ci], vid_of_chain[ci]
        head = chain[0]
        if isinstance(head.transformation, SourceTransformation):
            bounded = head.transformation.bounded
        else:
            # Inputs have lower vertex ids, so their boundedness is already known.
            bounded = all(
                vertices[e.source_vertex].bounded for e in edges if e.target_vertex == vid
            )
        vertices.append(
            JobVertex(
                id=vid,
                name=" -> ".join(n.name for n in chain),
                parallelism=head.parallelism,
                max_parallelism=head.max_parallelism,
                operators=tuple(_operator_node(n, positions[n.id]) for n in chain),
                is_source=head.is_source,
                bounded=bounded,
            )
        )
    job = JobGraph(job_name, tuple(vertices), tuple(edges))
    _check_unique_uids(job)
    return job


def auto_uid(t: Transformation, position: int) -> str:
    """The uid of an operator the user did not name: ``f"{slug(name)}-{position}"``.

    ``position`` is the transformation's place in its job (``job_positions``): stable across
    runs because it follows the order of the job's own API calls.

    >>> auto_uid(SourceTransformation("Source: Kafka orders", []), 7)
    'source-kafka-orders-7'
    """
    slug = re.sub(r"[^a-z0-9]+", "-", t.name.lower()).strip("-") or "operator"
    return f"{slug}-{position}"


def _operator_node(node: StreamNode, position: int) -> OperatorNode:
    t = node.transformation
    if t.uid is not None and not t.uid.strip():
        raise JobGraphError(f"Operator {t.name!r} (id {t.id}) has an empty uid")
    uid = OperatorUid(t.uid if t.uid is not None else auto_uid(t, position))
    strategy = None
    if isinstance(t, SourceTransformation):
        kind = "source_function" if _is_source_function(t.source) else "source"
        spec, source, strategy = None, t.source, t.watermark_strategy
    else:
        spec, source = t.operator, None
        assert spec is not None  # build_stream_graph rejects operators without a spec
        kind = spec.kind.value
    return OperatorNode(
        uid=uid,
        name=t.name,
        transformation_id=t.id,
        kind=kind,
        spec=spec,
        source=source,
        parallelism=node.parallelism,
        max_parallelism=node.max_parallelism,
        keyed=spec is not None and spec.key_selector is not None,
        watermark_strategy=strategy,
    )


def _is_source_function(source: Any) -> bool:
    """Legacy ``SourceFunction``: the task calls ``run(ctx)`` and stops it with ``cancel()``."""
    return callable(getattr(source, "run", None)) and callable(getattr(source, "cancel", None))


def _topological_order(
    chains: Sequence[tuple[StreamNode, ...]], cross: Sequence[StreamEdge], chain_of: dict[int, int]
) -> list[int]:
    """Chain indexes in Kahn order; among ready chains, sources first, then lowest head id."""
    indegree = [0] * len(chains)
    consumers: list[list[int]] = [[] for _ in chains]
    for e in cross:
        indegree[chain_of[e.target_id]] += 1
        consumers[chain_of[e.source_id]].append(chain_of[e.target_id])
    ready = [(_rank(chains[ci]), ci) for ci in range(len(chains)) if indegree[ci] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, ci = heapq.heappop(ready)
        order.append(ci)
        for consumer in consumers[ci]:
            indegree[consumer] -= 1
            if indegree[consumer] == 0:
                heapq.heappush(ready, (_rank(chains[consumer]), consumer))
    if len(order) != len(chains):
        raise JobGraphError("The plan contains a cycle; streaming jobs must be acyclic")
    return order


def _rank(chain: tuple[StreamNode, ...]) -> tuple[int, int]:
    return (0 if chain[0].is_source else 1, chain[0].id)


def _job_edge(e: StreamEdge, vid_of: dict[int, VertexId], target: StreamNode) -> JobEdge:
    return JobEdge(
        source_vertex=vid_of[e.source_id],
        target_vertex=vid_of[e.target_id],
        partition=e.partition,
        key_selector=e.key_selector,
        target_max_parallelism=target.max_parallelism,
        input_index=e.input_index,
        output_tag=e.output_tag,
        input_side=e.input_side,
    )


def _input_order(e: JobEdge) -> tuple[int, int]:
    return (e.target_vertex, e.input_index)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '\\"') + '"'


def _check_unique_uids(job: JobGraph) -> None:
    owners: dict[str, OperatorNode] = {}
    for v in job.vertices:
        for op in v.operators:
            other = owners.setdefault(op.uid, op)
            if other is not op:
                raise JobGraphError(
                    f"Duplicate operator uid {op.uid!r}: used by {other.name!r} "
                    f"(id {other.transformation_id}) and {op.name!r} (id {op.transformation_id})"
                )
