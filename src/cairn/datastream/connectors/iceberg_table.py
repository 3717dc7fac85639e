"""Access to an Iceberg table through pyiceberg: load or create it, check a stream's schema
against it, turn records into Arrow and into Parquet data files, commit data files.

Invariant: everything that touches pyiceberg (and the few of its internals the sink needs:
``_dataframe_to_data_files``, the writer ``Table.append`` itself uses, which names files,
lays out partitions, stamps Parquet field ids and computes column statistics; pinned by
``pyiceberg<0.13``) is here; the sink's decisions are in ``iceberg_commit``.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from cairn.common.typeinfo import RowTypeInfo
from cairn.datastream.connectors.iceberg_commit import (
    last_committed_checkpoint,
    partition_field,
    should_commit,
    snapshot_properties,
    write_uuid,
)

__all__ = ["IcebergSinkError", "IcebergTableConfig", "TableAccess"]


class IcebergSinkError(RuntimeError):
    """An Iceberg sink cannot write or commit (one line: the table and what is wrong)."""


@dataclass(frozen=True)
class IcebergTableConfig:
    """What the writers and the committer receive: the catalog (pyiceberg's properties), the
    table, the stream's row type (or ``None``: the table's columns) and, for a table the sink
    creates, its partition fields."""

    catalog_name: str
    catalog_properties: Mapping[str, str] = field(repr=False)
    table: str
    row_type: RowTypeInfo | None
    partition_by: tuple[str, ...] = ()
    rows_per_file: int = 1_000_000
    equality_fields: tuple[str, ...] = ()  # upsert by these columns (a changelog)
    table_properties: Mapping[str, str] = field(default_factory=dict)


def require_pyiceberg() -> None:
    try:
        import pyiceberg  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "the Iceberg sink writes through pyiceberg, which is not installed: "
            "pip install 'cairn[iceberg]'"
        ) from exc


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class TableAccess:
    """One worker's (or the driver's) handle on the table of ``config``."""

    def __init__(self, config: IcebergTableConfig) -> None:
        from pyiceberg.catalog import load_catalog

        self.config = config
        properties = dict(config.catalog_properties)
        properties.setdefault("type", "sql")
        try:
            self.catalog = load_catalog(config.catalog_name, **properties)
        except Exception as exc:
            raise IcebergSinkError(
                f"Iceberg sink: cannot open catalog {config.catalog_name!r}: {_one_line(exc)}"
            ) from exc
        self._table: Any = None

    # -- the table ----------------------------------------------------------------------------

    def table(self) -> Any:
        if self._table is None:
            from pyiceberg.exceptions import NoSuchTableError

            try:
                self._table = self.catalog.load_table(self.config.table)
            except NoSuchTableError:
                raise IcebergSinkError(
                    f"Iceberg sink: table {self.config.table!r} does not exist in catalog "
                    f"{self.config.catalog_name!r} (give the sink a row type to create it)"
                ) from None
        return self._table

    def create_or_check(self) -> None:
        """On the driver before the job starts: create the table from the row type (with its
        partition fields) if it does not exist, else check the row type against it."""
        from pyiceberg.exceptions import NoSuchTableError

        c = self.config
        try:
            self._table = self.catalog.load_table(c.table)
        except NoSuchTableError:
            if c.row_type is None:
                raise IcebergSinkError(
                    f"Iceberg sink: table {c.table!r} does not exist in catalog "
                    f"{c.catalog_name!r} and the sink has no row type to create it from "
                    "(Types.ROW_NAMED)"
                ) from None
            self._table = self._create()
            return
        if c.partition_by and [partition_text(f) for f in self._spec_fields()] != [
            partition_text(partition_field(p)) for p in c.partition_by
        ]:
            raise IcebergSinkError(
                f"Iceberg sink: table {c.table!r} is partitioned by "
                f"{[partition_text(f) for f in self._spec_fields()]}, the sink asks for "
                f"{list(c.partition_by)} (an existing table's partition spec is kept)"
            )
        if c.row_type is not None:
            self.check_schema(arrow_schema_of(c.row_type))

    def _spec_fields(self) -> list[tuple[str, str]]:
        table = self._table
        schema = table.schema()
        return [
            (str(f.transform), schema.find_column_name(f.source_id) or "?")
            for f in table.spec().fields
        ]

    def _create(self) -> Any:
        from pyiceberg.exceptions import TableAlreadyExistsError
        from pyiceberg.transforms import parse_transform

        c = self.config
        assert c.row_type is not None
        namespace = c.table.rsplit(".", 1)[0] if "." in c.table else ""
        if namespace:
            self.catalog.create_namespace_if_not_exists(namespace)
        schema = arrow_schema_of(c.row_type)
        try:
            table = self.catalog.create_table(
                c.table, schema=schema, properties=dict(c.table_properties)
            )
        except TableAlreadyExistsError:  # another run created it meanwhile
            return self.catalog.load_table(c.table)
        if c.partition_by:
            names = set(schema.names)
            with table.update_spec() as update:
                for text in c.partition_by:
                    transform, column = partition_field(text)
                    if column not in names:
                        raise IcebergSinkError(
                            f"Iceberg sink: partition field {text!r} names no column of "
                            f"{sorted(names)}"
                        )
                    name = column if transform == "identity" else None
                    update.add_field(column, parse_transform(transform), name)
            table = self.catalog.load_table(c.table)
        return table

    def check_schema(self, stream: pa.Schema) -> None:
        """Refuse, in one line, a stream whose columns the table cannot take as they are."""
        from pyiceberg.io.pyarrow import _check_pyarrow_schema_compatible

        table = self.table()
        columns = [f.name for f in table.schema().fields]
        missing = [n for n in columns if n not in stream.names]
        extra = [n for n in stream.names if n not in columns]
        name = self.config.table
        if missing or extra:
            raise IcebergSinkError(
                f"Iceberg sink: the stream's columns {stream.names} do not match table "
                f"{name!r} {columns}"
                + (f"; missing: {missing}" if missing else "")
                + (f"; not in the table: {extra}" if extra else "")
            )
        try:
            _check_pyarrow_schema_compatible(
                table.schema(), stream, format_version=table.metadata.format_version
            )
        except ValueError:
            wanted = {f.name: str(f.field_type) for f in table.schema().fields}
            given = {f.name: str(f.type) for f in stream}
            diff = ", ".join(f"{n}: {given[n]} for {wanted[n]}" for n in columns)
            raise IcebergSinkError(
                f"Iceberg sink: the stream's column types do not fit table {name!r} "
                f"(stream type for table type: {diff})"
            ) from None

    # -- writing -----------------------------------------------------------------------------

    def write_files(self, rows: pa.Table, write_uuid: uuid.UUID, counter: Any) -> list[Any]:
        """Parquet data files of ``rows`` in the table's location (partitioned as its spec
        says), not yet part of any snapshot: pyiceberg ``DataFile``s."""
        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        table = self.table()
        return list(
            _dataframe_to_data_files(
                table_metadata=table.metadata,
                df=rows,
                io=table.io,
                write_uuid=write_uuid,
                counter=counter,
            )
        )

    def data_file_paths(self) -> list[str]:
        """Every file under the table's ``data/`` folder, committed or not."""
        from pyarrow.fs import FileSelector, FileType

        table = self.table()
        location = table.location().rstrip("/") + "/data"
        scheme, netloc, path = table.io.parse_location(location)
        fs = table.io.fs_by_scheme(scheme, netloc)
        infos = fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
        prefix = f"{scheme}://" if scheme != "file" else ""
        return [prefix + i.path for i in infos if i.type == FileType.File]

    def referenced_file_paths(self) -> list[str]:
        """The data and delete files any snapshot of the table (refreshed) references."""
        table = self.table()
        table.refresh()
        if not table.metadata.snapshots:
            return []
        return [str(p) for p in table.inspect.all_files().column("file_path").to_pylist()]

    def needs_commit(self, job_id: str, checkpoint_id: int) -> bool:
        """Whether the table (refreshed) does not hold ``checkpoint_id`` of ``job_id`` yet."""
        from pyiceberg.table.snapshots import ancestors_of

        table = self.table()
        table.refresh()
        summaries = (
            dict(s.summary.additional_properties) if s.summary is not None else {}
            for s in ancestors_of(table.current_snapshot(), table.metadata)
        )
        return should_commit(last_committed_checkpoint(summaries, job_id), checkpoint_id)

    def commit(self, job_id: str, checkpoint_id: int, data_files: Sequence[Any]) -> bool:
        """Append ``data_files`` as one snapshot recording ``checkpoint_id`` of ``job_id``,
        unless the table already holds that checkpoint of the job; whether it committed.
        A commit that lost a race with another writer of the table is tried again on the
        refreshed table (and found done if it was)."""
        from pyiceberg.exceptions import CommitFailedException

        for attempt in range(4):
            if not self.needs_commit(job_id, checkpoint_id) or not data_files:
                return False
            transaction = self.table().transaction()
            properties = snapshot_properties(job_id, checkpoint_id)
            with transaction.update_snapshot(snapshot_properties=properties).fast_append() as a:
                for data_file in data_files:
                    a.append_data_file(data_file)
            try:
                transaction.commit_transaction()
                return True
            except CommitFailedException:
                if attempt == 3:
                    raise
        raise AssertionError("unreachable")


