"""Compaction of an Iceberg table on pyiceberg, safe beside a running ``IcebergSink`` job:
Iceberg's ``rewrite_data_files`` (bin-pack), which pyiceberg 0.12 does not offer.

Invariant: a rewrite is ONE ``replace`` snapshot that deletes the small files
``small_files.plan_rewrite`` picked and adds the same rows in files of about the target size
(``write.target-file-size-bytes``), or nothing. It is committed with the catalog's
optimistic check on the branch head (pyiceberg's ``AssertRefSnapshotId``): if the job (or
anyone) committed meanwhile, the rewrite's new files are deleted and it is planned again on
the new head, so it never undoes a job's commit nor resurrects a row an upsert removed; the
job's own commit, racing the rewrite's, is retried by the sink the same way. The job's
idempotence record (``flink.job-id`` in the summaries of the current snapshot's ancestors)
is untouched: a ``replace`` snapshot carries none and the walk goes past it. Readers
(``IcebergSource``) skip ``replace`` snapshots: the same rows, rewritten. Tables with delete
files are refused (pyiceberg cannot apply equality deletes). Uses pyiceberg's
``_OverwriteFiles`` with the ``replace`` operation (pinned ``pyiceberg<0.13``).
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from cairn.datastream.connectors.iceberg_table import (
    IcebergSinkError,
    IcebergTableConfig,
    TableAccess,
)
from cairn.datastream.connectors.small_files import (
    DEFAULT_TARGET_FILE_SIZE,
    MIN_INPUT_FILES,
    CompactionResult,
    FileFacts,
    plan_rewrite,
)
from cairn.observability.doctor.table_rules import CommitFacts, LakeTableFacts

__all__ = ["TARGET_FILE_SIZE", "iceberg_table_facts", "rewrite_data_files"]

log = logging.getLogger(__name__)

TARGET_FILE_SIZE = "write.target-file-size-bytes"
REWRITE_PROPERTY = "cairn.rewrite-data-files"
_ATTEMPTS = 5
_COMMITS_LOOKED_AT = 50


def _access(table: str, catalog: Mapping[str, str], catalog_name: str) -> TableAccess:
    return TableAccess(IcebergTableConfig(catalog_name, dict(catalog), table, None))


def target_file_size(properties: Mapping[str, str], override: int | None = None) -> int:
    """The target file size: ``override``, else the table's property, else Iceberg's 512 MiB.

    >>> target_file_size({TARGET_FILE_SIZE: "1048576"}), target_file_size({}, 10)
    (1048576, 10)
    """
    if override is not None:
        return int(override)
    return int(properties.get(TARGET_FILE_SIZE, DEFAULT_TARGET_FILE_SIZE))


def _live_tasks(table: Any) -> list[Any]:
    tasks = list(table.scan().plan_files())
    with_deletes = [t.file.file_path for t in tasks if t.delete_files]
    if with_deletes:
        raise IcebergSinkError(
            f"Iceberg compaction: {len(with_deletes)} data files of the table have delete "
            "files, which pyiceberg cannot rewrite (compact them with Spark's rewrite_data_files)"
        )
    return tasks


def rewrite_data_files(
    table: str,
    catalog: Mapping[str, str],
    *,
    target_file_size_bytes: int | None = None,
    min_input_files: int = MIN_INPUT_FILES,
    catalog_name: str = "cairn",
) -> CompactionResult:
    """Rewrite the table's small data files into files of about the target size, as one
    ``replace`` snapshot (see the module); safe while a job writes the table.

    ``target_file_size_bytes``: default the table's ``write.target-file-size-bytes``;
    ``min_input_files``: a partition is rewritten when it has at least that many small files
    (Iceberg's ``min-input-files``).
    """
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    access = _access(table, catalog, catalog_name)
    for attempt in range(_ATTEMPTS):
        t = access.table()
        t.refresh()
        before = _live_tasks(t)
        target = target_file_size(t.properties, target_file_size_bytes)
        spec_id = t.spec().spec_id
        by_path = {task.file.file_path: task for task in before}
        files = [
            FileFacts(
                (task.file.spec_id, repr(task.file.partition)), path, task.file.file_size_in_bytes
            )
            for path, task in by_path.items()
            if task.file.spec_id == spec_id  # files of older specs: left as they are
        ]
        groups = plan_rewrite(files, target, min_input_files)
        if not groups:
            return CompactionResult(table, "iceberg", len(before), len(before), 0, 0, False)
        added: list[Any] = []
        try:
            removed = [by_path[p].file for g in groups for p in g.paths]
            added = _write_groups(t, [[by_path[p] for p in g.paths] for g in groups], target)
            _commit_replace(t, removed, added)
        except (CommitFailedException, ValidationException):
            # pyiceberg retried on the new head; a file it rewrote is gone (another rewrite,
            # an upsert's): plan again.
            _delete(t, added)
            log.info("Iceberg compaction of %s: lost a race with a commit, planning again", table)
            if attempt == _ATTEMPTS - 1:
                raise
            continue
        except BaseException:
            _delete(t, added)
            raise
        after = len(before) - len(removed) + len(added)
        return CompactionResult(
            table, "iceberg", len(before), after, len(removed), len(added), True
        )
    raise AssertionError("unreachable")


def _write_groups(t: Any, groups: list[list[Any]], target: int) -> list[Any]:
    """The rows of each group's files in new data files of about ``target`` bytes."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    metadata = t.metadata.model_copy(
        update={"properties": {**t.metadata.properties, TARGET_FILE_SIZE: str(target)}}
    )
    write_uuid, counter = uuid.uuid4(), itertools.count(0)
    scan = ArrowScan(t.metadata, t.io, t.schema(), AlwaysTrue())
    added: list[Any] = []
    for tasks in groups:
        rows = scan.to_table(tasks)
        added.extend(
            _dataframe_to_data_files(
                table_metadata=metadata, df=rows, io=t.io, write_uuid=write_uuid, counter=counter
            )
        )
    return added


