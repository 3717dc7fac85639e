"""Plain-text tables of checkpoints: retained ones on storage, and a job's statistics.

Invariant: formatting only; the numbers come from ``checkpoint.storage`` and
``checkpoint.stats`` unchanged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(row.rstrip() for row in out)


def checkpoints_table(path: str) -> str:
    """``cairn checkpoints PATH``: retained checkpoints and savepoints under ``path``."""
    from cairn.checkpoint.storage import list_checkpoints

    summaries = list_checkpoints(path)
    if not summaries:
        return f"no checkpoints under {path}"
    rows = [
        (
            s.checkpoint_id if s.checkpoint_id is not None else "?",
            "savepoint" if s.is_savepoint else "checkpoint",
            _time(s.completed_ms),
            f"{s.duration_ms} ms" if s.duration_ms is not None else "-",
            _size(s.state_size),
            "ok" if s.ok else f"UNUSABLE: {s.error}",
            s.path,
        )
        for s in summaries
    ]
    return render(("id", "kind", "completed", "duration", "size", "status", "path"), rows)


def stats_table(snapshot: Any, limit: int = 20) -> str:
    """A job's checkpoint history (newest first) with Flink's columns."""
    rows = []
    for c in list(snapshot.history)[:limit]:
        subtasks = list(c.subtasks.values())
        align = max((s.metrics.alignment_duration_ms for s in subtasks), default=0)
        sync = max((s.metrics.sync_duration_ms for s in subtasks), default=0)
        asyn = max((s.metrics.async_duration_ms for s in subtasks), default=0)
        rows.append((
            c.checkpoint_id,
            c.status.value,
            _time(c.trigger_ms),
            f"{c.end_to_end_duration_ms} ms",
            f"{align} ms",
            f"{sync} ms",
            f"{asyn} ms",
            _size(c.state_size),
            f"{c.num_acknowledged_subtasks}/{c.num_subtasks}",
            c.failure_reason or "",
        ))
    counts = snapshot.counts
    head = (f"checkpoints: {counts.completed} completed, {counts.failed} failed, "
            f"{counts.in_progress} in progress; end-to-end p50 "
            f"{snapshot.end_to_end_duration.p50} ms, max {snapshot.end_to_end_duration.max} ms")
    table = render(("id", "status", "triggered", "end-to-end", "alignment", "sync", "async",
                    "state", "acks", "failure"), rows)
    return head + "\n" + table
