"""Which sinks make output visible when a checkpoint completes.

Invariant: a sink is listed iff restoring a checkpoint older than one announced to it could
make it write output a second time (two-phase sinks, the collect sink); the job master's
fallback rule (``checkpoint.protocol.FallbackRule``) is built from this list.
"""

from __future__ import annotations

from cairn.api.connectors import commits_on_checkpoints
from cairn.graph.job_graph import JobGraph
from cairn.graph.transformations import OperatorKind

__all__ = ["committing_sinks"]


def committing_sinks(graph: JobGraph) -> tuple[str, ...]:
    """Uids of the sinks that make output visible when a checkpoint completes (two-phase
    sinks and the collect sink): restoring an older checkpoint would repeat their output."""
    return tuple(
        node.uid
        for v in graph.vertices
        for node in v.operators
        if node.kind == OperatorKind.COLLECT.value
        or (
            node.kind == OperatorKind.SINK.value
            and node.spec is not None
            and commits_on_checkpoints(node.spec.function)
        )
    )
