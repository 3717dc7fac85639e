"""The BATCH plan as pure functions: stages and exchanges of a job graph, the routes, and
the blocks that make a keyed head read its input key by key."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from cairn.batch.exchange import BlockWriter, read_blocks
from cairn.batch.plan import (
    BatchModeError,
    EdgeRouter,
    StageInput,
    key_token,
    plan_batch,
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
from cairn.runtime.eventtime.stamped import stamp
from cairn.state.key_groups import key_group_range_for_subtask
from tests.unit.batch_jobs import Endless, environment, word_count


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
    assert broadcast.targets("r", 0) == list(range(head.parallelism))  # to every one
    writer = BlockWriter([(1, keyed), (1, broadcast)], vertex=0, partition=0)
    writer.output(None)([("a", 1)])
    blocks = {}
    for _, part, key, payload in writer.take(final=True):
        blocks.setdefault(part, []).append((key, payload))
    for part in blocks:
        read = [is_key for is_key, _ in read_blocks(sorted(blocks[part]))]
        assert read[0] is False  # the rule, before any key


def test_an_unbounded_source_has_no_plan() -> None:
    env = environment("BATCH")
    env.add_source(Endless()).name("endless").print()
    with pytest.raises(BatchModeError, match="unbounded: 'endless'"):
        plan_batch(_graph(env))


def _edge(kind: PartitionKind, selector: Any = None) -> StageInput:
    edge = JobEdge(VertexId(0), VertexId(1), kind, selector, 128, 0)
    return StageInput(edge, producer_parallelism=2, keyed=kind is PartitionKind.HASH)


def _blocks_of(writers: list[BlockWriter]) -> dict[int, list[Any]]:
    """Each consumer partition's blocks, in the order its reader takes them."""
    blocks: dict[int, list[Any]] = {}
    for writer in writers:
        for _, part, key, payload in writer.take(final=True):
            blocks.setdefault(part, []).append((key, payload))
    return {part: sorted(b, key=lambda kb: kb[0]) for part, b in blocks.items()}


def test_hash_routes_land_where_the_consumer_owns_the_key_group() -> None:
    router = EdgeRouter(_edge(PartitionKind.HASH, lambda r: r[0]), 3, producer=1)
    writer = BlockWriter([(1, router)], vertex=0, partition=1)
    writer.output(None)([(f"user-{i}", 0) for i in range(200)])
    for target, blocks in _blocks_of([writer]).items():
        for key, _ in blocks:
            assert key[1] in key_group_range_for_subtask(128, 3, target)
            assert router.targets((f"user-{key[1]}", 0), 0)[0] in range(3)


@pytest.mark.parametrize("stamped", [True, False])
def test_keyed_blocks_give_each_key_one_run_in_time_order(stamped: bool) -> None:
    routers = [EdgeRouter(_edge(PartitionKind.HASH, lambda r: r[0]), 1, p) for p in (0, 1)]
    writers = [BlockWriter([(1, r)], vertex=0, partition=p) for p, r in enumerate(routers)]
    keys = ("b", 2, ("t", 1), "a", 2.5, None)
    for t in (30, 10, 20):  # two producers, each emitting batches out of time order
        for writer in writers:
            records = [(k, t) for k in keys]
            writer.output(None)(stamp(records, [t] * len(records)) if stamped else records)
    (blocks,) = _blocks_of(writers).values()
    runs = [chunks for is_key, chunks in read_blocks(blocks) if is_key]
    assert len(runs) == len(keys)  # no TypeError: keys of different types still sort
    for chunks in runs:
        records = [r for _, part, _ in chunks for r in part]
        assert len({r[0] for r in records}) == 1
        times = [r[1] for r in records]
        # Without timestamps each producer's order is kept, producer after producer.
        assert times == ([10, 10, 20, 20, 30, 30] if stamped else [30, 10, 20, 30, 10, 20])


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
    routes = [target for seq in range(6) for target in router.targets("x", seq)]
    assert Counter(routes) == expected
    outs = []
    writer = BlockWriter([(1, router)], vertex=0, partition=1)
    for batch in ([1, 2], [3], [4, 5, 6]):
        writer.output(None)(batch)
        outs.extend(writer.take(final=True))  # a block per batch: the order across blocks
    by_part: dict[int, list[Any]] = {}
    for _, part, key, payload in outs:
        by_part.setdefault(part, []).append((key, payload))
    for part, blocks in by_part.items():
        read = [r for _, chunks in read_blocks(sorted(blocks)) for _, rs, _ in chunks for r in rs]
        assert read == sorted(read) and len(read) == expected[part]  # the producer's order


def test_key_tokens_are_equal_for_equal_keys_and_totally_ordered() -> None:
    assert key_token(("a", 1)) == key_token(("a", 1))
    assert key_token("a") != key_token(b"a")
    sorted([key_token(k) for k in ["x", 1, 2.0, b"y", None, ("t",), True]])


@pytest.mark.parametrize("kind", [PartitionKind.HASH, PartitionKind.REBALANCE])
def test_blocks_carry_each_record_where_targets_sends_it(kind: PartitionKind) -> None:
    router = EdgeRouter(_edge(kind, lambda r: r[0]), 3, producer=1)
    records = [(k, i) for i, k in enumerate(["a", 7, ("t", 1), "b", None])]
    stamps: list[int | None] = [5, None, 7, 8, 9]
    writer = BlockWriter([(4, router)], vertex=0, partition=1)
    writer.output(None)(stamp(records, stamps))
    arrived = {
        (part, r, ts)
        for part, blocks in _blocks_of([writer]).items()
        for _, chunks in read_blocks(blocks)
        for _, rs, ts_list in chunks
        for r, ts in zip(rs, ts_list or [None] * len(rs), strict=True)
    }
    expected = {
        (part, r, ts)
        for seq, (r, ts) in enumerate(zip(records, stamps, strict=True))
        for part in router.targets(r, seq)
    }
    assert arrived == expected


def test_a_block_plain_pickle_refuses_still_crosses_a_spark_exchange() -> None:
    from cairn.batch.spark import _blocks, _encode

    class Local:  # a class plain pickle cannot name (as one defined in __main__)
        def __init__(self, n: int) -> None:
            self.n = n

    payload = (0, {"a": [Local(1), Local(2)]}, {})
    ((key, (side, groups, _)),) = _blocks([((1, (9,)), _encode(payload))])
    assert key == (9,) and side == 0 and [r.n for r in groups["a"]] == [1, 2]
