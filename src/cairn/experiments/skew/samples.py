"""Checkpoint statistics of the skew experiment -> one row per variant -> a text table.

Invariant: pure: rows are computed only from engine-neutral ``CheckpointSample``s (Cairn's
``CheckpointStats`` or Flink's REST history, converted), so Cairn's demo and the benchmark's
PyFlink runs are summarized by the same function; durations follow Flink's definitions (end
to end = trigger to the last acknowledgement; alignment = a subtask's first to last barrier,
the slowest subtask per checkpoint; percentiles are nearest-rank over completed checkpoints).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus, Summary
from cairn.ids import CheckpointId

__all__ = ["HEADERS", "CheckpointSample", "SkewRow", "format_table", "summarize", "table_rows"]


@dataclass(frozen=True, slots=True)
class CheckpointSample:
    """One checkpoint, engine-neutral (Cairn's ``CheckpointStats`` or Flink's REST history).

    >>> CheckpointSample.from_dict(CheckpointSample(3, "COMPLETED", 120).to_dict()).end_to_end_ms
    120
    """

    checkpoint_id: CheckpointId
    status: str  # COMPLETED | FAILED | IN_PROGRESS
    end_to_end_ms: int
    alignment_ms: int = 0  # the slowest subtask's first-to-last barrier time
    start_delay_ms: int = 0  # the slowest subtask's trigger-to-first-barrier time
    persisted_bytes: int = 0  # in-flight data persisted with the checkpoint, all subtasks
    unaligned: bool = False
    failure_reason: str | None = None

    @classmethod
    def from_stats(cls, stats: CheckpointStats) -> CheckpointSample:
        metrics = [s.metrics for s in stats.subtasks.values()]
        return cls(
            checkpoint_id=stats.checkpoint_id,
            status=stats.status.value,
            end_to_end_ms=stats.end_to_end_duration_ms,
            alignment_ms=max((m.alignment_duration_ms for m in metrics), default=0),
            start_delay_ms=max((m.start_delay_ms for m in metrics), default=0),
            persisted_bytes=stats.persisted_bytes,
            unaligned=stats.unaligned,
            failure_reason=stats.failure_reason,
        )

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointSample:
        return cls(**{name: data[name] for name in cls.__slots__ if name in data})


@dataclass(frozen=True, slots=True)
class SkewRow:
    """One variant's line of the table (percentiles over completed checkpoints)."""

    variant: str
    completed: int
    failed: int
    in_progress: int  # still running when the variant's time was up
    e2e_p50_ms: int | None
    e2e_max_ms: int | None
    alignment_p50_ms: int | None
    alignment_max_ms: int | None
    start_delay_max_ms: int | None
    persisted_max_bytes: int
    persisted_total_bytes: int
    unaligned: int  # completed checkpoints that persisted in-flight data (unaligned)
    records_per_s: float | None = None
    failure_reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["failure_reasons"] = list(self.failure_reasons)
        return out


def summarize(
    variant: str,
    samples: Iterable[CheckpointSample | CheckpointStats],
    records_per_s: float | None = None,
) -> SkewRow:
    """The row of one variant; a checkpoint seen several times counts once (its latest view:
    a finished status wins over ``IN_PROGRESS``).

    >>> row = summarize("aligned", [CheckpointSample(1, "COMPLETED", 9000, 10),
    ...                             CheckpointSample(2, "COMPLETED", 7000, 30),
    ...                             CheckpointSample(3, "IN_PROGRESS", 5000)])
    >>> row.completed, row.in_progress, row.e2e_p50_ms, row.e2e_max_ms, row.alignment_max_ms
    (2, 1, 7000, 9000, 30)
    """
    latest: dict[CheckpointId, CheckpointSample] = {}
    for item in samples:
        sample = item if isinstance(item, CheckpointSample) else CheckpointSample.from_stats(item)
        seen = latest.get(sample.checkpoint_id)
        if seen is None or seen.status == CheckpointStatus.IN_PROGRESS.value:
            latest[sample.checkpoint_id] = sample
    done = [s for s in latest.values() if s.status == CheckpointStatus.COMPLETED.value]
    failed = [s for s in latest.values() if s.status == CheckpointStatus.FAILED.value]
    running = [s for s in latest.values() if s.status == CheckpointStatus.IN_PROGRESS.value]
    e2e = Summary.of(s.end_to_end_ms for s in done)
    alignment = Summary.of(s.alignment_ms for s in done)
    return SkewRow(
        variant=variant,
        completed=len(done),
        failed=len(failed),
        in_progress=len(running),
        e2e_p50_ms=e2e.p50 if done else None,
        e2e_max_ms=e2e.max if done else None,
        alignment_p50_ms=alignment.p50 if done else None,
        alignment_max_ms=alignment.max if done else None,
        start_delay_max_ms=max((s.start_delay_ms for s in done), default=None),
        persisted_max_bytes=max((s.persisted_bytes for s in done), default=0),
        persisted_total_bytes=sum(s.persisted_bytes for s in done),
        unaligned=sum(1 for s in done if s.unaligned),
        records_per_s=records_per_s,
        failure_reasons=tuple(sorted({s.failure_reason or "?" for s in failed})),
    )


def table_rows(
    collected: Mapping[str, Iterable[CheckpointSample | CheckpointStats]],
    records_per_s: Mapping[str, float | None] | None = None,
) -> list[SkewRow]:
    """One row per variant, in the order of ``collected``.

    >>> rows = table_rows({"aligned": [], "unaligned": [CheckpointSample(1, "FAILED", 5)]})
    >>> [(r.variant, r.completed, r.failed) for r in rows]
    [('aligned', 0, 0), ('unaligned', 0, 1)]
    """
    rates = records_per_s or {}
    return [
        summarize(variant, samples, rates.get(variant)) for variant, samples in collected.items()
    ]


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.1f} s" if value >= 10_000 else f"{value:,} ms"


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


HEADERS = (
    "variant",
    "completed",
    "failed",
    "open",
    "e2e p50",
    "e2e max",
    "align p50",
    "align max",
    "start delay max",
    "persisted max",
    "unaligned",
    "map rec/s",
)


def format_table(rows: Sequence[SkewRow], labels: Mapping[str, str] | None = None) -> str:
    """The side-by-side table as text (``labels`` renames variants).

    >>> text = format_table([summarize("aligned", [CheckpointSample(1, "COMPLETED", 12500, 7)])])
    >>> text.splitlines()[0].split()[:3], text.splitlines()[2].split()[:8]
    (['variant', 'completed', 'failed'], ['aligned', '1', '0', '0', '12.5', 's', '12.5', 's'])
    """
    from cairn.observability.tables import render

    names = labels or {}
    body = [
        (
            names.get(r.variant, r.variant),
            r.completed,
            r.failed,
            r.in_progress,
            _ms(r.e2e_p50_ms),
            _ms(r.e2e_max_ms),
            _ms(r.alignment_p50_ms),
            _ms(r.alignment_max_ms),
            _ms(r.start_delay_max_ms),
            _bytes(r.persisted_max_bytes),
            f"{r.unaligned}/{r.completed}",
            "-" if r.records_per_s is None else f"{r.records_per_s:,.0f}",
        )
        for r in rows
    ]
    return render(HEADERS, body)
