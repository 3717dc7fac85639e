"""The event-time API: strategies on sources and streams, side-output tags and streams, and
what they become in the job graph."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cairn.common import Duration, Types, WatermarkStrategy
from cairn.common.configuration import Configuration
from cairn.datastream import (
    KeyedProcessFunction,
    OutputTag,
    ProcessFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.connectors.number_seq import NumberSequenceSource
from cairn.graph.job_graph import build_job_graph
from cairn.graph.transformations import OperatorKind, PartitionKind, SinkTransformation

TAG = OutputTag("odd", Types.INT())


class Echo(ProcessFunction[Any, Any]):
    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        yield value


class KeyedEcho(KeyedProcessFunction[Any, Any, Any]):
    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        yield value


def _env(**conf: str) -> StreamExecutionEnvironment:
    c = Configuration()
    for k, v in conf.items():
        c.set_string(k, v)
    return StreamExecutionEnvironment.get_execution_environment(c)


def _sinks(env: StreamExecutionEnvironment) -> list[SinkTransformation]:
    return list(env._sinks)


def test_output_tags_are_named_typed_values() -> None:
    assert OutputTag("odd") == TAG and hash(TAG) == hash(OutputTag("odd"))
    assert repr(OutputTag("x").type_info) == "PickledByteArrayTypeInfo"
    with pytest.raises(ValueError, match="empty"):
        OutputTag("")
    with pytest.raises(TypeError, match="type_info"):
        OutputTag("x", "int")  # type: ignore[arg-type]


def test_a_side_output_edge_carries_its_tag_and_ends_the_producers_chain() -> None:
    env = _env()
    env.set_parallelism(2)
    main = env.from_collection([1, 2, 3]).rebalance().process(Echo())
    main.get_side_output(TAG).map(lambda v: v).print()
    main.map(lambda v: v).print()
    graph = build_job_graph("side", _sinks(env), 2, 128)
    tagged = [e for e in graph.edges if e.output_tag is not None]
    assert [(e.output_tag, e.partition) for e in tagged] == [("odd", PartitionKind.FORWARD)]
    producer = graph.vertex(tagged[0].source_vertex)
    assert producer.operators[-1].kind == OperatorKind.PROCESS.value
    assert all(e.output_tag is None for e in graph.outputs_of(producer.id) if e is not tagged[0]), (
        "the main output is a plain edge"
    )


def test_a_side_output_read_alone_is_not_chained_either() -> None:
    env = _env()
    main = env.from_collection([1]).process(Echo())
    main.get_side_output(TAG).print()
    graph = build_job_graph("side", _sinks(env), 1, 128)
    assert len(graph.vertices) == 2 and graph.edges[0].output_tag == "odd"


def test_get_side_output_needs_a_process_result_and_a_tag() -> None:
    env = _env()
    with pytest.raises(TypeError, match="result of process"):
        env.from_collection([1]).map(lambda v: v).get_side_output(TAG)
    with pytest.raises(TypeError, match="needs an OutputTag"):
        env.from_collection([1]).process(Echo()).get_side_output("odd")  # type: ignore[arg-type]
    keyed = env.from_collection([1]).key_by(lambda v: v).process(KeyedEcho())
    assert keyed.get_side_output(TAG).get_type() == Types.INT()


def test_strategies_reach_the_source_operator_and_the_assigner_is_an_operator() -> None:
    env = _env(**{"pipeline.auto-watermark-interval": "50 ms"})
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2))
    ds = env.from_source(NumberSequenceSource(1, 10), strategy, "numbers")
    ds.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()).print()
    graph = build_job_graph("wm", _sinks(env), 1, 128)
    (vertex,) = graph.vertices
    source, assigner, _ = vertex.operators
    assert source.watermark_strategy is strategy
    assert assigner.kind == OperatorKind.TIMESTAMPS.value
    assert env.prepare_job("wm").settings.auto_watermark_interval_ms == 50
    with pytest.raises(TypeError, match="needs a WatermarkStrategy"):
        ds.assign_timestamps_and_watermarks(Duration.of_seconds(1))  # type: ignore[arg-type]