def _rewrite_files_class(table: Any) -> Any:
    """pyiceberg's overwrite producer committing a ``replace`` snapshot of ``table``: its
    summary's totals computed as an overwrite's (pyiceberg 0.12 computes none for
    ``replace``), and, on a retry after a concurrent commit, Iceberg's ``RewriteFiles``
    checks only — the files it deletes are still live and have no new deletes — not an
    overwrite's (which fails on any concurrent append)."""
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import _OverwriteFiles
    from pyiceberg.table.update.validate import (
        _validate_data_files_exist,
        _validate_no_new_deletes_for_data_files,
    )

    class RewriteFiles(_OverwriteFiles):
        def _summary(self, snapshot_properties: Any = None) -> Summary:
            self._operation = Operation.OVERWRITE
            try:
                summary = super()._summary(snapshot_properties or {})
            finally:
                self._operation = Operation.REPLACE
            return Summary(Operation.REPLACE, **summary.additional_properties)

        def _validate_concurrency(self) -> None:
            window = self._commit_window
            if window is None or window.is_empty() or window.head is None:
                return
            deleted = self._deleted_data_files
            _validate_data_files_exist(table, window.head, deleted, window.base)
            _validate_no_new_deletes_for_data_files(table, window.head, None, deleted, window.base)

    return RewriteFiles


def _commit_replace(t: Any, removed: list[Any], added: list[Any]) -> None:
    from pyiceberg.table.snapshots import Operation

    transaction = t.transaction()
    producer = _rewrite_files_class(t)(
        operation=Operation.REPLACE,
        transaction=transaction,
        io=t.io,
        snapshot_properties={REWRITE_PROPERTY: f"{len(removed)}->{len(added)}"},
    )
    with producer as rewrite:
        for data_file in removed:
            rewrite.delete_data_file(data_file)
        for data_file in added:
            rewrite.append_data_file(data_file)
    transaction.commit_transaction()


def _delete(t: Any, data_files: list[Any]) -> None:
    for data_file in data_files:
        try:
            t.io.delete(data_file.file_path)
        except Exception:  # left for remove_orphan_files
            log.warning("Iceberg compaction: could not delete %s", data_file.file_path)


def iceberg_table_facts(
    table: str, catalog: Mapping[str, str], catalog_name: str = "cairn"
) -> LakeTableFacts:
    """The doctor's facts of an Iceberg table: live data files, target size, latest commits."""
    from pyiceberg.table.snapshots import Operation, ancestors_of

    t = _access(table, catalog, catalog_name).table()
    t.refresh()
    tasks = _live_tasks(t) if t.current_snapshot() is not None else []
    commits = []
    for snapshot in itertools.islice(
        ancestors_of(t.current_snapshot(), t.metadata), _COMMITS_LOOKED_AT
    ):
        summary = snapshot.summary
        if summary is None or summary.operation not in (Operation.APPEND, Operation.OVERWRITE):
            continue
        added = int(summary.additional_properties.get("added-data-files", "0"))
        commits.append(CommitFacts(snapshot.timestamp_ms, added))
    return LakeTableFacts(
        table,
        "iceberg",
        len(tasks),
        sum(task.file.file_size_in_bytes for task in tasks),
        target_file_size(t.properties),
        tuple(commits),
    )
