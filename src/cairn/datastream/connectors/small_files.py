"""Which data files a compaction rewrites: Iceberg's ``rewrite_data_files`` bin-pack rule,
pure (the Iceberg compaction in ``iceberg_maintenance`` acts on it).

Invariant: a file is a candidate when it is smaller than ``min_file_ratio`` (Iceberg's
``min-file-size-bytes``: 75 %) of the target file size; a partition's candidates are
rewritten together only when there are at least ``min_input_files`` of them (Iceberg's
``min-input-files``, 5) or their bytes exceed one target file — so a compaction never
rewrites a lone small file, nor a file already near the target. Partitions are independent:
one group per partition, files in path order.

>>> files = [FileFacts(("eu",), f"eu-{i}", 10) for i in range(5)] + [
...     FileFacts(("us",), "us-0", 10), FileFacts(("us",), "us-big", 900)]
>>> [(g.partition, len(g.paths), g.size) for g in plan_rewrite(files, target_bytes=1000)]
[(('eu',), 5, 50)]
>>> [g.partition for g in plan_rewrite(files, target_bytes=1000, min_input_files=1)]
[('eu',), ('us',)]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_TARGET_FILE_SIZE",
    "MIN_FILE_RATIO",
    "MIN_INPUT_FILES",
    "CompactionResult",
    "FileFacts",
    "RewriteGroup",
    "plan_rewrite",
]

DEFAULT_TARGET_FILE_SIZE = 512 << 20  # Iceberg's write.target-file-size-bytes default
MIN_FILE_RATIO = 0.75  # Iceberg's min-file-size-bytes: 75 % of the target
MIN_INPUT_FILES = 5  # Iceberg's min-input-files


@dataclass(frozen=True)
class FileFacts:
    """A live data file: its partition (any hashable value), path and size in bytes."""

    partition: Hashable
    path: str
    size: int


@dataclass(frozen=True)
class RewriteGroup:
    """The files of one partition to rewrite into files of about the target size."""

    partition: Hashable
    paths: tuple[str, ...]
    size: int


def plan_rewrite(
    files: Sequence[FileFacts],
    target_bytes: int = DEFAULT_TARGET_FILE_SIZE,
    min_input_files: int = MIN_INPUT_FILES,
    min_file_ratio: float = MIN_FILE_RATIO,
) -> list[RewriteGroup]:
    """The groups to rewrite, in the order their partitions first appear.

    >>> plan_rewrite([FileFacts(None, "a", 600), FileFacts(None, "b", 600)], 1000)
    [RewriteGroup(partition=None, paths=('a', 'b'), size=1200)]
    >>> plan_rewrite([], 0)
    Traceback (most recent call last):
    ...
    ValueError: target file size must be positive, got 0
    """
    if target_bytes <= 0:
        raise ValueError(f"target file size must be positive, got {target_bytes}")
    if min_input_files < 1:
        raise ValueError(f"min input files must be at least 1, got {min_input_files}")
    small = min_file_ratio * target_bytes
    by_partition: dict[Hashable, list[FileFacts]] = defaultdict(list)
    for f in files:
        if f.size < small:
            by_partition[f.partition].append(f)
    groups = []
    for partition, candidates in by_partition.items():
        size = sum(f.size for f in candidates)
        if len(candidates) >= min_input_files or (len(candidates) > 1 and size > target_bytes):
            paths = tuple(sorted(f.path for f in candidates))
            groups.append(RewriteGroup(partition, paths, size))
    return groups


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did: live data files before and after, files it removed and added,
    whether it committed (nothing to rewrite: no commit)."""

    table: str
    format: str
    files_before: int
    files_after: int
    removed: int
    added: int
    committed: bool

    def describe(self) -> str:
        """One line for the terminal.

        >>> CompactionResult("t", "delta", 40, 1, 40, 1, True).describe()
        'delta table t: 40 data files rewritten into 1 (40 -> 1 live files)'
        >>> CompactionResult("t", "delta", 3, 3, 0, 0, False).describe()
        'delta table t: nothing to compact (3 live files)'
        """
        if not self.committed:
            return (
                f"{self.format} table {self.table}: nothing to compact "
                f"({self.files_before} live files)"
            )
        return (
            f"{self.format} table {self.table}: {self.removed} data files rewritten into "
            f"{self.added} ({self.files_before} -> {self.files_after} live files)"
        )
