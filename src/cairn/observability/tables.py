"""Plain-text (and JSON) tables of checkpoints: retained ones on storage, and a job's statistics.

Invariant: formatting only; the numbers come from ``checkpoint.storage`` (the retained
checkpoints' ``_metadata``) and ``checkpoint.stats`` unchanged. Reading never modifies a
checkpoint directory.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.errors import CheckpointError
from cairn.checkpoint.inspection import CheckpointSummary, list_checkpoints
from cairn.checkpoint.metadata import CheckpointMetadata
from cairn.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsSnapshot,
    StatsSummary,
    SubtaskStats,
)
from cairn.checkpoint.storage import read_metadata
from cairn.ids import CheckpointId
from cairn.settings import SigningKey

log = logging.getLogger(__name__)

NO_SUBTASK_STATS = "no per-subtask statistics (metadata written by an older Cairn)"


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _ms(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n:.1f} ms" if isinstance(n, float) and not n.is_integer() else f"{int(n)} ms"


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _yes(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "no")


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns separated by two spaces, a dashed rule under the headers.

    >>> print(render(("id", "size"), [(1, "3 B")]))
    id  size
    --  ----
    1   3 B
    """
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(row.rstrip() for row in out)


# --- retained checkpoints (cairn checkpoints PATH) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class RetainedCheckpoint:
    """A checkpoint directory found on storage and, if readable, its metadata (with stats)."""

    summary: CheckpointSummary
    metadata: CheckpointMetadata | None = None

    @property
    def checkpoint_type(self) -> str | None:
        md = self.metadata
        if md is None:
            return None
        if md.is_savepoint:
            return "SAVEPOINT"
        return "UNALIGNED_CHECKPOINT" if md.stats.unaligned else "CHECKPOINT"

    def to_dict(self, details: bool = False) -> dict[str, Any]:
        """JSON-ready row; ``details`` adds the per-subtask rows (None if never recorded)."""
        s, md = self.summary, self.metadata
        out: dict[str, Any] = {
            "id": s.checkpoint_id,
            "job_id": s.job_id,
            "path": s.path,
            "is_savepoint": s.is_savepoint,
            "checkpoint_type": self.checkpoint_type,
            "usable": s.ok,
            "error": s.error,
            "signature": None if s.signature is None else s.signature.value,
            "trigger_timestamp": s.trigger_ms,
            "completed_timestamp": s.completed_ms,
            "end_to_end_duration": s.duration_ms,
        }
        st = None if md is None else md.stats
        out.update(
            {
                "state_size": None if md is None else md.state_size,
                "inline_size": None if md is None else md.inline_size,
                "checkpointed_size": None if md is None else md.checkpointed_size,
                "processed_data": None if st is None else st.processed_bytes,
                "persisted_data": None if st is None else st.persisted_bytes,
                "alignment_duration": None if st is None else st.max_alignment_duration_ms,
                "start_delay": None if st is None else st.max_start_delay_ms,
                "sync_duration": None if st is None else st.max_sync_duration_ms,
                "async_duration": None if st is None else st.max_async_duration_ms,
                "unaligned": None if st is None else st.unaligned,
                "num_subtasks": None if st is None else st.num_subtasks,
            }
        )
        if details:
            if md is None or not md.stats.subtasks:
                out["subtasks"] = None
                out["subtask_summary"] = None
            else:
                cp = md.to_checkpoint_stats(s.path)
                out["subtasks"] = [x.to_dict(md.trigger_ms) for x in cp.subtask_details()]
                out["subtask_summary"] = cp.subtask_summary().to_dict()
        return out


def load_retained(
    path: str, storage_options: Mapping[str, Any] | None = None, key: SigningKey | None = None
) -> list[RetainedCheckpoint]:
    """Checkpoints under ``path`` (see ``inspection.list_checkpoints``), oldest first, with
    metadata; with ``key`` a checkpoint not signed with it is unusable (and has none).

    Raises:
        CheckpointNotFoundError: ``path`` is neither a checkpoint nor a directory.
    """
    out = []
    for s in list_checkpoints(path, storage_options, key=key):
        md: CheckpointMetadata | None = None
        if s.trigger_ms is not None:  # the metadata parsed (the files may still be missing)
            try:
                md = read_metadata(s.path, storage_options, key)
            except CheckpointError as e:  # removed or damaged since it was listed
                log.debug("cannot re-read metadata of %s: %s", s.path, e)
        out.append(RetainedCheckpoint(s, md))
    return out


