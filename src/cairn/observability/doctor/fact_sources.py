"""Where the doctor's facts come from: a running job's master (statistics, settings, graph,
backpressure) or a directory of retained checkpoints (their statistics and the checkpoint
configuration each ``_metadata`` keeps under Flink's keys).

Invariant: this module only gathers facts (reads); every judgement is in ``rules.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cairn.observability.doctor.facts import (
    CheckpointConfigFacts,
    DoctorFacts,
    VertexShape,
    generated_uid,
)
from cairn.observability.metrics import all_subtask_metrics

if TYPE_CHECKING:
    from cairn.deploy.job_master_ports import ObservedJob
    from cairn.observability.tables import RetainedCheckpoint

__all__ = ["config_from_properties", "facts_of_master", "facts_of_retained"]


def config_from_properties(props: Mapping[str, str]) -> CheckpointConfigFacts | None:
    """The configuration a checkpoint's ``_metadata`` keeps (``None``: written by a Cairn
    that did not keep it).

    >>> from cairn.settings import JobSettings
    >>> config_from_properties(JobSettings("j", 1).checkpoint_properties()).backend
    'hashmap'
    >>> config_from_properties({}) is None
    True
    """
    cp = "execution.checkpointing."
    try:
        return CheckpointConfigFacts(
            interval_ms=int(props[cp + "interval"]),
            timeout_ms=int(props[cp + "timeout"]),
            min_pause_ms=int(props[cp + "min-pause"]),
            unaligned=props[cp + "unaligned.enabled"] == "true",
            aligned_timeout_ms=int(props[cp + "aligned-checkpoint-timeout"]),
            debloat=props["taskmanager.network.memory.buffer-debloat.enabled"] == "true",
            backend=props["state.backend.type"],
            incremental=props[cp + "incremental"] == "true",
        )
    except (KeyError, ValueError):
        return None


def facts_of_master(master: ObservedJob) -> DoctorFacts:
    """Facts of a running (or just finished) job."""
    settings, graph, view = master.settings, master.graph, master.view
    stats = None if view.checkpoint_stats is None else view.checkpoint_stats.snapshot()
    names = {int(v.id): v.name for v in graph.vertices}
    shapes = tuple(
        VertexShape(
            v.name,
            v.parallelism,
            tuple(
                (e.partition.value, graph.vertex(e.source_vertex).parallelism)
                for e in graph.inputs_of(v.id)
            ),
        )
        for v in graph.vertices
    )
    stateful = tuple(
        n.name
        for v in graph.vertices
        for n in v.operators
        if n.keyed and generated_uid(n.name, n.uid)
    )
    previous, current = view.metric_reports
    backpressure = {
        f"{names.get(int(k.vertex_id), k.vertex_id)} ({k.subtask_index + 1})": (
            m.backPressuredTimeMsPerSecond / 1000.0
        )
        for k, m in all_subtask_metrics(current, previous).items()
    }
    return DoctorFacts(
        checkpoints=stats.history if stats is not None else (),
        config=config_from_properties(settings.checkpoint_properties()),
        vertices=shapes,
        vertex_names=names,
        stateful_without_uid=stateful,
        backpressure=backpressure,
    )


def facts_of_retained(retained: Sequence[RetainedCheckpoint]) -> DoctorFacts:
    """Facts of retained checkpoints (oldest first, as ``load_retained`` lists them): their
    statistics and the configuration of the newest that kept one."""
    stats: list[Any] = []
    config = None
    for r in retained:
        md = r.metadata
        if md is None:
            continue
        stats.append(md.to_checkpoint_stats(r.summary.path))
        config = config_from_properties(md.properties) or config
    return DoctorFacts(checkpoints=tuple(reversed(stats)), config=config)
