"""An exactly-once Apache Iceberg sink on pyiceberg (Flink's ``IcebergSink``, in Python).

Invariant: a checkpoint is at most one Iceberg snapshot. Each writer subtask writes its
records of a checkpoint interval into Parquet data files in the table's location; at the
barrier it closes them and sends their descriptions (pyiceberg ``DataFile``s: path, record
count, size, column statistics, partition) to the one committer subtask, which keeps them
in the checkpoint and, when the checkpoint completes, appends them all as one snapshot whose
summary records the job id and checkpoint id (``flink.job-id``,
``flink.max-committed-checkpoint-id``); replayed after a restore, a checkpoint the table
already records for the job is skipped (``iceberg_commit``).

>>> from cairn.common import Types
>>> sink = IcebergSink(
...     "shop.orders",
...     {"type": "sql", "uri": "sqlite:////tmp/cat.db", "warehouse": "file:///tmp/wh"},
...     Types.ROW_NAMED(["id", "region"], [Types.LONG(), Types.STRING()]),
...     partition_by=["region"],
... )
>>> sink.config.table, sink.config.partition_by
('shop.orders', ('region',))
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.api.connectors import (
    CheckpointCommittables,
    Committer,
    Sink,
    SinkWriter,
    SinkWriterContext,
)
from cairn.common.typeinfo import RowTypeInfo
from cairn.datastream.connectors.delta_merge import DELETE_COLUMN, change_rows
from cairn.datastream.connectors.iceberg_commit import orphan_data_files, partition_field
from cairn.datastream.connectors.iceberg_table import (
    IcebergSinkError,
    IcebergTableConfig,
    RowsToArrow,
    TableAccess,
    new_write_ids,
    require_pyiceberg,
)
from cairn.datastream.connectors.iceberg_upsert import (
    apply_changes,
    delete_staged,
    staging_path,
    write_staged,
)
from cairn.ids import CheckpointId

__all__ = ["IcebergCommitter", "IcebergSink", "IcebergSinkError", "IcebergWriteResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IcebergWriteResult:
    """A writer's committable (Flink's ``WriteResult``): the data files it closed at a
    barrier, as pyiceberg ``DataFile``s."""

    subtask: int
    data_files: tuple[Any, ...]
    staged: tuple[str, ...] = ()  # upsert mode: the paths of staged changelog files


class IcebergSink(Sink):
    """Appends a stream's records to an Iceberg table, exactly once (with checkpointing).

    ``table``: ``namespace.table``; ``catalog``: pyiceberg's catalog properties (``type``
    defaults to ``sql``: a SQL catalog on SQLite or PostgreSQL by its SQLAlchemy ``uri``,
    with a ``warehouse`` on local files or ``s3://``, and ``s3.*`` keys for the store);
    ``row_type`` (``Types.ROW_NAMED``): the records' columns, checked against the table
    before the job starts, or the schema of the table it creates when there is none
    (``partition_by`` its partition fields: ``"region"``, ``"day(ts)"``,
    ``"bucket[16](id)"``); without it the records are in the existing table's column order.
    Records are ``Row``s, tuples or lists in column order, or dicts by column name.
    ``rows_per_file``: a writer closes a data file after that many rows (more files within
    a checkpoint interval); every file is closed at each checkpoint, and none is larger than
    the table's ``write.target-file-size-bytes``. ``table_properties``: Iceberg table
    properties of a table the sink creates (``{"write.target-file-size-bytes": "..."}``);
    an existing table's are kept.

    ``equality_field_columns`` (with ``upsert=True``, Flink's names): the records are a
    keyed changelog (``Row``s with their ``RowKind``; key the stream by those columns):
    ``+I``/``+U`` insert or replace the key's row, ``-D`` deletes it, ``-U`` is dropped;
    each checkpoint is still one snapshot, an ``overwrite`` that rewrites the files holding
    the changed keys (copy-on-write, ``iceberg_upsert``).

    Output becomes visible when the checkpoint covering it completes (one snapshot per
    checkpoint); without checkpointing, at the end of input. Data files of a failed attempt
    that no checkpoint committed are left in the table's ``data/`` directory for Iceberg's
    ``remove_orphan_files``.
    """

    global_committer = True

    def __init__(
        self,
        table: str,
        catalog: Mapping[str, str],
        row_type: RowTypeInfo | None = None,
        partition_by: Sequence[str] = (),
        catalog_name: str = "cairn",
        rows_per_file: int = 1_000_000,
        table_properties: Mapping[str, str] | None = None,
        equality_field_columns: Sequence[str] = (),
        upsert: bool = False,
    ) -> None:
        if not isinstance(table, str) or not table.strip():
            raise ValueError(f"Iceberg sink: table must be 'namespace.table', got {table!r}")
        if row_type is not None and not isinstance(row_type, RowTypeInfo):
            raise TypeError(
                f"Iceberg sink: row_type must be Types.ROW_NAMED(...), got {row_type!r}"
            )
        if rows_per_file < 1:
            raise ValueError(f"Iceberg sink: rows_per_file must be positive, got {rows_per_file}")
        for text in partition_by:
            partition_field(text)
        keys = tuple(equality_field_columns)
        if upsert and not keys:
            raise ValueError("Iceberg sink: upsert needs equality_field_columns (the key)")
        if keys and (row_type is None or set(keys) - set(row_type.get_field_names())):
            names = None if row_type is None else row_type.get_field_names()
            raise ValueError(
                f"Iceberg sink: equality_field_columns {list(keys)} must be columns of the "
                f"row type {names}"
            )
        require_pyiceberg()
        self.config = IcebergTableConfig(
            catalog_name=catalog_name,
            catalog_properties=dict(catalog),
            table=table,
            row_type=row_type,
            partition_by=tuple(partition_by),
            rows_per_file=rows_per_file,
            table_properties=dict(table_properties or {}),
            equality_fields=keys,
        )

    def check_job(self, settings: Any) -> None:
        """On the driver: create the table if missing, else check the row type against it."""
        TableAccess(self.config).create_or_check()

    def create_writer(
        self, context: SinkWriterContext, restored_state: Sequence[Any]
    ) -> IcebergWriter:
        return IcebergWriter(self.config, context)

    def create_committer(self) -> IcebergCommitter:
        return IcebergCommitter(self.config)


class IcebergWriter(SinkWriter):
    """One subtask's data files of the current checkpoint interval."""

    def __init__(self, config: IcebergTableConfig, context: SinkWriterContext) -> None:
        self._config = config
        self._subtask = int(context.subtask_index)
        self._access = TableAccess(config)
        table = self._access.table()
        self._rows = RowsToArrow(config.row_type, table.schema().as_arrow())
        self._uuid, self._counter = new_write_ids(str(context.job_id), int(context.attempt_number))
        self._buffer: list[Any] = []
        self._files: list[Any] = []  # closed, not yet handed out
        self._staged: list[str] = []  # upsert mode: staged changes, not yet handed out
        self._location = table.location()

    def write(self, record: Any) -> None:
        self._buffer.append(record)
        if len(self._buffer) >= self._config.rows_per_file:
            self._write_files()

    def write_batch(self, records: Sequence[Any]) -> None:
        self._buffer.extend(records)
        if len(self._buffer) >= self._config.rows_per_file:
            self._write_files()

    def _write_files(self) -> None:
        if not self._buffer:
            return
        records, self._buffer = self._buffer, []
        if self._config.equality_fields:
            import pyarrow as pa

            changes, deletes = change_rows(records)
            rows = self._rows.table(changes).append_column(DELETE_COLUMN, pa.array(deletes))
            path = staging_path(self._location, self._uuid, self._subtask, next(self._counter))
            write_staged(self._access, rows, path)
            self._staged.append(path)
            return
        rows = self._rows.table(records)
        self._files.extend(self._access.write_files(rows, self._uuid, self._counter))

    def prepare_commit(self, checkpoint_id: CheckpointId) -> list[IcebergWriteResult]:
        self._write_files()
        if not self._files and not self._staged:
            return []
        files, self._files = tuple(self._files), []
        staged, self._staged = tuple(self._staged), []
        return [IcebergWriteResult(self._subtask, files, staged)]

    def close(self) -> None:
        # Files no checkpoint will commit (written since the last barrier): delete them.
        delete_staged(self._access, self._staged)
        self._staged = []
        if not self._files:
            return
        io = self._access.table().io
        for data_file in self._files:
            with contextlib.suppress(Exception):
                io.delete(data_file.file_path)
        self._files = []


class IcebergCommitter(Committer):
    """Appends each checkpoint's data files, from all writers, as one snapshot."""

    def __init__(self, config: IcebergTableConfig) -> None:
        self._config = config
        self._access: TableAccess | None = None
        self._leftovers: SinkWriterContext | None = None

    def abort_leftovers(self, context: SinkWriterContext) -> None:
        """After a restore or restart: delete the data files earlier attempts of this job
        wrote and no snapshot references (their checkpoints never completed) — after this
        attempt's first commit, as the Delta sink does: under unaligned checkpoints a
        restored checkpoint's committables may still be on their way to this committer."""
        self._leftovers = context

    def _delete_leftovers(self, context: SinkWriterContext) -> None:
        access = self._table_access()
        orphans = orphan_data_files(
            access.data_file_paths(),
            str(context.job_id),
            int(context.attempt_number),
            access.referenced_file_paths(),
        )
        io = access.table().io
        for path in orphans:
            with contextlib.suppress(Exception):  # else left for remove_orphan_files
                io.delete(path)
        if orphans:
            log.info("Iceberg sink: deleted %d data files of aborted attempts", len(orphans))

    def _table_access(self) -> TableAccess:
        if self._access is None:
            self._access = TableAccess(self._config)
        return self._access

    def commit(self, committables: Sequence[Any]) -> None:
        for c in sorted(committables, key=lambda c: c.checkpoint_id):
            if not isinstance(c, CheckpointCommittables):
                raise TypeError(f"Iceberg committer: unexpected committable {type(c).__name__}")
            files = [f for result in c.committables for f in result.data_files]
            staged = [p for result in c.committables for p in result.staged]
            access = self._table_access()
            if self._config.equality_fields:
                done = apply_changes(access, c.job_id, c.checkpoint_id, staged)
                delete_staged(access, staged)  # applied now, or before
            else:
                done = access.commit(c.job_id, c.checkpoint_id, files)
            log.info(
                "Iceberg sink: checkpoint %s of job %s: %s (%d data files)",
                c.checkpoint_id,
                c.job_id,
                "committed" if done else "already in the table",
                len(files),
            )
        if self._leftovers is not None:
            context, self._leftovers = self._leftovers, None
            self._delete_leftovers(context)
