"""What a run of ``cairn chaos`` committed: each file sink pointed at a directory of the
run's own, its finished part files read back as records; paths the job writes itself
(``--compare``) read as what the run added to them.

Invariant: a run's outputs are named the same in every run of one job (the sink's uid, else
its name and position), so the runs compare output by output; only committed data is read
(visible part files, never hidden in-progress ones), and the user's own output locations
are never written by a chaos run (file sinks go to the run's directory instead).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from cairn.cli.chaos_verdict import Record
from cairn.datastream.connectors.file_sink import FileSink
from cairn.datastream.job_builder import PreparedJob
from cairn.graph.transformations import OperatorKind, SinkTransformation

__all__ = [
    "SinkOutput",
    "appended_records",
    "read_committed_files",
    "redirect_sinks",
    "snapshot",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class SinkOutput:
    """A sink of the job: its output's name, what it is, where this run's commits went
    (None: not compared, ``reason`` says why)."""

    name: str
    kind: str
    original: str | None = None
    directory: str | None = None
    reason: str | None = None


def _output_name(t: SinkTransformation, position: int) -> str:
    return f"{t.name} '{t.uid}'" if t.uid else f"{t.name} #{position}"


def redirect_sinks(prepared: PreparedJob, run_dir: str) -> tuple[PreparedJob, list[SinkOutput]]:
    """``prepared`` with each ``FileSink`` writing under ``run_dir`` instead of its base
    path (a copy of the sink; the user's object is unchanged), and what each sink is."""
    sinks: list[SinkTransformation] = []
    outputs: list[SinkOutput] = []
    for position, t in enumerate(prepared.sinks, 1):
        name = _output_name(t, position)
        sink = t.operator.function if t.operator is not None else None
        kind = type(sink).__name__
        if isinstance(sink, FileSink) and t.operator is not None:
            directory = os.path.join(run_dir, _UNSAFE.sub("_", t.uid or f"sink-{position}"))
            moved = copy.copy(sink)
            moved.base_path = directory
            sinks.append(replace(t, operator=replace(t.operator, function=moved)))
            outputs.append(SinkOutput(name, kind, sink.base_path, directory))
            continue
        sinks.append(t)
        outputs.append(SinkOutput(name, kind, reason=_why_not(t)))
    return replace(prepared, sinks=tuple(sinks)), outputs


def _why_not(t: SinkTransformation) -> str:
    if t.operator is not None and t.operator.kind is OperatorKind.COLLECT:
        return "collected results go to the script, not to storage"
    if t.operator is not None and t.operator.kind is OperatorKind.SINK_FUNCTION:
        return "a SinkFunction (print, add_sink) commits nothing; use a Sink with sink_to"
    return "cairn chaos reads the output of FileSinks and --compare paths only"


def read_committed_files(directory: str) -> list[Record]:
    """The records (lines) of the visible files under ``directory``: the committed part
    files of a ``FileSink``, each record stamped with its file's modification time."""
    records = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(files):
            if name.startswith((".", "_")):
                continue
            path = os.path.join(root, name)
            records.extend(_file_records(path, os.path.relpath(path, directory), 0))
    return records


def _file_records(path: str, shown: str, skip_bytes: int) -> list[Record]:
    with open(path, "rb") as f:
        f.seek(skip_bytes)
        data = f.read()
    at = os.path.getmtime(path)
    lines = data.decode("utf-8", errors="backslashreplace").splitlines()
    return [Record(line, at, f"{shown}:{n}") for n, line in enumerate(lines, 1)]


def snapshot(path: str) -> dict[str, int]:
    """The size of every file at ``path`` (a file or a directory tree), before a run."""
    if os.path.isfile(path):
        return {path: os.path.getsize(path)}
    sizes = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
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
        records.extend(_file_records(full, shown, old if old <= size else 0))
    return records
