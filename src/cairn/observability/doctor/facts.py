"""What the doctor's rules look at: checkpoint statistics, the checkpoint configuration, the
job graph's shape and the subtasks' backpressure, as plain values.

Invariant: :class:`DoctorFacts` is immutable and complete for the rules (a rule never reads
anything else); a fact the source cannot know (a retained checkpoint has no job graph and no
backpressure) is empty or ``None``, and rules that need it stay silent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus, SubtaskStats
from cairn.ids import CheckpointId, SubtaskIndex, VertexId

__all__ = [
    "CheckpointConfigFacts",
    "DoctorFacts",
    "VertexShape",
    "facts_from_json",
    "facts_to_json",
    "generated_uid",
]


@dataclass(frozen=True)
class CheckpointConfigFacts:
    """The job's checkpoint configuration (``backend``: ``hashmap`` or ``rocksdb``)."""

    interval_ms: int
    timeout_ms: int
    min_pause_ms: int
    unaligned: bool
    aligned_timeout_ms: int
    debloat: bool
    backend: str
    incremental: bool


@dataclass(frozen=True)
class VertexShape:
    """A job vertex: its parallelism and, per input edge, the partitioner and the upstream
    parallelism (alignment happens only where a subtask has several input channels)."""

    name: str
    parallelism: int
    inputs: tuple[tuple[str, int], ...] = ()  # (partitioner, upstream parallelism)

    @property
    def input_channels(self) -> int:
        """Channels of one subtask: forward edges give one, others one per upstream subtask.

        >>> VertexShape("sum", 2, (("hash", 2),)).input_channels
        2
        >>> VertexShape("map", 2, (("forward", 2),)).input_channels
        1
        """
        return sum(1 if p == "forward" else n for p, n in self.inputs)


@dataclass(frozen=True)
class DoctorFacts:
    """``checkpoints``: newest first (completed, failed and savepoints); ``vertex_names``:
    vertex id → name (to name subtasks); ``backpressure``: subtask name → backpressured
    share of time in [0, 1] (empty: not known)."""

    checkpoints: tuple[CheckpointStats, ...]
    config: CheckpointConfigFacts | None = None
    vertices: tuple[VertexShape, ...] = ()
    vertex_names: Mapping[int, str] = field(default_factory=dict)
    stateful_without_uid: tuple[str, ...] = ()
    backpressure: Mapping[str, float] = field(default_factory=dict)


def generated_uid(name: str, uid: str) -> bool:
    """Whether ``uid`` is the one Cairn generates for an operator without ``uid()``
    (``<name>-<n>``).

    >>> generated_uid("sum", "sum-3"), generated_uid("sum", "running-sum")
    (True, False)
    """
    return re.fullmatch(re.escape(name) + r"-\d+", uid) is not None


def facts_to_json(facts: DoctorFacts) -> dict[str, Any]:
    """A JSON-ready record of ``facts`` (to keep a run's statistics and replay the rules on
    them: ``facts_from_json(facts_to_json(f)) == f``)."""
    return {
        "checkpoints": [
            {
                "id": int(c.checkpoint_id),
                "savepoint": c.is_savepoint,
                "status": c.status.value,
                "trigger_ms": c.trigger_ms,
                "end_ms": c.end_ms,
                "num_subtasks": c.num_subtasks,
                "failure_reason": c.failure_reason,
                "subtasks": [
                    [int(s.task.vertex_id), int(s.task.subtask_index), s.ack_ms, asdict(s.metrics)]
                    for s in c.subtask_details()
                ],
            }
            for c in facts.checkpoints
        ],
        "config": None if facts.config is None else asdict(facts.config),
        "vertices": [[v.name, v.parallelism, [list(i) for i in v.inputs]] for v in facts.vertices],
        "vertex_names": {str(k): v for k, v in facts.vertex_names.items()},
        "stateful_without_uid": list(facts.stateful_without_uid),
        "backpressure": dict(facts.backpressure),
    }


def facts_from_json(obj: Mapping[str, Any]) -> DoctorFacts:
    """The facts :func:`facts_to_json` recorded.

    >>> facts_from_json(facts_to_json(DoctorFacts(()))) == DoctorFacts(())
    True
    """
    checkpoints = []
    for c in obj["checkpoints"]:
        subtasks = {}
        for vertex, index, ack_ms, metrics in c["subtasks"]:
            key = TaskKey(VertexId(vertex), SubtaskIndex(index))
            subtasks[key] = SubtaskStats(key, ack_ms, SubtaskCheckpointMetrics(**metrics))
        checkpoints.append(
            CheckpointStats(
                CheckpointId(c["id"]),
                c["savepoint"],
                CheckpointStatus(c["status"]),
                c["trigger_ms"],
                c["num_subtasks"],
                subtasks,
                end_ms=c["end_ms"],
                failure_reason=c["failure_reason"],
            )
        )
    config = obj.get("config")
    return DoctorFacts(
        checkpoints=tuple(checkpoints),
        config=None if config is None else CheckpointConfigFacts(**config),
        vertices=tuple(
            VertexShape(n, p, tuple((part, up) for part, up in inputs))
            for n, p, inputs in obj.get("vertices", [])
        ),
        vertex_names={int(k): v for k, v in obj.get("vertex_names", {}).items()},
        stateful_without_uid=tuple(obj.get("stateful_without_uid", [])),
        backpressure=dict(obj.get("backpressure", {})),
    )
