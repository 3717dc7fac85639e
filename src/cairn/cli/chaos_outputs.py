"""What a run of ``cairn chaos`` committed: each sink of a kind it reads pointed at a place
of the run's own (``chaos_sinks``: files, JDBC, Kafka, a user's ``Sink.redirected``), read
back as records; paths the job writes itself (``--compare``) read as what the run added.

Invariant: a run's outputs are named the same in every run of one job (the sink's uid, else
its name and position), so the runs compare output by output; only committed data is read,
and the user's own output locations are never written by a chaos run (a sink that cannot be
redirected is either run as it is because it commits nothing comparable — print, collect —
or listed as not compared; one that should be but cannot stops the run).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cairn.api.connectors import Sink, commits_on_checkpoints
from cairn.cli.chaos_sinks import (
    ChaosSinkError,
    Place,
    Redirect,
    Redirection,
    files,
    jdbc,
    kafka,
    own,
)
from cairn.cli.chaos_sinks.files import file_records
from cairn.cli.chaos_verdict import Record
from cairn.datastream.job_builder import PreparedJob
from cairn.graph.transformations import OperatorKind, SinkTransformation

__all__ = [
    "REDIRECTS",
    "SinkOutput",
    "appended_records",
    "redirect_sinks",
    "snapshot",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_UNSAFE_NAME = re.compile(r"[^a-z0-9_]")
REDIRECTS: tuple[Redirect, ...] = (files.redirect, jdbc.redirect, kafka.redirect, own.redirect)


@dataclass(frozen=True)
class SinkOutput:
    """A sink of the job: its output's name, what it is, where this run's commits went and
    how to read them (None: not compared, ``reason`` says why)."""

    name: str
    kind: str
    redirection: Redirection | None = None
    reason: str | None = None


def _output_name(t: SinkTransformation, position: int) -> str:
    return f"{t.name} '{t.uid}'" if t.uid else f"{t.name} #{position}"


def place_name(prefix: str, job: int, position: int) -> str:
    """The name of a sink's place: ``[a-z0-9_]`` only, as a schema or a topic suffix.

    >>> place_name("cairn_chaos_K2x-faults", 1, 2)
    'cairn_chaos_k2x_faults_j1_s2'
    """
    return _UNSAFE_NAME.sub("_", f"{prefix}_j{job}_s{position}".lower())


def redirect_sinks(
    prepared: PreparedJob,
    prefix: str,
    run_dir: str,
    job: int,
    known: Mapping[str, SinkOutput] | None = None,
) -> tuple[PreparedJob, list[SinkOutput]]:
    """``prepared`` with each sink of a kind ``REDIRECTS`` knows replaced by a copy that
    commits at a place of the run's own (the user's sink objects are unchanged), and what
    each sink is. ``known``: the outputs an earlier segment of the same run redirected (by
    name), reused as they are. Raises ``ChaosSinkError`` naming a sink that cannot be."""
    sinks: list[SinkTransformation] = []
    outputs: list[SinkOutput] = []
    for position, t in enumerate(prepared.sinks, 1):
        name = _output_name(t, position)
        sink = t.operator.function if t.operator is not None else None
        kind = type(sink).__name__
        earlier = (known or {}).get(name)
        redirection = earlier.redirection if earlier is not None else None
        if redirection is None and isinstance(sink, Sink) and t.operator is not None:
            directory = os.path.join(run_dir, _UNSAFE.sub("_", t.uid or f"sink-{position}"))
            place = Place(place_name(prefix, job, position), directory)
            try:
                redirection = _redirect(sink, place)
            except ChaosSinkError as error:
                raise ChaosSinkError(f"cannot redirect {name} ({kind}): {error}") from error
        if redirection is not None and t.operator is not None:
            operator = replace(t.operator, function=redirection.sink)
            sinks.append(replace(t, operator=operator))
            outputs.append(SinkOutput(name, kind, redirection))
            continue
        sinks.append(t)
        outputs.append(SinkOutput(name, kind, reason=_why_not(t)))
    return replace(prepared, sinks=tuple(sinks)), outputs


def _redirect(sink: Sink, place: Place) -> Redirection | None:
    for redirect in REDIRECTS:
        redirection = redirect(sink, place)
        if redirection is not None:
            return redirection
    return None


def _why_not(t: SinkTransformation) -> str:
    if t.operator is not None and t.operator.kind is OperatorKind.COLLECT:
        return "collected results go to the script, not to storage"
    if t.operator is not None and t.operator.kind is OperatorKind.SINK_FUNCTION:
        return "a SinkFunction (print, add_sink) commits nothing; use a Sink with sink_to"
    sink = t.operator.function if t.operator is not None else None
    if isinstance(sink, Sink) and commits_on_checkpoints(sink):
        return (
            "a two-phase Sink of its own: define Sink.redirected and "
            "Sink.committed_records to compare it (docs/chaos.md)"
        )
    return (
        "cairn chaos reads FileSink, JdbcSink, KafkaSink, a Sink with redirected and "
        "committed_records, and --compare paths"
    )


def snapshot(path: str) -> dict[str, int]:
    """The size of every file at ``path`` (a file or a directory tree), before a run."""
    if os.path.isfile(path):
        return {path: os.path.getsize(path)}
    sizes = {}
    for root, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            sizes[full] = os.path.getsize(full)
    return sizes


def appended_records(path: str, before: Mapping[str, int]) -> list[Record]:
    """The lines a run added at ``path``: whole new files, the appended tail of files that
    grew (a file that shrank counts as rewritten, whole)."""
    records = []
    for full, size in sorted(snapshot(path).items()):
        old = before.get(full, 0)
        shown = os.path.relpath(full, os.path.dirname(path.rstrip("/")) or ".")
        records.extend(file_records(full, shown, old if old <= size else 0))
    return records


def read_outputs(outputs: Sequence[SinkOutput]) -> dict[str, list[Record]]:
    """What each redirected output committed, read once the run ended; then its place is
    cleaned up (a run's tables and topics dropped; its files stay in the work directory)."""
    read: dict[str, list[Record]] = {}
    for output in outputs:
        if output.redirection is None:
            continue
        try:
            read[output.name] = output.redirection.read()
        finally:
            output.redirection.cleanup()
    return read
