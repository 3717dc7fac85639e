"""The doctor's advice on a lakehouse table's data files: a streaming sink commits at least
one file per writer subtask per checkpoint, so short checkpoint intervals make many small
files, and reading the table slows with their count.

Invariant: :func:`small_files` is a pure function of :class:`LakeTableFacts` (the table's live
data files and its latest commits, gathered by ``cairn doctor --table``); it speaks when the
files are small (mean below a quarter of the target file size) and either already many
(``MANY_FILES``) or growing fast (``FILES_PER_DAY`` at the commits' pace: files per commit
times commits per day), and stays silent otherwise.

>>> day = 86_400_000
>>> commits = tuple(CommitFacts(i * 1000, 4) for i in range(20))  # 4 files a second
>>> f = small_files(LakeTableFacts("shop.orders", "iceberg", 800, 800 * 4096, 128 << 20, commits))
>>> f.rule, dict(f.figures)["files per day at this pace"]
('lake-small-files', '345,600')
>>> small_files(LakeTableFacts("t", "delta", 800, 800 * (100 << 20), 128 << 20, commits)) is None
True
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from cairn.observability.doctor.rules import Finding

__all__ = ["FILES_PER_DAY", "MANY_FILES", "CommitFacts", "LakeTableFacts", "small_files"]

MANY_FILES = 1_000  # live data files past which a small mean size is worth a finding
FILES_PER_DAY = 10_000  # ... or the pace that gets there within hours
SMALL_SHARE = 0.25  # "small": a mean file below a quarter of the target size
DAY_MS = 86_400_000
MIB = 1 << 20


@dataclass(frozen=True)
class CommitFacts:
    """One commit that added data (an Iceberg append or overwrite snapshot, a Delta write or
    merge; compactions are left out): when, and how many data files it added."""

    timestamp_ms: int
    added_files: int


@dataclass(frozen=True)
class LakeTableFacts:
    """A table's live data files (count, bytes), its target file size (Iceberg's
    ``write.target-file-size-bytes``, Delta's ``delta.targetFileSize``) and its latest
    commits, newest or oldest first."""

    table: str
    format: str  # "iceberg" or "delta"
    data_files: int
    total_bytes: int
    target_file_size: int
    commits: tuple[CommitFacts, ...] = ()

    @property
    def files_per_commit(self) -> float:
        """Median data files a commit adds (0 without commits).

        >>> LakeTableFacts("t", "delta", 1, 1, 1, (CommitFacts(0, 2), CommitFacts(9, 6))
        ...                ).files_per_commit
        4.0
        """
        return float(statistics.median(c.added_files for c in self.commits)) if self.commits else 0

    @property
    def commits_per_day(self) -> float:
        """Commits a day at the pace of the listed ones (0 with fewer than two).

        >>> LakeTableFacts("t", "delta", 1, 1, 1, (CommitFacts(0, 1), CommitFacts(1000, 1),
        ...                CommitFacts(2000, 1))).commits_per_day
        86400.0
        """
        if len(self.commits) < 2:
            return 0.0
        times = [c.timestamp_ms for c in self.commits]
        span = max(times) - min(times)
        return (len(times) - 1) * DAY_MS / span if span > 0 else 0.0


def _optimize_command(t: LakeTableFacts) -> str:
    return f"cairn table optimize {t.table}"


def small_files(t: LakeTableFacts) -> Finding | None:
    """Many small data files, or a pace that makes them: compact, and commit less often."""
    if t.data_files == 0 or t.target_file_size <= 0:
        return None
    mean = t.total_bytes / t.data_files
    per_day = t.files_per_commit * t.commits_per_day
    if mean >= SMALL_SHARE * t.target_file_size:
        return None
    if t.data_files < MANY_FILES and per_day < FILES_PER_DAY:
        return None
    figures = [
        ("table", f"{t.table} ({t.format})"),
        ("live data files", f"{t.data_files:,}"),
        ("mean file size", f"{mean / MIB:,.2f} MiB (target {t.target_file_size / MIB:,.0f} MiB)"),
    ]
    if t.commits:
        figures.append(("data files per commit", f"{t.files_per_commit:,.1f}"))
    if per_day > 0:
        figures.append(("files per day at this pace", f"{per_day:,.0f}"))
    target_key = "write.target-file-size-bytes" if t.format == "iceberg" else "delta.targetFileSize"
    return Finding(
        rule="lake-small-files",
        title="the table's data files are many and small: reads slow down with their count",
        figures=tuple(figures),
        advice=(
            f"compact the table ({_optimize_command(t)}: safe beside the running job, one "
            "commit that replaces small files); each checkpoint commits at least one file per "
            "sink subtask, so a longer checkpoint interval or a lower sink parallelism makes "
            "fewer, larger files"
        ),
        keys=("execution.checkpointing.interval", "sink.parallelism", target_key),
    )
