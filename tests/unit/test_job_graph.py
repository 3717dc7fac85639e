"""Translation of the logical plan into chained job vertices and edges."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cairn.graph.chaining import JobGraphError
from cairn.graph.job_graph import JobGraph, build_job_graph
from cairn.graph.transformations import (
    OneInputTransformation,
    OperatorKind,
    OperatorSpec,
    PartitionKind,
    PartitionTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
)

FORWARD, REBALANCE, HASH = PartitionKind.FORWARD, PartitionKind.REBALANCE, PartitionKind.HASH


def key_of(record: Any) -> Any:
    return record[0]


class LegacySource:
    """A SourceFunction look-alike: the runtime drives it through run()/cancel()."""

    def run(self, ctx: Any) -> None: ...

    def cancel(self) -> None: ...


# Small builders standing in for the DataStream API.


def source(name: str = "src", bounded: bool = True, **kw: Any) -> SourceTransformation:
    return SourceTransformation(name, [], source=object(), bounded=bounded, **kw)


def op(
    name: str,
    upstream: Transformation,
    kind: OperatorKind = OperatorKind.MAP,
    key: Callable[[Any], Any] | None = None,
    options: dict[str, Any] | None = None,
    **kw: Any,
) -> OneInputTransformation:
    spec = OperatorSpec(kind, lambda x: x, key_selector=key, options=options or {})
    return OneInputTransformation(name, [upstream], operator=spec, **kw)


def sink(upstream: Transformation, name: str = "sink", **kw: Any) -> SinkTransformation:
    spec = OperatorSpec(OperatorKind.SINK_FUNCTION, print)
    return SinkTransformation(name, [upstream], operator=spec, **kw)


def partition(
    upstream: Transformation, kind: PartitionKind, key: Callable[[Any], Any] | None = None
) -> PartitionTransformation:
    return PartitionTransformation(kind.value, [upstream], partition=kind, key_selector=key)


def key_by(upstream: Transformation) -> PartitionTransformation:
    return partition(upstream, HASH, key_of)


def build(*sinks: SinkTransformation, parallelism: int = 2, max_par: int = 128) -> JobGraph:
    return build_job_graph("job", list(sinks), parallelism, max_par)


def names(graph: JobGraph) -> list[str]:
    return [v.name for v in graph.vertices]


# Chaining


def test_linear_pipeline_at_equal_parallelism_fuses_into_one_vertex() -> None:
    s = source("numbers")
    f = op("filter", op("map", s), OperatorKind.FILTER)
    graph = build(sink(f))

    assert names(graph) == ["numbers -> map -> filter -> sink"]
    (vertex,) = graph.vertices
    assert graph.edges == ()
    assert [o.kind for o in vertex.operators] == ["source", "map", "filter", "sink_function"]
    assert vertex.operators[0].source is s.source and vertex.operators[0].spec is None
    assert vertex.operators[1].spec is not None and vertex.operators[1].source is None
    assert (vertex.parallelism, vertex.max_parallelism, vertex.is_source) == (2, 128, True)


def test_key_by_breaks_the_chain_with_a_hash_edge_to_the_consumers_max_parallelism() -> None:
    parsed = op("parse", source())
    keyed = op("count", key_by(parsed), OperatorKind.KEYED_PROCESS, key=key_of, max_parallelism=256)
    graph = build(sink(keyed, max_parallelism=256))

    assert names(graph) == ["src -> parse", "count -> sink"]
    (edge,) = graph.edges
    assert (edge.source_vertex, edge.target_vertex, edge.partition) == (0, 1, HASH)
    assert edge.key_selector is key_of
    assert edge.target_max_parallelism == 256
    head = graph.vertex(1).operators[0]
    assert head.keyed and head.kind == "keyed_process"
    assert not graph.vertex(0).operators[1].keyed


def test_parallelism_change_without_partitioner_rebalances() -> None:
    m = op("map", source(), parallelism=3)
    graph = build(sink(m, parallelism=3))

    assert names(graph) == ["src", "map -> sink"]
    assert [(e.partition, e.key_selector) for e in graph.edges] == [(REBALANCE, None)]
    assert [v.parallelism for v in graph.vertices] == [2, 3]


def test_explicit_forward_with_different_parallelism_is_rejected() -> None:
    m = op("map", partition(source(), FORWARD), parallelism=3)
    with pytest.raises(JobGraphError, match="Forward partitioning does not allow change of"):
        build(sink(m, parallelism=3))


def test_explicit_forward_at_equal_parallelism_chains() -> None:
    graph = build(sink(op("map", partition(source(), FORWARD))))
    assert names(graph) == ["src -> map -> sink"]


@pytest.mark.parametrize(
    "kind",
    [
        PartitionKind.BROADCAST,
        PartitionKind.REBALANCE,
        PartitionKind.SHUFFLE,
        PartitionKind.GLOBAL,
        PartitionKind.RESCALE,
    ],
)
def test_explicit_partitioners_become_edges_and_break_chains(kind: PartitionKind) -> None:
    graph = build(sink(op("map", partition(source(), kind))))

    assert names(graph) == ["src", "map -> sink"]
    assert [(e.partition, e.key_selector, e.input_index) for e in graph.edges] == [(kind, None, 0)]


def test_union_of_two_sources_into_a_keyed_operator_gives_ordered_inputs() -> None:
    left, right = source("left"), source("right", bounded=False)
    union = UnionTransformation("union", [left, right])
    keyed = op("count", key_by(union), OperatorKind.KEYED_PROCESS, key=key_of)
    graph = build(sink(keyed))

    assert names(graph) == ["left", "right", "count -> sink"]
    inputs = graph.inputs_of(2)
    assert [(e.source_vertex, e.input_index) for e in inputs] == [(0, 0), (1, 1)]
    assert all(e.partition is HASH and e.key_selector is key_of for e in inputs)
    # An unbounded input makes the consumer unbounded.
    assert [v.bounded for v in graph.vertices] == [True, False, False]


def test_outermost_partitioner_wins_and_union_inputs_keep_their_own() -> None:
    a, b, c = source("a"), source("b"), source("c")
    shuffled = partition(a, PartitionKind.SHUFFLE)
    inner = UnionTransformation("inner", [shuffled, b])
    nested = key_by(partition(inner, PartitionKind.BROADCAST))
    outer = UnionTransformation("outer", [nested, partition(c, PartitionKind.GLOBAL)])
    graph = build(sink(op("merge", outer)))

    assert [(e.source_vertex, e.partition, e.input_index) for e in graph.inputs_of(3)] == [
        (0, HASH, 0),
        (1, HASH, 1),
        (2, PartitionKind.GLOBAL, 2),
    ]


def test_fork_to_two_sinks_stops_chaining_and_keeps_one_vertex_per_operator() -> None:
    m = op("map", source())
    graph = build(sink(m, "sink-a"), sink(m, "sink-b"))

    assert names(graph) == ["src -> map", "sink-a", "sink-b"]
    assert [(e.target_vertex, e.partition) for e in graph.outputs_of(0)] == [
        (1, FORWARD),
        (2, FORWARD),
    ]
    assert sum(o.name == "map" for v in graph.vertices for o in v.operators) == 1


def test_disable_chaining_isolates_the_operator() -> None:
    m = op("map", source(), options={"chaining": "never"})
    graph = build(sink(op("filter", m, OperatorKind.FILTER)))

    assert names(graph) == ["src", "map", "filter -> sink"]
    assert [e.partition for e in graph.edges] == [FORWARD, FORWARD]


def test_start_new_chain_lets_the_next_operator_chain_onto_it() -> None:
    f = op("filter", op("map", source()), OperatorKind.FILTER, options={"chaining": "head"})
    graph = build(sink(f))
    assert names(graph) == ["src -> map", "filter -> sink"]


def test_different_max_parallelism_does_not_chain() -> None:
    graph = build(sink(op("map", source(), max_parallelism=64)))
    assert names(graph) == ["src", "map", "sink"]
    assert [e.target_max_parallelism for e in graph.edges] == [64, 128]


def test_unknown_chaining_option_is_rejected() -> None:
    with pytest.raises(JobGraphError, match=r"'map'.*unknown 'chaining' option 'sometimes'"):
        build(sink(op("map", source(), options={"chaining": "sometimes"})))


# Parallelism and sources


@pytest.mark.parametrize(
    ("parallelism", "max_parallelism", "message"),
    [
        (0, None, "parallelism 0 must be between 1 and its max parallelism 128"),
        (200, None, "parallelism 200 must be between 1 and its max parallelism 128"),
        (2, 40000, "max parallelism 40000 must be between 1 and 32768"),
    ],
)
def test_invalid_parallelism_names_the_operator(
    parallelism: int, max_parallelism: int | None, message: str
) -> None:
    m = op("enrich", source(), parallelism=parallelism, max_parallelism=max_parallelism)
    with pytest.raises(JobGraphError, match=f"Operator 'enrich' \\(id {m.id}\\): {message}"):
        build(sink(m))


def test_source_function_kind_and_boundedness() -> None:
    legacy = SourceTransformation("legacy", [], source=LegacySource(), bounded=False)
    graph = build(sink(legacy))
    (vertex,) = graph.vertices
    assert vertex.operators[0].kind == "source_function"
    assert vertex.bounded is False


def test_plan_without_sinks_or_ending_in_a_virtual_node_is_rejected() -> None:
    with pytest.raises(JobGraphError, match="No operators defined"):
        build()
    with pytest.raises(JobGraphError, match="virtual"):
        build(partition(source(), REBALANCE))  # type: ignore[arg-type]


# Identity, order, description


def test_auto_uids_are_stable_across_runs_and_user_uids_are_kept() -> None:
    def script() -> list[str]:
        m = op("Map: parse JSON", source("Source: Kafka"))
        return build(sink(op("count", key_by(m), key=key_of, uid="counter"))).operator_uids()

    first = script()
    assert first == ["source-kafka-1", "map-parse-json-2", "counter", "sink-5"]
    assert script() == first


def test_duplicate_uids_are_rejected() -> None:
    m = op("map", source(uid="same"), uid="same")
    with pytest.raises(JobGraphError, match=r"Duplicate operator uid 'same'.*'src'.*'map'"):
        build(sink(m))


def test_vertices_are_topologically_sorted_with_sources_first() -> None:
    # Created in an order that a plain id sort would get wrong: the late source feeds a join.
    early = op("early", source("a"), parallelism=1)
    late_source = source("b")
    joined = op("join", key_by(UnionTransformation("u", [early, late_source])), key=key_of)
    graph = build(sink(joined))

    assert names(graph) == ["a", "b", "early", "join -> sink"]
    assert [v.id for v in graph.vertices] == [0, 1, 2, 3]
    assert all(e.source_vertex < e.target_vertex for e in graph.edges)
    assert graph.operator_uids() == ["a-1", "b-3", "early-2", "join-6", "sink-7"]
    with pytest.raises(KeyError, match="no vertex 4"):
        graph.vertex(4)


def test_describe_lists_vertices_with_parallelism_and_edges() -> None:
    keyed = op("count", key_by(source("words")), key=key_of, parallelism=4)
    graph = build(sink(keyed, parallelism=1))

    assert graph.describe() == (
        "Job 'job': 3 vertices, 2 edges\n"
        '  v0 "words" parallelism=2 max_parallelism=128 source bounded -> v1 hash\n'
        '  v1 "count" parallelism=4 max_parallelism=128 <- v0 hash -> v2 rebalance\n'
        '  v2 "sink" parallelism=1 max_parallelism=128 <- v1 rebalance'
    )


def test_global_chaining_switch_puts_every_operator_in_its_own_vertex() -> None:
    src = SourceTransformation("src", [], source=object())
    m = OneInputTransformation("m", [src], operator=OperatorSpec(OperatorKind.MAP, None))
    sink = SinkTransformation("out", [m], operator=OperatorSpec(OperatorKind.SINK, None))
    assert len(build_job_graph("j", [sink], 2, 128).vertices) == 1
    graph = build_job_graph("j", [sink], 2, 128, chaining_enabled=False)
    assert [v.name for v in graph.vertices] == ["src", "m", "out"]
    assert all(e.partition is PartitionKind.FORWARD for e in graph.edges)