def checkpoints_table(path: str | Sequence[RetainedCheckpoint]) -> str:
    """``cairn checkpoints PATH``: retained checkpoints and savepoints with their statistics.

    Columns: id, kind, completed, duration (end-to-end), size (state), status, added (what it
    wrote: less than its size when incremental), signature (verified, unsigned, or signed but
    not checked without a key), alignment, sync and async (slowest subtask), persisted
    (in-flight bytes), unaligned, path.
    """
    rows_in = load_retained(path) if isinstance(path, str) else list(path)
    if not rows_in:
        return f"no checkpoints under {path}" if isinstance(path, str) else "no checkpoints"
    rows = []
    for r in rows_in:
        s, md = r.summary, r.metadata
        st = None if md is None else md.stats
        rows.append(
            (
                s.checkpoint_id if s.checkpoint_id is not None else "?",
                "savepoint" if s.is_savepoint else "checkpoint",
                _time(s.completed_ms),
                _ms(s.duration_ms),
                _size(s.state_size),
                "ok" if s.ok else f"UNUSABLE: {s.error}",
                _size(None if md is None else md.checkpointed_size),
                "-" if s.signature is None else s.signature.value,
                _ms(None if st is None else st.max_alignment_duration_ms),
                _ms(None if st is None else st.max_sync_duration_ms),
                _ms(None if st is None else st.max_async_duration_ms),
                _size(None if st is None else st.persisted_bytes),
                _yes(None if st is None else st.unaligned),
                s.path,
            )
        )
    return render(
        (
            "id",
            "kind",
            "completed",
            "duration",
            "size",
            "status",
            "added",
            "signature",
            "alignment",
            "sync",
            "async",
            "persisted",
            "unaligned",
            "path",
        ),
        rows,
    )


def retained_details(r: RetainedCheckpoint) -> str:
    """Per-subtask statistics of one retained checkpoint (``cairn checkpoints PATH --id N``)."""
    s, md = r.summary, r.metadata
    if md is None:
        return f"checkpoint {s.checkpoint_id} at {s.path}: UNUSABLE: {s.error}"
    status = "ok" if s.ok else f"UNUSABLE: {s.error}"
    head = f"checkpoint {md.checkpoint_id} ({r.checkpoint_type}, {status}) at {s.path}"
    if not md.stats.subtasks:
        totals = (
            f"triggered {_time(md.trigger_ms)}, completed {_time(md.completed_ms)}, "
            f"end-to-end {_ms(md.duration_ms)}, state {_size(md.state_size)}, "
            f"persisted {_size(md.stats.persisted_bytes)}, "
            f"subtasks {md.stats.num_subtasks}"
        )
        return f"{head}\n{totals}\n{NO_SUBTASK_STATS}"
    return checkpoint_details(md.to_checkpoint_stats(s.path), title=head)


def checkpoints_report(
    path: str,
    checkpoint_id: CheckpointId | None = None,
    details: bool = False,
    as_json: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    key: SigningKey | None = None,
) -> str:
    """What ``cairn checkpoints PATH [--id N] [--details] [--json]`` prints.

    Without ``checkpoint_id``/``details``: the listing. With ``checkpoint_id``: the
    per-subtask statistics of that checkpoint (of every one with that id, e.g. under several
    job directories). ``details`` alone: of the newest checkpoint whose metadata is readable.
    ``as_json``: a JSON list of checkpoint objects (with ``subtasks`` when showing details).
    ``key``: check each checkpoint's signature with it (see :func:`load_retained`).

    Raises:
        CheckpointNotFoundError: ``path`` is neither a checkpoint nor a directory.
        LookupError: no checkpoint ``checkpoint_id`` (or none readable) under ``path``.
    """
    retained = load_retained(path, storage_options, key)
    chosen: list[RetainedCheckpoint] | None = None
    if checkpoint_id is not None:
        chosen = [r for r in retained if r.summary.checkpoint_id == checkpoint_id]
        if not chosen:
            ids = ", ".join(str(r.summary.checkpoint_id) for r in retained) or "none"
            raise LookupError(f"no checkpoint {checkpoint_id} under {path} (found: {ids})")
    elif details:
        readable = [r for r in retained if r.metadata is not None]
        if not readable:
            raise LookupError(f"no checkpoint with readable metadata under {path}")
        chosen = [
            max(readable, key=lambda r: (r.summary.completed_ms or 0, r.summary.checkpoint_id or 0))
        ]
    if as_json:
        rows = retained if chosen is None else chosen
        return json.dumps([r.to_dict(details=chosen is not None) for r in rows], indent=1)
    if chosen is None:
        return checkpoints_table(retained) if retained else f"no checkpoints under {path}"
    return "\n\n".join(retained_details(r) for r in chosen)


# --- per-subtask and summary tables ----------------------------------------------------------

