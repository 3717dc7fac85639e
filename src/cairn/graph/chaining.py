"""Stream graph and operator chaining (Flink's ``StreamGraph`` and ``isChainable``).

Invariant: partition, union and side-output transformations are resolved away here, so every
``StreamEdge`` joins two physical transformations with a concrete partitioner (and the output
tag of a side output); an operator joins its producer's chain only when records can be handed
over by a plain call in the same task, so an operator with side outputs ends its chain.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.graph.transformations import (
    OneInputTransformation,
    PartitionKind,
    PartitionTransformation,
    SideOutputTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)

UPPER_BOUND_MAX_PARALLELISM = 1 << 15
"""Largest max parallelism (number of key groups) a job may use, as in Flink."""

CHAINING_OPTION = "chaining"
"""Key in ``OperatorSpec.options`` holding the operator's ``ChainingStrategy`` value."""


class JobGraphError(ValueError):
    """The logical plan cannot be turned into a job graph (invalid parallelism, partitioning...)."""


class ChainingStrategy(enum.Enum):
    """How an operator may share a task with its neighbours (PyFlink ``ChainingStrategy``).

    ``ds.disable_chaining()`` stores ``"never"``, ``ds.start_new_chain()`` stores ``"head"``.
    """

    ALWAYS = "always"  # chains with its producer and its consumer
    NEVER = "never"  # always a task of its own
    HEAD = "head"  # starts a new chain; its consumer may still chain onto it


@dataclass(frozen=True)
class StreamNode:
    """A physical transformation with its resolved parallelism."""

    transformation: SourceTransformation | OneInputTransformation
    parallelism: int
    max_parallelism: int
    chaining: ChainingStrategy

    @property
    def id(self) -> int:
        return self.transformation.id

    @property
    def name(self) -> str:
        return self.transformation.name

    @property
    def is_source(self) -> bool:
        return isinstance(self.transformation, SourceTransformation)


@dataclass(frozen=True)
class StreamEdge:
    """A channel between two physical transformations (ids are transformation ids)."""

    source_id: int
    target_id: int
    partition: PartitionKind
    key_selector: Callable[[Any], Any] | None
    input_index: int  # position among the target's input edges
    output_tag: str | None = None  # the side output this edge carries (None: main output)
    input_side: int = 0  # the logical input of a two-input target (0: first, 1: second)


@dataclass(frozen=True)
class StreamGraph:
    """Physical operators and the edges between them; ``nodes`` ordered by transformation id."""

    nodes: Mapping[int, StreamNode]
    edges: tuple[StreamEdge, ...]
    in_edges: Mapping[int, tuple[StreamEdge, ...]]
    out_edges: Mapping[int, tuple[StreamEdge, ...]]


# (partition kind, key selector) chosen by a PartitionTransformation; None: not chosen yet.
_Partitioning = tuple[PartitionKind, Callable[[Any], Any] | None]
# A physical producer, the partitioning towards the consumer, and the side output's tag.
_Input = tuple[Transformation, _Partitioning | None, str | None]
# The physical inputs of a consumer, each with its logical input (0, or 1 for two inputs).
_SidedInput = tuple[Transformation, _Partitioning | None, str | None, int]


def build_stream_graph(
    sinks: Sequence[Transformation],
    default_parallelism: int,
    default_max_parallelism: int,
) -> StreamGraph:
    """Walk the plan back from ``sinks`` and resolve virtual transformations into edges.

    A transformation reached from several consumers becomes one node with one out-edge per
    consuming input.

    >>> from cairn.graph.transformations import OperatorKind, OperatorSpec, SinkTransformation
    >>> src = SourceTransformation("numbers", [], source=object())
    >>> sink = SinkTransformation("out", [src], operator=OperatorSpec(OperatorKind.SINK, None))
    >>> [e.partition.value for e in build_stream_graph([sink], 1, 128).edges]
    ['forward']
    """
    if not sinks:
        raise JobGraphError("No operators defined in streaming topology. Cannot execute.")
    physical: dict[int, SourceTransformation | OneInputTransformation] = {}
    inputs: dict[int, list[_SidedInput]] = {}
    stack: list[Transformation] = list(reversed(sinks))
    while stack:
        t = stack.pop()
        seen = physical.get(t.id)
        if seen is not None:
            if seen is not t:
                raise JobGraphError(
                    f"Two transformations share id {t.id}: {seen.describe()} and {t.describe()}"
                )
            continue
        checked = _check_physical(t)
        physical[t.id] = checked
        inputs[t.id] = [] if isinstance(checked, SourceTransformation) else _resolve(checked)
        stack.extend(producer for producer, _, _, _ in reversed(inputs[t.id]))

    nodes = {
        tid: _stream_node(physical[tid], default_parallelism, default_max_parallelism)
        for tid in sorted(physical)
    }
    edges: list[StreamEdge] = []
    for tid, node in nodes.items():
        for index, (producer, partitioning, tag, side) in enumerate(inputs[tid]):
            edges.append(_edge(nodes[producer.id], node, partitioning, index, tag, side))
    in_edges = {tid: tuple(e for e in edges if e.target_id == tid) for tid in nodes}
    out_edges = {tid: tuple(e for e in edges if e.source_id == tid) for tid in nodes}
    return StreamGraph(nodes, tuple(edges), in_edges, out_edges)


