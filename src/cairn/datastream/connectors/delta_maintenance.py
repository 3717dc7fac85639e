"""Compaction and vacuum of a Delta table on delta-rs, safe beside a running ``DeltaSink`` job.

Invariant: a compaction is delta-rs's ``OPTIMIZE`` (bin-packing into files of about the target
size, ``delta.targetFileSize``): one Delta version whose ``remove`` and ``add`` actions carry
``dataChange = false``, committed with Delta's optimistic concurrency — a sink commit that
lands first is kept (the optimize's conflict check retries or fails it, never the other way
round), and the sink's own append commits do not conflict with it; the sink's ``txn``
versions are untouched, so the job's idempotence holds. Readers (``DeltaSource``) skip such
versions: the same rows, rewritten. ``vacuum`` keeps delta-rs's retention check
(``delta.deletedFileRetentionDuration``, a week): a retention shorter than a checkpoint
interval plus a restart would delete files a running job has written but not yet committed.
"""

from __future__ import annotations

import logging
from typing import Any

from cairn.datastream.connectors.delta import DEFAULT_TARGET_FILE_SIZE, TARGET_FILE_SIZE
from cairn.datastream.connectors.small_files import CompactionResult
from cairn.observability.doctor.table_rules import CommitFacts, LakeTableFacts

__all__ = [
    "TARGET_FILE_SIZE",
    "added_files",
    "delta_table_facts",
    "optimize_delta",
    "target_file_size",
]

log = logging.getLogger(__name__)

_COMMITS_LOOKED_AT = 50
_WRITES = {"WRITE", "MERGE", "STREAMING UPDATE", "CREATE OR REPLACE TABLE", "UPDATE", "DELETE"}


def target_file_size(configuration: dict[str, str], override: int | None = None) -> int:
    """``override``, else the table's ``delta.targetFileSize``, else delta-rs's 100 MiB.

    >>> target_file_size({TARGET_FILE_SIZE: "1024"}), target_file_size({})
    (1024, 104857600)
    """
    if override is not None:
        return int(override)
    return int(configuration.get(TARGET_FILE_SIZE, DEFAULT_TARGET_FILE_SIZE))


def _table(path: str, storage_options: dict[str, str] | None) -> Any:
    import deltalake

    return deltalake.DeltaTable(path, storage_options=storage_options or None)


def optimize_delta(
    path: str,
    *,
    target_size: int | None = None,
    vacuum_retention_hours: int | None = None,
    storage_options: dict[str, str] | None = None,
) -> CompactionResult:
    """Compact the table at ``path`` (delta-rs's ``optimize.compact``; see the module) and,
    with ``vacuum_retention_hours``, vacuum files removed longer ago than that (delta-rs's
    retention check applies)."""
    table = _table(path, storage_options)
    before = len(table.get_add_actions(flatten=True))
    metrics = table.optimize.compact(target_size=target_size)
    removed, added = int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0))
    if vacuum_retention_hours is not None:
        deleted = table.vacuum(retention_hours=vacuum_retention_hours, dry_run=False)
        log.info("Delta vacuum of %s: %d files deleted", path, len(deleted))
    return CompactionResult(
        path, "delta", before, before - removed + added, removed, added, removed > 0
    )


def added_files(entry: dict[str, Any]) -> int:
    """The data files a commit of ``DeltaTable.history()`` added: the sink records
    ``cairn.files``, delta-rs's writes and merges their metrics.

    >>> added_files({"cairn.files": "3"}), added_files({"operationMetrics": {"num_added_files": 2}})
    (3, 2)
    >>> added_files({"operationMetrics": {"num_target_files_added": 1}}), added_files({})
    (1, 0)
    """
    if "cairn.files" in entry:
        return int(entry["cairn.files"])
    metrics = entry.get("operationMetrics") or {}
    for key in ("num_added_files", "num_target_files_added", "numFilesAdded"):
        if key in metrics:
            return int(metrics[key])
    return 0


def delta_table_facts(path: str, storage_options: dict[str, str] | None = None) -> LakeTableFacts:
    """The doctor's facts of a Delta table: live data files, target size, latest writes."""
    table = _table(path, storage_options)
    sizes = table.get_add_actions(flatten=True).column("size_bytes").to_pylist()
    commits = []
    for entry in table.history(_COMMITS_LOOKED_AT):
        if entry.get("operation") not in _WRITES:
            continue
        commits.append(CommitFacts(int(entry["timestamp"]), added_files(entry)))
    return LakeTableFacts(
        path,
        "delta",
        len(sizes),
        sum(int(s) for s in sizes),
        target_file_size(dict(table.metadata().configuration)),
        tuple(commits),
    )