def partition_text(f: tuple[str, str]) -> str:
    """``day(ts)``; an identity field is its column.

    >>> partition_text(("identity", "k")), partition_text(("day", "ts"))
    ('k', 'day(ts)')
    """
    transform, column = f
    return column if transform == "identity" else f"{transform}({column})"


def arrow_schema_of(row_type: RowTypeInfo) -> pa.Schema:
    from cairn.datastream.formats.arrow import arrow_schema

    return arrow_schema(row_type)


class RowsToArrow:
    """Records (``Row``s, tuples or lists in column order, or dicts by column name) into an
    Arrow table of the row type's columns, or of the table's own columns without one."""

    def __init__(self, row_type: RowTypeInfo | None, table_schema: pa.Schema) -> None:
        from cairn.datastream.formats.arrow import ArrowRows

        self._codec = ArrowRows(row_type) if row_type is not None else None
        self.schema = self._codec.schema if self._codec is not None else table_schema
        self.names = list(self.schema.names)

    def table(self, records: Sequence[Any]) -> pa.Table:
        names = self.names
        values = [tuple(r[n] for n in names) if isinstance(r, dict) else tuple(r) for r in records]
        if self._codec is not None:
            return self._codec.table(values)
        columns = list(zip(*values, strict=True)) if values else [() for _ in names]
        return pa.Table.from_arrays(
            [pa.array(col, type=f.type) for col, f in zip(columns, self.schema, strict=True)],
            schema=self.schema,
        )


def new_write_ids(job_id: str, attempt: int) -> tuple[uuid.UUID, Any]:
    """A writer's file-name uuid and counter (names unique across writers and attempts, and
    recognisable as the attempt's: ``iceberg_commit.write_uuid``)."""
    return write_uuid(job_id, attempt, uuid.uuid4().hex), itertools.count(0)
