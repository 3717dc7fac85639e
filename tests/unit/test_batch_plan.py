"""The BATCH plan as pure functions: stages and exchanges of a job graph, and the routes
and sort keys that make a keyed head read its input key by key."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from cairn.batch.plan import (
    KEYED,
    BatchModeError,
    EdgeRouter,
    StageInput,
    key_token,
    plan_batch,
    same_key,
)
from cairn.common import Types
from cairn.datastream import (
    KeyedBroadcastProcessFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.state import MapStateDescriptor
from cairn.graph.job_graph import JobEdge, JobGraph, build_job_graph
from cairn.graph.transformations import PartitionKind
from cairn.ids import VertexId
from cairn.state.key_groups import key_group_range_for_subtask
from tests.unit.batch_jobs import environment, word_count


def _graph(env: StreamExecutionEnvironment) -> JobGraph:
    prepared = env.prepare_job("plan")
    s = prepared.settings
    return build_job_graph("plan", prepared.sinks, s.parallelism, s.max_parallelism)


def test_word_count_stages_end_at_each_exchange() -> None:
    env = environment("BATCH")
    word_count(env).print()
    plan = plan_batch(_graph(env))
    # The collection is one subtask, the rest two: a rebalance, then a key_by.
    source, split, counting = plan.stages
    assert source.is_source and not source.inputs and source.parallelism == 1
    ((spread,),) = [split.inputs]
    assert spread.edge.partition is PartitionKind.REBALANCE and not spread.keyed
    assert counting.keyed_head and counting.terminal and not split.keyed_head
    (exchange,) = counting.inputs
    assert exchange.keyed and exchange.edge.partition is PartitionKind.HASH
    assert plan.consumers_of(split.vertex) == [counting.vertex]
    assert plan.describe().splitlines()[1:] == [
        '  stage v0 "Collection Source" parallelism=1 source',
        '  stage v1 "FlatMap" parallelism=2 <- v0 rebalance in order (exchange)',
        '  stage v2 "Reduce -> Print to Std. Out" parallelism=2 '
        "<- v1 hash sorted by key (exchange)",
    ]


class _Rules(KeyedBroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> list[Any]:
        return [value]

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        return None


def test_a_broadcast_input_is_not_sorted_by_key_and_comes_first() -> None:
    env = environment("BATCH")
    rules = env.from_collection(["r"]).broadcast(
        MapStateDescriptor("rules", Types.STRING(), Types.STRING())
    )
    env.from_collection([("a", 1)]).key_by(lambda e: e[0]).connect(rules).process(_Rules()).print()
    plan = plan_batch(_graph(env))
    head = next(s for s in plan.stages if s.keyed_head)
    by_kind = {i.edge.partition: i for i in head.inputs}
    assert by_kind[PartitionKind.HASH].keyed and not by_kind[PartitionKind.BROADCAST].keyed
    keyed = EdgeRouter(by_kind[PartitionKind.HASH], head.parallelism, producer=0)
    broadcast = EdgeRouter(by_kind[PartitionKind.BROADCAST], head.parallelism, producer=0)
    rule_routes = broadcast.routes("r", None, 0)
    assert sorted(p for p, _ in rule_routes) == list(range(head.parallelism))  # to every one
    ((_, record_key),) = keyed.routes(("a", 1), None, 0)
    assert all(rule_key < record_key for _, rule_key in rule_routes)


def test_an_unbounded_source_has_no_plan() -> None:
    from tests.unit.test_batch_mode import _Endless

    env = environment("BATCH")
    env.add_source(_Endless()).name("endless").print()
    with pytest.raises(BatchModeError, match="unbounded: 'endless'"):
        plan_batch(_graph(env))


def _edge(kind: PartitionKind, selector: Any = None) -> StageInput:
    edge = JobEdge(VertexId(0), VertexId(1), kind, selector, 128, 0)
    return StageInput(edge, producer_parallelism=2, keyed=kind is PartitionKind.HASH)


def test_hash_routes_land_where_the_consumer_owns_the_key_group() -> None:
    router = EdgeRouter(_edge(PartitionKind.HASH, lambda r: r[0]), 3, producer=1)
    for key in [f"user-{i}" for i in range(200)]:
        ((target, sort_key),) = router.routes((key, 0), 5, 0)
        assert sort_key[0] == KEYED and sort_key[1] in key_group_range_for_subtask(128, 3, target)


def test_sorted_keyed_routes_give_each_key_one_run_in_time_order() -> None:
    router = EdgeRouter(_edge(PartitionKind.HASH, lambda r: r[0]), 1, producer=0)
    records = [(k, t) for t in (30, 10, 20) for k in ("b", 2, ("t", 1), "a", 2.5, None)]
    entries = sorted(
        (router.routes(r, r[1], seq)[0][1], r) for seq, r in enumerate(records)
    )  # no TypeError: keys of different types still sort
    runs: list[list[Any]] = []
    for key, record in entries:
        if runs and same_key(runs[-1][0][0], key):
            runs[-1].append((key, record))
        else:
            runs.append([(key, record)])
    assert len(runs) == 6
    for run in runs:
        assert len({r[0] for _, r in run}) == 1
        assert [r[1] for _, r in run] == [10, 20, 30]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (PartitionKind.FORWARD, {1: 6}),
        (PartitionKind.GLOBAL, {0: 6}),
        (PartitionKind.REBALANCE, {0: 2, 1: 2, 2: 2}),
        (PartitionKind.BROADCAST, {0: 6, 1: 6, 2: 6}),
    ],
)
def test_unkeyed_routes_keep_each_producers_order(
    kind: PartitionKind, expected: dict[int, int]
) -> None:
    router = EdgeRouter(_edge(kind), 3 if kind is not PartitionKind.FORWARD else 2, producer=1)
    routes = [route for seq in range(6) for route in router.routes("x", None, seq)]
    assert Counter(p for p, _ in routes) == expected
    keys = [k for _, k in routes]
    assert sorted(keys) == sorted(keys, key=lambda k: k[-1])  # the producer's order


def test_key_tokens_are_equal_for_equal_keys_and_totally_ordered() -> None:
    assert key_token(("a", 1)) == key_token(("a", 1))
    assert key_token("a") != key_token(b"a")
    sorted([key_token(k) for k in ["x", 1, 2.0, b"y", None, ("t",), True]])


@pytest.mark.parametrize("kind", [PartitionKind.HASH, PartitionKind.REBALANCE])
def test_emitting_a_batch_routes_each_record_as_routes_does(kind: PartitionKind) -> None:
    router = EdgeRouter(_edge(kind, lambda r: r[0]), 3, producer=1)
    records = [(k, i) for i, k in enumerate(["a", 7, ("t", 1), "b", None])]
    stamps: list[int | None] = [5, None, 7, 8, 9]
    out: list[Any] = []
    router.emit_into(out, 4, records, stamps, 10)
    expected = [
        (4, part, key, 0, ts, r)
        for i, (r, ts) in enumerate(zip(records, stamps, strict=True))
        for part, key in router.routes(r, ts, 10 + i)
    ]
    assert out == expected