def is_chainable(edge: StreamEdge, graph: StreamGraph) -> bool:
    """Whether the edge's target runs in the same task as its source (Flink ``isChainable``).

    Chains are linear: the target has this single input and the source this single consumer.
    A HASH edge is never chainable, so keyed operators after ``key_by`` always head a chain.
    """
    up = graph.nodes[edge.source_id]
    down = graph.nodes[edge.target_id]
    return (
        not down.is_source
        and len(graph.in_edges[down.id]) == 1
        and not isinstance(down.transformation, TwoInputTransformation)
        and len(graph.out_edges[up.id]) == 1
        and edge.partition is PartitionKind.FORWARD
        and edge.output_tag is None
        and up.parallelism == down.parallelism
        # One task has one key-group range, so its operators must agree on the key groups.
        and up.max_parallelism == down.max_parallelism
        and up.chaining is not ChainingStrategy.NEVER
        and down.chaining is ChainingStrategy.ALWAYS
    )


def build_chains(graph: StreamGraph, chaining_enabled: bool = True) -> list[tuple[StreamNode, ...]]:
    """Group the nodes into chains (head first), ordered by head transformation id.

    ``chaining_enabled=False`` (``pipeline.operator-chaining.enabled: false``) puts every
    operator in a task of its own.
    """
    parent_of = {
        e.target_id: e.source_id for e in graph.edges if chaining_enabled and is_chainable(e, graph)
    }
    child_of = {parent: child for child, parent in parent_of.items()}
    chains: list[tuple[StreamNode, ...]] = []
    for tid, node in graph.nodes.items():
        if tid in parent_of:
            continue
        chain = [node]
        while chain[-1].id in child_of:
            chain.append(graph.nodes[child_of[chain[-1].id]])
        chains.append(tuple(chain))
    if sum(len(c) for c in chains) != len(graph.nodes):
        raise JobGraphError("The plan contains a cycle; streaming jobs must be acyclic")
    return chains


def chaining_strategy(t: Transformation) -> ChainingStrategy:
    """The strategy set in the operator's options (sources always chain with their consumer)."""
    spec = t.operator if isinstance(t, OneInputTransformation) else None
    if spec is None:
        return ChainingStrategy.ALWAYS
    raw = spec.options.get(CHAINING_OPTION, ChainingStrategy.ALWAYS)
    try:
        return ChainingStrategy(raw.lower() if isinstance(raw, str) else raw)
    except ValueError:
        allowed = ", ".join(repr(s.value) for s in ChainingStrategy)
        raise JobGraphError(
            f"Operator {t.name!r} (id {t.id}): unknown {CHAINING_OPTION!r} option {raw!r}; "
            f"expected one of {allowed}"
        ) from None


def _check_physical(t: Transformation) -> SourceTransformation | OneInputTransformation:
    if isinstance(t, SourceTransformation):
        if t.inputs:
            raise JobGraphError(f"Source {t.name!r} (id {t.id}) must not have inputs")
        if t.source is None:
            raise JobGraphError(f"Source {t.name!r} (id {t.id}) has no source object")
        return t
    if isinstance(t, OneInputTransformation):
        if t.operator is None:
            raise JobGraphError(f"Operator {t.name!r} (id {t.id}) has no operator spec")
        if not t.inputs:
            raise JobGraphError(f"Operator {t.name!r} (id {t.id}) has no input")
        return t
    if isinstance(t, PartitionTransformation | UnionTransformation | SideOutputTransformation):
        raise JobGraphError(f"{t.describe()} is virtual and cannot end a job; add a sink")
    raise JobGraphError(f"Unsupported transformation {t.describe()}")