_SUBTASK_HEADERS = (
    "vertex",
    "subtask",
    "acknowledged",
    "end-to-end",
    "start delay",
    "alignment",
    "sync",
    "async",
    "state",
    "processed",
    "persisted",
    "unaligned",
)


def subtasks_table(trigger_ms: int, subtasks: Sequence[SubtaskStats]) -> str:
    """One row per acknowledged subtask (Flink's checkpoint details, subtask view)."""
    rows = [
        (
            s.task.vertex_id,
            s.task.subtask_index,
            _time(s.ack_ms),
            _ms(s.end_to_end_duration_ms(trigger_ms)),
            _ms(s.metrics.start_delay_ms),
            _ms(s.metrics.alignment_duration_ms),
            _ms(s.metrics.sync_duration_ms),
            _ms(s.metrics.async_duration_ms),
            _size(s.metrics.state_size),
            _size(s.metrics.processed_bytes),
            _size(s.metrics.persisted_bytes),
            _yes(s.metrics.unaligned),
        )
        for s in subtasks
    ]
    return render(_SUBTASK_HEADERS, rows)


def summary_table(summary: StatsSummary) -> str:
    """min/avg/p50/p90/p99/max of every figure (durations in ms, sizes in bytes units)."""
    rows: list[tuple[Any, ...]] = []
    for name, s in summary.items():
        is_time = name.endswith(("duration", "delay"))

        def fmt(v: float, is_time: bool = is_time) -> str:
            return _ms(v) if is_time else _size(round(v))

        label = name.replace("_", " ")
        if s.count == 0:
            rows.append((label, 0, "-", "-", "-", "-", "-", "-"))
        else:
            rows.append(
                (
                    label,
                    s.count,
                    fmt(s.min),
                    fmt(s.avg),
                    fmt(s.p50),
                    fmt(s.p90),
                    fmt(s.p99),
                    fmt(s.max),
                )
            )
    return render(("figure", "count", "min", "avg", "p50", "p90", "p99", "max"), rows)


def checkpoint_details(stats: CheckpointStats, title: str | None = None) -> str:
    """One checkpoint: its totals, the per-subtask table and the summary over subtasks."""
    head = title or (
        f"checkpoint {stats.checkpoint_id} ({stats.checkpoint_type}, "
        f"{stats.status.value})" + (f" at {stats.path}" if stats.path else "")
    )
    totals = (
        f"triggered {_time(stats.trigger_ms)}, end {_time(stats.end_ms)}, end-to-end "
        f"{_ms(stats.end_to_end_duration_ms)}, state {_size(stats.state_size)}, processed "
        f"{_size(stats.processed_bytes)}, persisted {_size(stats.persisted_bytes)}, "
        f"{stats.num_acknowledged_subtasks}/{stats.num_subtasks} subtasks acknowledged"
    )
    if stats.failure_reason:
        totals += f"\nfailure: {stats.failure_reason}: {stats.failure_message or ''}".rstrip()
    parts = [head, totals]
    if stats.subtasks:
        parts += [
            subtasks_table(stats.trigger_ms, stats.subtask_details()),
            "summary over subtasks:",
            summary_table(stats.subtask_summary()),
        ]
    return "\n".join(parts)


# --- a running job's statistics ----------------------------------------------------------------


def stats_table(snapshot: CheckpointStatsSnapshot, limit: int = 20) -> str:
    """A job's checkpoint history (newest first) with Flink's columns."""
    rows = []
    for c in list(snapshot.history)[:limit]:
        rows.append(
            (
                c.checkpoint_id,
                c.status.value,
                "savepoint" if c.is_savepoint else "checkpoint",
                _time(c.trigger_ms),
                _ms(c.end_to_end_duration_ms),
                _ms(c.max_alignment_duration_ms),
                _ms(c.max_sync_duration_ms),
                _ms(c.max_async_duration_ms),
                _size(c.state_size),
                _size(c.persisted_bytes),
                _yes(c.unaligned),
                f"{c.num_acknowledged_subtasks}/{c.num_subtasks}",
                c.failure_reason or "",
            )
        )
    counts = snapshot.counts
    e2e = snapshot.summary.end_to_end_duration
    head = (
        f"checkpoints: {counts.completed} completed, {counts.failed} failed, "
        f"{counts.in_progress} in progress; end-to-end p50 {e2e.p50} ms, max {e2e.max} ms"
    )
    table = render(
        (
            "id",
            "status",
            "kind",
            "triggered",
            "end-to-end",
            "alignment",
            "sync",
            "async",
            "state",
            "persisted",
            "unaligned",
            "acks",
            "failure",
        ),
        rows,
    )
    return head + "\n" + table
