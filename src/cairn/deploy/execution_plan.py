"""Execution plan: which worker runs which subtask, and the channels between subtasks.

Invariant: the plan is a pure function of (job graph, number of workers), so the driver and
every worker compute the same channel ids without exchanging them. Subtask ``i`` of every
vertex runs on worker ``i % num_workers`` (Flink's slot sharing: one slot hosts one subtask of
each vertex), which keeps forward channels local.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from cairn.checkpoint.messages import TaskKey
from cairn.graph.job_graph import JobEdge, JobGraph
from cairn.graph.transformations import PartitionKind
from cairn.ids import SubtaskIndex


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    channel_id: int
    edge: JobEdge
    source: TaskKey
    target: TaskKey


class ExecutionPlan:
    def __init__(self, graph: JobGraph, num_workers: int) -> None:
        if num_workers < 1:
            raise ValueError("num_workers must be >= 1")
        self.graph = graph
        self.num_workers = num_workers
        channels: list[ChannelSpec] = []
        for edge in graph.edges:
            src = graph.vertex(edge.source_vertex)
            dst = graph.vertex(edge.target_vertex)
            if edge.partition is PartitionKind.FORWARD:
                pairs = [(i, i) for i in range(src.parallelism)]
            else:
                pairs = [(i, j) for j in range(dst.parallelism) for i in range(src.parallelism)]
            for i, j in pairs:
                channels.append(
                    ChannelSpec(
                        len(channels),
                        edge,
                        TaskKey(src.id, SubtaskIndex(i)),
                        TaskKey(dst.id, SubtaskIndex(j)),
                    )
                )
        self.channels: tuple[ChannelSpec, ...] = tuple(channels)

    def worker_of(self, task: TaskKey) -> int:
        return task.subtask_index % self.num_workers

    @cached_property
    def all_tasks(self) -> tuple[TaskKey, ...]:
        return tuple(
            TaskKey(v.id, SubtaskIndex(i))
            for v in self.graph.vertices
            for i in range(v.parallelism)
        )

    @cached_property
    def source_tasks(self) -> tuple[TaskKey, ...]:
        return tuple(t for t in self.all_tasks if self.graph.vertex(t.vertex_id).is_source)

    def tasks_of(self, worker: int) -> list[TaskKey]:
        return [t for t in self.all_tasks if self.worker_of(t) == worker]

    def input_channels(self, task: TaskKey) -> list[ChannelSpec]:
        """The task's input gate, ordered by input edge, then by upstream subtask."""
        chans = [c for c in self.channels if c.target == task]
        chans.sort(key=lambda c: (c.edge.input_index, c.source.subtask_index))
        return chans

    def output_channels(self, task: TaskKey, edge: JobEdge) -> list[ChannelSpec]:
        """Channels of one output edge, indexed by downstream subtask."""
        chans = [c for c in self.channels if c.source == task and c.edge == edge]
        chans.sort(key=lambda c: c.target.subtask_index)
        return chans

    def peers_sending_to(self, worker: int) -> set[int]:
        return {
            self.worker_of(c.source)
            for c in self.channels
            if self.worker_of(c.target) == worker and self.worker_of(c.source) != worker
        }

    def peers_receiving_from(self, worker: int) -> set[int]:
        return {
            self.worker_of(c.target)
            for c in self.channels
            if self.worker_of(c.source) == worker and self.worker_of(c.target) != worker
        }
