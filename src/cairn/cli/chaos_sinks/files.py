"""``cairn chaos`` and ``FileSink``: the sink writes under the run's directory instead of its
base path; what it committed is its visible part files, read as lines.

Invariant: only committed data is read: visible files, never the hidden in-progress ones
(``.part-...``) nor markers (``_SUCCESS``); each record is stamped with its file's
modification time, when the commit made it visible.
"""

from __future__ import annotations

import copy
import os

from cairn.api.connectors import Sink
from cairn.cli.chaos_sinks import Place, Redirection
from cairn.cli.chaos_verdict import Record
from cairn.datastream.connectors.file_sink import FileSink

__all__ = ["file_records", "read_committed_files", "redirect"]


def redirect(sink: Sink, place: Place) -> Redirection | None:
    """A copy of a ``FileSink`` writing under ``place.directory``; None for other sinks."""
    if not isinstance(sink, FileSink):
        return None
    moved = copy.copy(sink)
    moved.base_path = place.directory
    return Redirection(moved, place.directory, lambda: read_committed_files(place.directory))


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
            records.extend(file_records(path, os.path.relpath(path, directory), 0))
    return records


def file_records(path: str, shown: str, skip_bytes: int) -> list[Record]:
    """The lines of ``path`` after its first ``skip_bytes``, shown as ``shown:<line>``."""
    with open(path, "rb") as f:
        f.seek(skip_bytes)
        data = f.read()
    at = os.path.getmtime(path)
    lines = data.decode("utf-8", errors="backslashreplace").splitlines()
    return [Record(line, at, f"{shown}:{n}") for n, line in enumerate(lines, 1)]
