"""The execution plan: subtasks on workers, channels between subtasks, local or remote.

The job: a non-parallel source, rebalanced to a map, a forward edge to a second map (chaining
off, so the forward edge is a real channel), a hash edge to a keyed map, forward to the sink::

    v0 source (1) -rebalance-> v1 map (p) -forward-> v2 map (p) -hash-> v3 map (p) -> v4 sink
"""

from __future__ import annotations

import pytest

from cairn.checkpoint.messages import TaskKey
from cairn.datastream import StreamExecutionEnvironment
from cairn.deploy.execution_plan import ChannelSpec, ExecutionPlan
from cairn.graph.job_graph import JobGraph, build_job_graph
from cairn.graph.transformations import PartitionKind
from cairn.ids import SubtaskIndex, VertexId

FORWARD, REBALANCE, HASH = PartitionKind.FORWARD, PartitionKind.REBALANCE, PartitionKind.HASH


def job_graph(parallelism: int) -> JobGraph:
    env = StreamExecutionEnvironment({"pipeline.operator-chaining.enabled": "false"})
    env.set_parallelism(parallelism)
    (
        env.from_collection(list(range(10)))
        .map(lambda x: x)
        .map(lambda x: x + 1)
        .key_by(lambda x: x % 3)
        .map(lambda x: x)
        .print()
    )
    prepared = env.prepare_job()
    s = prepared.settings
    return build_job_graph(
        s.job_name, prepared.sinks, s.parallelism, s.max_parallelism, s.operator_chaining
    )


def key(vertex: int, subtask: int) -> TaskKey:
    return TaskKey(VertexId(vertex), SubtaskIndex(subtask))


def is_remote(plan: ExecutionPlan, channel: ChannelSpec) -> bool:
    return plan.worker_of(channel.source) != plan.worker_of(channel.target)


def edge_kinds(plan: ExecutionPlan) -> list[tuple[int, int, PartitionKind]]:
    return [(e.source_vertex, e.target_vertex, e.partition) for e in plan.graph.edges]


def test_the_job_has_the_edges_this_module_is_about() -> None:
    plan = ExecutionPlan(job_graph(2), 2)
    assert edge_kinds(plan) == [(0, 1, REBALANCE), (1, 2, FORWARD), (2, 3, HASH), (3, 4, FORWARD)]
    assert [v.parallelism for v in plan.graph.vertices] == [1, 2, 2, 2, 2]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_subtask_i_of_every_vertex_runs_on_worker_i_mod_w(workers: int) -> None:
    plan = ExecutionPlan(job_graph(3), workers)
    for task in plan.all_tasks:
        assert plan.worker_of(task) == task.subtask_index % workers
    hosted = [plan.tasks_of(w) for w in range(workers)]
    assert sorted(t for tasks in hosted for t in tasks) == sorted(plan.all_tasks)
    assert plan.source_tasks == (key(0, 0),)


def test_two_workers_at_parallelism_three() -> None:
    plan = ExecutionPlan(job_graph(3), 2)
    assert plan.tasks_of(0) == [key(0, 0)] + [key(v, s) for v in (1, 2, 3, 4) for s in (0, 2)]
    assert plan.tasks_of(1) == [key(v, 1) for v in (1, 2, 3, 4)]
    assert len(plan.all_tasks) == 1 + 4 * 3


@pytest.mark.parametrize(("parallelism", "workers"), [(2, 1), (2, 2), (3, 2), (4, 3)])
def test_channels_per_edge_and_which_are_remote(parallelism: int, workers: int) -> None:
    plan = ExecutionPlan(job_graph(parallelism), workers)
    by_edge: dict[tuple[int, int], list[ChannelSpec]] = {}
    for c in plan.channels:
        by_edge.setdefault((c.edge.source_vertex, c.edge.target_vertex), []).append(c)
    p = parallelism
    # Forward: subtask i to subtask i, on the same worker by construction: always local.
    for edge in ((1, 2), (3, 4)):
        assert [(c.source.subtask_index, c.target.subtask_index) for c in by_edge[edge]] == [
            (i, i) for i in range(p)
        ]
        assert not any(is_remote(plan, c) for c in by_edge[edge])
    # All-to-all edges: one channel per (upstream, downstream) pair; local iff same worker.
    assert len(by_edge[(0, 1)]) == p
    assert len(by_edge[(2, 3)]) == p * p
    for c in by_edge[(0, 1)] + by_edge[(2, 3)]:
        same = c.source.subtask_index % workers == c.target.subtask_index % workers
        assert is_remote(plan, c) is not same
    remote = sum(is_remote(plan, c) for c in plan.channels)
    assert (remote == 0) is (workers == 1)


def test_channel_ids_are_dense_and_the_same_on_every_worker() -> None:
    graph = job_graph(3)
    a, b = ExecutionPlan(graph, 2), ExecutionPlan(graph, 2)
    assert [c.channel_id for c in a.channels] == list(range(len(a.channels)))
    assert a.channels == b.channels


def test_input_gates_and_outputs_are_ordered_by_subtask() -> None:
    plan = ExecutionPlan(job_graph(3), 2)
    gate = plan.input_channels(key(3, 1))
    assert [c.source for c in gate] == [key(2, 0), key(2, 1), key(2, 2)]
    (hash_edge,) = plan.graph.outputs_of(VertexId(2))
    outputs = plan.output_channels(key(2, 1), hash_edge)
    assert [c.target for c in outputs] == [key(3, 0), key(3, 1), key(3, 2)]
    assert plan.input_channels(key(0, 0)) == []  # the source reads no channel


def test_peers_are_the_workers_at_the_other_end_of_remote_channels() -> None:
    one = ExecutionPlan(job_graph(2), 1)
    assert one.peers_sending_to(0) == one.peers_receiving_from(0) == set()
    plan = ExecutionPlan(job_graph(3), 3)
    for w in range(3):
        assert plan.peers_receiving_from(w) == {0, 1, 2} - {w}  # the hash edge: everyone
        assert plan.peers_sending_to(w) == {0, 1, 2} - {w}
    # Two workers at parallelism 1 downstream of the source: the hash edge is all local.
    narrow = ExecutionPlan(job_graph(1), 2)
    assert narrow.tasks_of(1) == []
    assert narrow.peers_sending_to(0) == narrow.peers_receiving_from(0) == set()


def test_a_plan_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        ExecutionPlan(job_graph(1), 0)