def _resolve(t: OneInputTransformation) -> list[_SidedInput]:
    """The physical producers feeding ``t``, in input order, with the partitioning chosen and
    the logical input each feeds (a two-input operator's second input is side 1)."""
    if isinstance(t, TwoInputTransformation) and len(t.inputs) != 2:
        raise JobGraphError(f"{t.describe()} must have exactly two inputs, has {len(t.inputs)}")
    two = isinstance(t, TwoInputTransformation)
    return [
        (producer, partitioning, tag, side if two else 0)
        for side, i in enumerate(t.inputs)
        for producer, partitioning, tag in _resolve_virtual(i, None, frozenset(), None)
    ]


def _resolve_virtual(
    t: Transformation,
    partitioning: _Partitioning | None,
    path: frozenset[int],
    tag: str | None,
) -> Iterator[_Input]:
    virtual = PartitionTransformation | UnionTransformation | SideOutputTransformation
    if not isinstance(t, virtual):
        yield t, partitioning, tag
        return
    if t.id in path:
        raise JobGraphError(f"The plan contains a cycle through {t.describe()}")
    path = path | {t.id}
    if isinstance(t, UnionTransformation):
        if not t.inputs:
            raise JobGraphError(f"{t.describe()} has no inputs")
        for i in t.inputs:
            yield from _resolve_virtual(i, partitioning, path, tag)
        return
    if isinstance(t, SideOutputTransformation):
        producer = t.inputs[0] if len(t.inputs) == 1 else None
        if producer is None or not isinstance(producer, OneInputTransformation) or tag:
            raise JobGraphError(
                f"{t.describe()} must read the side output of one operator (call "
                "get_side_output() on the result of process())"
            )
        yield from _resolve_virtual(producer, partitioning, path, t.tag_id)
        return
    if len(t.inputs) != 1:
        raise JobGraphError(f"{t.describe()} must have exactly one input, has {len(t.inputs)}")
    keyed = t.partition in (PartitionKind.HASH, PartitionKind.CUSTOM)
    if keyed and t.key_selector is None:
        raise JobGraphError(f"{t.describe()} partitions by key but has no key selector")
    # Walking from the consumer outwards: the partitioning closest to the consumer wins.
    if partitioning is None:
        key = t.key_selector if keyed else None
        partitioning = (t.partition, key)
    yield from _resolve_virtual(t.inputs[0], partitioning, path, tag)


def _stream_node(
    t: SourceTransformation | OneInputTransformation,
    default_parallelism: int,
    default_max_parallelism: int,
) -> StreamNode:
    parallelism = default_parallelism if t.parallelism is None else t.parallelism
    max_par = default_max_parallelism if t.max_parallelism is None else t.max_parallelism
    if not 1 <= max_par <= UPPER_BOUND_MAX_PARALLELISM:
        raise JobGraphError(
            f"Operator {t.name!r} (id {t.id}): max parallelism {max_par} must be between 1 "
            f"and {UPPER_BOUND_MAX_PARALLELISM}"
        )
    if not 1 <= parallelism <= max_par:
        raise JobGraphError(
            f"Operator {t.name!r} (id {t.id}): parallelism {parallelism} must be between 1 "
            f"and its max parallelism {max_par} (raise it with set_max_parallelism)"
        )
    return StreamNode(t, parallelism, max_par, chaining_strategy(t))


def _edge(
    up: StreamNode,
    down: StreamNode,
    partitioning: _Partitioning | None,
    index: int,
    tag: str | None = None,
    side: int = 0,
) -> StreamEdge:
    if partitioning is None:
        # Flink's default: keep records local when the parallelism allows it.
        same = up.parallelism == down.parallelism
        partitioning = (PartitionKind.FORWARD if same else PartitionKind.REBALANCE, None)
    kind, key = partitioning
    if kind is PartitionKind.FORWARD and up.parallelism != down.parallelism:
        raise JobGraphError(
            "Forward partitioning does not allow change of parallelism. "
            f"Upstream operation: {up.name}-{up.id} parallelism: {up.parallelism}, "
            f"downstream operation: {down.name}-{down.id} parallelism: {down.parallelism} "
            "You must use another partitioning strategy, such as broadcast, rebalance, "
            "shuffle or global."
        )
    return StreamEdge(up.id, down.id, kind, key, index, tag, side)
