"""An exactly-once Delta Lake sink (``DeltaSink``) on delta-rs (``pip install cairn[delta]``).

Invariant: records reach Parquet files in the table's folder that no Delta version refers to
until the checkpoint that covers them completes. The sink has a global committer (as the
Iceberg sink, Flink's SinkV2 shape): at each barrier every writer sends the descriptions of
its closed files to the one committer subtask, which keeps them in the checkpoint and, when
it completes, adds them all in one Delta commit with the ``txn`` action ``(app id,
checkpoint id)`` that makes a replay after a restore a no-op (the rules are in
``delta_protocol``). Files of aborted attempts are deleted once a restarted job has
committed a checkpoint of its own. With upsert keys the records are a changelog, staged as
Parquet under ``_cairn_staging/`` and applied by one Delta MERGE per checkpoint
(``delta_merge``).

>>> from cairn.common import Types
>>> sink = (DeltaSink.for_row_data("/tmp/t", Types.ROW_NAMED(["k", "n"],
...         [Types.STRING(), Types.LONG()])).with_app_id("orders-job").build())
>>> sink.table_path, sink.app_id
('/tmp/t', 'orders-job')
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import posixpath
import time
from collections.abc import Sequence
from typing import Any

from fsspec import AbstractFileSystem

from cairn.api.connectors import (
    CheckpointCommittables,
    Committer,
    Sink,
    SinkWriter,
    SinkWriterContext,
)
from cairn.common.exceptions import ConfigurationError
from cairn.common.storage_options import url_to_fresh_fs
from cairn.common.typeinfo import RowTypeInfo
from cairn.datastream.connectors.delta_merge import (
    DELETE_COLUMN,
    change_rows,
    last_change_per_key,
    merge_predicate,
)
from cairn.datastream.connectors.delta_protocol import (
    DataFile,
    DeltaWriteResult,
    attempt_dir,
    attempt_file_prefix,
    data_file_name,
    fsspec_options,
    needs_commit,
    orphan_data_files,
    schema_mismatch,
)
from cairn.datastream.formats.arrow import ArrowRows, arrow_schema
from cairn.ids import CheckpointId
from cairn.runtime.operators.sinks import END_OF_INPUT_CHECKPOINT

__all__ = ["DeltaCommitter", "DeltaSink", "DeltaSinkBuilder", "DeltaSinkWriter"]

log = logging.getLogger(__name__)

ROWS_PER_FILE = 1_000_000  # a file rolls within a checkpoint interval past this many rows
COMMIT_ATTEMPTS = 4  # a commit that lost a race with another writer is tried again
TARGET_FILE_SIZE = "delta.targetFileSize"
DEFAULT_TARGET_FILE_SIZE = 100 << 20  # delta-rs's


def rows_per_part(num_rows: int, arrow_bytes: int, target_bytes: int) -> int:
    """Rows per data file so that none is larger than ``target_bytes`` (Arrow's in-memory
    size bounds the Parquet file's from above).

    >>> rows_per_part(1000, 4000, 1000), rows_per_part(1000, 400, 1000), rows_per_part(0, 0, 9)
    (250, 1000, 1)
    """
    if num_rows == 0 or arrow_bytes <= target_bytes:
        return max(1, num_rows)
    return max(1, num_rows * target_bytes // arrow_bytes)


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError as e:  # pragma: no cover - the extra is installed by .ci/run
        raise ImportError("DeltaSink needs deltalake: pip install 'cairn[delta]'") from e
    return deltalake


def delta_columns(schema: Any) -> list[tuple[str, str]]:
    """(name, Delta type as JSON text) of a Delta schema's top-level fields."""
    fields = json.loads(schema.to_json())["fields"]
    return [
        (f["name"], t if isinstance(t := f["type"], str) else json.dumps(t, sort_keys=True))
        for f in fields
    ]


def table_file_paths(table: Any) -> list[str]:
    """The paths (relative to the root) of the files a table's current version refers to."""
    return [str(p) for p in table.get_add_actions(flatten=True).column("path").to_pylist()]


class DeltaSink(Sink):
    """Writes rows (``Types.ROW_NAMED``) into a Delta table, exactly once with checkpointing:
    one Delta version per completed checkpoint. The table is created on submission if it
    does not exist; an existing table must have the stream's columns. Build it with
    :meth:`for_row_data`; the app id of the ``txn`` actions defaults to ``cairn-<job id>``.
    With ``upsert_keys`` it takes a changelog (``Row``s with their ``RowKind``) keyed by
    them and merges it into the table."""

    global_committer = True

    def __init__(
        self,
        table_path: str,
        row_type: RowTypeInfo,
        app_id: str | None,
        storage_options: dict[str, str] | None,
        upsert_keys: tuple[str, ...] = (),
        table_properties: dict[str, str] | None = None,
    ) -> None:
        self.table_path = table_path.rstrip("/")
        self.table_properties = dict(table_properties or {})
        self.upsert_keys = upsert_keys
        self.row_type = row_type
        self.app_id = app_id
        self.storage_options = dict(storage_options or {})

    @staticmethod
    def for_row_data(table_path: str, row_type: RowTypeInfo) -> DeltaSinkBuilder:
        """A builder for a sink of ``row_type`` rows into the table at ``table_path``."""
        if not isinstance(row_type, RowTypeInfo):
            raise TypeError(f"DeltaSink needs Types.ROW_NAMED(...) rows, got {row_type!r}")
        return DeltaSinkBuilder(table_path, row_type)

    def check_job(self, settings: Any) -> None:
        """Create the table if it is missing; refuse one whose columns differ."""
        ensure_table(self.table_path, self.row_type, self.storage_options, self.table_properties)

    def create_writer(
        self, context: SinkWriterContext, restored_state: Sequence[Any]
    ) -> DeltaSinkWriter:
        return DeltaSinkWriter(self, context)

    def create_committer(self) -> DeltaCommitter:
        return DeltaCommitter(self)

    def resolved_app_id(self, job_id: str) -> str:
        return self.app_id or f"cairn-{job_id}"


class DeltaSinkBuilder:
    """Flink's ``DeltaSink.forRowData(...)...build()`` in Python's spelling."""

    def __init__(self, table_path: str, row_type: RowTypeInfo) -> None:
        self._path = table_path
        self._row_type = row_type
        self._app_id: str | None = None
        self._storage: dict[str, str] = {}
        self._keys: tuple[str, ...] = ()
        self._properties: dict[str, str] = {}

    def with_table_properties(self, properties: dict[str, str]) -> DeltaSinkBuilder:
        """Delta table properties of a table the sink creates (an existing table's are
        kept): ``delta.targetFileSize`` (no data file of the sink is larger; compaction's
        target), ``delta.enableChangeDataFeed``..."""
        self._properties = {str(k): str(v) for k, v in properties.items()}
        return self

    def with_app_id(self, app_id: str) -> DeltaSinkBuilder:
        """The ``txn`` app id (default ``cairn-<job id>``): keep it for a job restored from
        a savepoint under a new job id only if its checkpoint ids go on growing."""
        if not app_id:
            raise ValueError("app_id must not be empty")
        self._app_id = app_id
        return self

    def with_storage_options(self, options: dict[str, str]) -> DeltaSinkBuilder:
        """delta-rs storage options (``AWS_ENDPOINT_URL``...) for an object store."""
        self._storage = dict(options)
        return self

    def with_upsert_keys(self, *keys: str) -> DeltaSinkBuilder:
        """Merge a changelog keyed by these columns (key the stream by them) instead of
        appending: ``+I``/``+U`` insert or replace a key's row, ``-D`` deletes it."""
        unknown = [k for k in keys if k not in self._row_type.get_field_names()]
        if not keys or unknown:
            raise ValueError(
                f"upsert keys must be columns of {self._row_type.get_field_names()}, got {keys}"
            )
        self._keys = tuple(keys)
        return self

    def build(self) -> DeltaSink:
        return DeltaSink(
            self._path, self._row_type, self._app_id, self._storage, self._keys, self._properties
        )


def ensure_table(
    path: str, row_type: RowTypeInfo, storage: dict[str, str], properties: dict[str, str]
) -> None:
    dl = _deltalake()
    schema = dl.Schema.from_arrow(arrow_schema(row_type))
    table = dl.DeltaTable.create(
        path,
        schema,
        mode="ignore",
        storage_options=storage or None,
        configuration=dict(properties) or None,
    )
    problem = schema_mismatch(delta_columns(table.schema()), delta_columns(schema), path)
    if problem is not None:
        raise ConfigurationError(problem)


class DeltaSinkWriter(SinkWriter):
    """Buffers a subtask's rows; at a barrier writes them as Parquet into the table's folder
    (durable before the acknowledgement) and hands their descriptions to the committer."""

    def __init__(self, sink: DeltaSink, context: SinkWriterContext) -> None:
        self._sink = sink
        self._context = context
        self._app_id = sink.resolved_app_id(str(context.job_id))
        self._rows = ArrowRows(sink.row_type)
        self._fs, self._root = url_to_fresh_fs(
            sink.table_path, fsspec_options(sink.table_path, sink.storage_options)
        )
        self._buffer: list[Any] = []
        self._files: list[DataFile] = []  # written, not yet handed to the committer
        self._seq = 0
        self._checkpoint = 0  # the checkpoint the next file belongs to (named after)
        self._target: int | None = None  # delta.targetFileSize, read at the first roll
        folder = attempt_dir(self._app_id, str(context.job_id), int(context.attempt_number))
        self._staging = f"{folder}/changes"

    def write(self, record: Any) -> None:
        self._buffer.append(record)
        if len(self._buffer) >= ROWS_PER_FILE:
            self._roll()

    def write_batch(self, records: Sequence[Any]) -> None:
        self._buffer.extend(records)
        if len(self._buffer) >= ROWS_PER_FILE:
            self._roll()

    def _roll(self) -> None:
        if not self._buffer:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self._buffer
        self._buffer = []
        staged = bool(self._sink.upsert_keys)
        if staged:
            changes, deletes = change_rows(rows)
            table = self._rows.table(changes).append_column(DELETE_COLUMN, pa.array(deletes))
            self._fs.makedirs(posixpath.join(self._root, self._staging), exist_ok=True)
            parts = [table]  # one staged file: the MERGE reads them all anyway
        else:
            table = self._rows.table(rows)
            per_file = rows_per_part(table.num_rows, table.nbytes, self._target_size())
            parts = [table.slice(i, per_file) for i in range(0, table.num_rows, per_file)]
        c = self._context
        for part in parts:
            name = data_file_name(
                self._app_id, str(c.job_id), int(c.attempt_number), int(c.subtask_index),
                self._checkpoint, self._seq,
            )  # fmt: skip
            self._seq += 1
            if staged:
                name = f"{self._staging}/{name}"  # applied by the MERGE, never added as it is
            out = io.BytesIO()
            pq.write_table(part, out)
            data = out.getvalue()
            self._fs.pipe_file(posixpath.join(self._root, name), data)
            modified = int(time.time() * 1000)
            self._files.append(DataFile(name, len(data), modified, part.num_rows))

    def _target_size(self) -> int:
        if self._target is None:
            configured = self._sink.table_properties.get(TARGET_FILE_SIZE)
            if configured is None:
                table = _deltalake().DeltaTable(
                    self._sink.table_path, storage_options=self._sink.storage_options or None
                )
                configured = table.metadata().configuration.get(TARGET_FILE_SIZE)
            self._target = int(configured) if configured else DEFAULT_TARGET_FILE_SIZE
        return self._target

    def prepare_commit(self, checkpoint_id: CheckpointId) -> list[DeltaWriteResult]:
        self._checkpoint = int(checkpoint_id)
        self._roll()
        self._checkpoint = int(checkpoint_id) + 1
        if not self._files:
            return []
        files, self._files = tuple(self._files), []
        return [DeltaWriteResult(int(self._context.subtask_index), files)]

    def close(self) -> None:
        # Files no checkpoint will commit (written since the last barrier): delete them.
        for f in self._files:
            with contextlib.suppress(Exception):
                self._fs.rm_file(posixpath.join(self._root, f.path))
        self._files = []


class DeltaCommitter(Committer):
    """Commits each checkpoint's files, from all writers, as one Delta version (the sink's
    one committer subtask). An end-of-input commit (no checkpoint follows it) carries no
    ``txn`` action. Other attempts' leftovers are deleted after this attempt's first commit
    (when every restored committable, in-flight ones of an unaligned checkpoint too, has
    reached the table)."""

    def __init__(self, sink: DeltaSink) -> None:
        self._sink = sink
        self._fs: AbstractFileSystem
        self._fs, self._root = url_to_fresh_fs(
            sink.table_path, fsspec_options(sink.table_path, sink.storage_options)
        )
        self._leftovers: SinkWriterContext | None = None

    def commit(self, committables: Sequence[Any]) -> None:
        for c in sorted(committables, key=lambda c: c.checkpoint_id):
            if not isinstance(c, CheckpointCommittables):
                raise TypeError(f"Delta committer: unexpected committable {type(c).__name__}")
            self._commit_checkpoint(c)
        if self._leftovers is not None:
            context, self._leftovers = self._leftovers, None
            self._delete_leftovers(context)

    def _commit_checkpoint(self, c: CheckpointCommittables) -> None:
        files = [f for result in c.committables for f in result.files]
        app_id = self._sink.resolved_app_id(str(c.job_id))
        final = c.checkpoint_id == END_OF_INPUT_CHECKPOINT
        checkpoint = None if final else int(c.checkpoint_id)
        from deltalake.exceptions import CommitFailedError

        for attempt in range(COMMIT_ATTEMPTS):
            done = checkpoint is not None and not needs_commit(
                self._table().transaction_version(app_id), checkpoint
            )
            if not files or done:  # a checkpoint without records makes no version
                break
            try:
                if self._sink.upsert_keys:
                    self._merge_files(files, checkpoint, app_id, str(c.job_id))
                else:
                    self._commit_files(files, checkpoint, app_id, str(c.job_id))
                break
            except CommitFailedError:
                # A concurrent commit (a compaction removing files the MERGE read) won:
                # merge again on the new version, unless this checkpoint is in it.
                if attempt == COMMIT_ATTEMPTS - 1:
                    raise
                log.info("Delta sink: checkpoint %s lost a commit race, again", c.checkpoint_id)
        if self._sink.upsert_keys:  # the staged changes are applied (or were before)
            for f in files:
                with contextlib.suppress(FileNotFoundError):
                    self._fs.rm_file(posixpath.join(self._root, f.path))
        log.info(
            "Delta sink: checkpoint %s of job %s: %s (%d files)",
            "end of input" if final else c.checkpoint_id,
            c.job_id,
            "already in the table" if done else "committed",
            len(files),
        )

    def _properties(self, checkpoint_id: int | None, app_id: str, job_id: str, files: int) -> Any:
        dl = _deltalake()
        txns = [] if checkpoint_id is None else [dl.Transaction(app_id, checkpoint_id)]
        metadata = {"cairn.checkpoint": str(checkpoint_id), "cairn.job": job_id}
        if not self._sink.upsert_keys:  # a MERGE's own metrics count the files it adds
            metadata["cairn.files"] = str(files)
        return dl.CommitProperties(app_transactions=txns, custom_metadata=metadata)

    def _merge_files(
        self, files: list[DataFile], checkpoint_id: int | None, app_id: str, job_id: str
    ) -> None:
        """One MERGE of the staged changes, in the writers' order, last change per key."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        parts = []
        for f in files:
            with self._fs.open(posixpath.join(self._root, f.path), "rb") as stream:
                parts.append(pq.read_table(stream))
        keys = self._sink.upsert_keys
        changes = last_change_per_key(pa.concat_tables(parts), keys)
        deleted = f"s.`{DELETE_COLUMN}`"
        (
            self._table()
            .merge(
                changes,
                merge_predicate(keys),
                source_alias="s",
                target_alias="t",
                commit_properties=self._properties(checkpoint_id, app_id, job_id, 0),
            )
            .when_matched_delete(deleted)
            .when_matched_update_all(f"NOT {deleted}", except_cols=[DELETE_COLUMN])
            .when_not_matched_insert_all(f"NOT {deleted}", except_cols=[DELETE_COLUMN])
            .execute()
        )

    def _table(self) -> Any:
        return _deltalake().DeltaTable(
            self._sink.table_path, storage_options=self._sink.storage_options or None
        )

    def _commit_files(
        self, files: list[DataFile], checkpoint_id: int | None, app_id: str, job_id: str
    ) -> None:
        from deltalake.transaction import AddAction

        table = self._table()
        actions = [
            AddAction(
                f.path,
                f.size,
                {},
                f.modification_time,
                True,
                json.dumps({"numRecords": f.num_records}),
            )
            for f in files
        ]
        table.create_write_transaction(
            actions,
            mode="append",
            schema=table.schema(),
            commit_properties=self._properties(checkpoint_id, app_id, job_id, len(files)),
        )

    def abort_leftovers(self, context: SinkWriterContext) -> None:
        """After a restore or restart: delete this app's staged changes and unreferenced data
        files of other attempts, after this attempt's first commit (see the class)."""
        self._leftovers = context

    def _delete_leftovers(self, context: SinkWriterContext) -> None:
        app_id = self._sink.resolved_app_id(str(context.job_id))
        current = attempt_dir(app_id, str(context.job_id), int(context.attempt_number))
        base = posixpath.join(self._root, posixpath.dirname(current))
        if self._fs.exists(base):
            for folder in self._fs.ls(base, detail=False):
                if posixpath.basename(folder.rstrip("/")) != posixpath.basename(current):
                    self._fs.rm(folder, recursive=True)
        names = [posixpath.basename(p) for p in self._fs.ls(self._root, detail=False)]
        prefix = attempt_file_prefix(app_id, str(context.job_id), int(context.attempt_number))
        in_table = table_file_paths(self._table())
        for name in orphan_data_files(names, app_id, prefix, in_table):
            self._fs.rm_file(posixpath.join(self._root, name))
