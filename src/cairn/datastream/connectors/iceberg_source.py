"""An Apache Iceberg source (``IcebergSource``, Flink's in Python): a table's snapshot, then
the rows each new append snapshot adds (bounded and continuous modes), on pyiceberg.

Invariant: one split reads the table in a fixed order — a snapshot's whole table (its data
files sorted by path), then each later snapshot of the current snapshot's lineage, oldest
first, by the data files it appended (sorted) — and its state ``(snapshot id, whole, done,
file index, row offset)`` names the next row to emit in that order (``done``: that snapshot
was read whole, the next one is its child), so a restore resumes with no row lost or
repeated. A snapshot that overwrites or deletes rows cannot be read as appends and fails the
source naming it; a ``replace`` (compaction: the same rows rewritten) adds nothing to read.

>>> s = IcebergSource.for_row_data("db.t", {"uri": "sqlite:////tmp/c.db"}).streaming(True)
>>> s = s.start_snapshot_id(42).build()
>>> s.is_bounded(), s.create_splits(2)
(False, [IcebergSplit(snapshot_id=42, whole=False, done=False, file_index=0, row_offset=0)])
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cairn.api.connectors import Source, SourceReader, SourceReaderContext
from cairn.datastream.formats.arrow import rows_from
from cairn.ids import CheckpointId

__all__ = [
    "IcebergSource",
    "IcebergSourceBuilder",
    "IcebergSplit",
    "appends_only",
    "next_snapshot",
]

MONITOR_INTERVAL_MS = 60_000  # Flink's ``monitor-interval`` default


@dataclass(frozen=True)
class IcebergSplit:
    """The next row to read: of snapshot ``snapshot_id``'s whole table (``whole``) or of the
    files it appended, at ``file_index`` (sorted paths) and ``row_offset`` in that file; with
    ``done`` the snapshot was read, next comes its child. ``snapshot_id`` ``None``: the
    current snapshot when reading starts (with ``done``: before the table's first one)."""

    snapshot_id: int | None
    whole: bool
    done: bool = False
    file_index: int = 0
    row_offset: int = 0


def next_snapshot(
    lineage: Sequence[tuple[int, int | None]], after: int | None, table: str
) -> int | None:
    """The snapshot after ``after`` in ``lineage`` (``(id, parent id)`` of the current
    snapshot and its ancestors, newest first): ``None`` if ``after`` is the current one;
    the first snapshot if ``after`` is ``None``. Refuses an ``after`` the lineage lost.

    >>> lineage = [(7, 5), (5, 3), (3, None)]
    >>> [next_snapshot(lineage, after, "t") for after in (3, 7, None)]
    [5, None, 3]
    >>> next_snapshot(lineage, 4, "db.t")
    Traceback (most recent call last):
    ValueError: Iceberg snapshot 4 is not an ancestor of table db.t's current snapshot 7 ...
    """
    if not lineage:
        return None
    if after is None:
        return lineage[-1][0]
    child = None
    for snapshot_id, _parent in lineage:
        if snapshot_id == after:
            return child
        child = snapshot_id
    raise ValueError(
        f"Iceberg snapshot {after} is not an ancestor of table {table}'s current snapshot "
        f"{lineage[0][0]} (rolled back or expired): cannot read on from it"
    )


def appends_only(snapshot_id: int, operation: str, table: str) -> bool:
    """Whether a snapshot's added data files are new rows: ``append`` yes, ``replace``
    (the same rows rewritten) no; ``overwrite`` and ``delete`` change rows: refused.

    >>> appends_only(1, "append", "t"), appends_only(2, "replace", "t")
    (True, False)
    >>> appends_only(3, "overwrite", "db.t")
    Traceback (most recent call last):
    ValueError: Iceberg snapshot 3 of table db.t is an 'overwrite', not an append: ...
    """
    if operation == "append":
        return True
    if operation == "replace":
        return False
    raise ValueError(
        f"Iceberg snapshot {snapshot_id} of table {table} is an {operation!r}, not an append: "
        "the incremental source reads appended rows only"
    )


class IcebergSource(Source):
    """Rows of an Iceberg table as named ``Row``s: bounded (one snapshot's table) or
    streaming (then each new append snapshot's rows, checked every ``monitor_interval``).
    Catalog properties as the ``IcebergSink``'s (a SQL catalog by default)."""

    def __init__(
        self,
        table: str,
        catalog: Mapping[str, str],
        catalog_name: str,
        streaming: bool,
        snapshot_id: int | None,
        whole: bool,
        monitor_interval_ms: int,
    ) -> None:
        self.table = table
        self.catalog = dict(catalog)
        self.catalog_name = catalog_name
        self.streaming = streaming
        self.snapshot_id = snapshot_id
        self.whole = whole
        self.monitor_interval_ms = monitor_interval_ms

    @staticmethod
    def for_row_data(
        table: str, catalog: Mapping[str, str], catalog_name: str = "cairn"
    ) -> IcebergSourceBuilder:
        """A builder for table ``namespace.table`` of the catalog with these properties."""
        if not isinstance(table, str) or not table.strip():
            raise ValueError(f"Iceberg source: table must be 'namespace.table', got {table!r}")
        return IcebergSourceBuilder(table, dict(catalog), catalog_name)

    def is_bounded(self) -> bool:
        return not self.streaming

    def create_splits(self, parallelism: int) -> list[IcebergSplit]:
        return [IcebergSplit(self.snapshot_id, self.whole)]

    def create_reader(
        self, splits: Sequence[Any], context: SourceReaderContext
    ) -> IcebergSourceReader:
        return IcebergSourceReader(self, list(splits))


class IcebergSourceBuilder:
    """Flink's ``IcebergSource.forRowData()...build()`` in Python's spelling."""

    def __init__(self, table: str, catalog: dict[str, str], catalog_name: str) -> None:
        self._args = (table, catalog, catalog_name)
        self._streaming = False
        self._snapshot_id: int | None = None
        self._whole = True
        self._interval_ms = MONITOR_INTERVAL_MS

    def streaming(self, streaming: bool) -> IcebergSourceBuilder:
        """Continuous: after the starting snapshot, each new append snapshot's rows."""
        self._streaming = bool(streaming)
        return self

    def snapshot_id(self, snapshot_id: int) -> IcebergSourceBuilder:
        """Read this snapshot's table (bounded) instead of the current one."""
        self._snapshot_id, self._whole = int(snapshot_id), True
        return self

    def start_snapshot_id(self, snapshot_id: int) -> IcebergSourceBuilder:
        """Streaming, Flink's ``INCREMENTAL_FROM_SNAPSHOT_ID``: the rows this snapshot and
        each later one appended (no table scan before)."""
        self._snapshot_id, self._whole = int(snapshot_id), False
        return self

    def monitor_interval_ms(self, ms: int) -> IcebergSourceBuilder:
        """How often a streaming source looks for new snapshots (Flink: 60 s)."""
        if ms < 1:
            raise ValueError(f"monitor interval must be positive, got {ms} ms")
        self._interval_ms = int(ms)
        return self

    def build(self) -> IcebergSource:
        if not self._streaming and not self._whole:
            raise ValueError("start_snapshot_id is for streaming sources (use snapshot_id)")
        table, catalog, name = self._args
        return IcebergSource(
            table, catalog, name, self._streaming, self._snapshot_id, self._whole,
            self._interval_ms,
        )  # fmt: skip


class IcebergSourceReader(SourceReader):
    """Reads the one split (other subtasks have none and end at once, or idle)."""

    def __init__(self, source: IcebergSource, splits: list[IcebergSplit]) -> None:
        self._source = source
        self._split: IcebergSplit | None = splits[0] if splits else None
        self._table: Any = None
        self._tasks: list[Any] | None = None  # of the split's snapshot, once listed
        self._current: Any = None  # the rows of the file at file_index, once read
        self._next_check = 0.0

    def _load(self) -> Any:
        if self._table is None:
            from pyiceberg.catalog import load_catalog

            properties = dict(self._source.catalog)
            properties.setdefault("type", "sql")
            catalog = load_catalog(self._source.catalog_name, **properties)
            self._table = catalog.load_table(self._source.table)
        else:
            self._table.refresh()
        return self._table

    def _list(self, split: IcebergSplit) -> tuple[IcebergSplit, list[Any]] | None:
        """The split (its snapshot resolved) and its files' scan tasks, sorted; ``None`` if
        there is no new snapshot yet."""
        from pyiceberg.table import FileScanTask
        from pyiceberg.table.snapshots import ancestors_of

        table = self._load()
        name = self._source.table
        current = table.current_snapshot()
        if split.snapshot_id is None and not split.done:
            if current is None:  # an empty table: nothing to scan
                return IcebergSplit(None, False), []
            split = replace(split, snapshot_id=current.snapshot_id)
        if split.done:
            lineage = [
                (s.snapshot_id, s.parent_snapshot_id) for s in ancestors_of(current, table.metadata)
            ]
            following = next_snapshot(lineage, split.snapshot_id, name)
            if following is None:
                return None
            split = IcebergSplit(following, False)
        assert split.snapshot_id is not None
        if split.whole:
            tasks = list(table.scan(snapshot_id=split.snapshot_id).plan_files())
            return split, sorted(tasks, key=lambda t: t.file.file_path)
        snapshot = table.metadata.snapshot_by_id(split.snapshot_id)
        if snapshot is None:
            raise ValueError(f"Iceberg table {name} has no snapshot {split.snapshot_id}")
        operation = snapshot.summary.operation.value if snapshot.summary else "append"
        if not appends_only(snapshot.snapshot_id, operation, name):
            return split, []
        files = [
            entry.data_file
            for manifest in snapshot.manifests(table.io)
            if manifest.added_snapshot_id == snapshot.snapshot_id
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
            if entry.snapshot_id == snapshot.snapshot_id and entry.status.name == "ADDED"
        ]
        tasks = [FileScanTask(f) for f in sorted(files, key=lambda f: f.file_path)]
        return split, tasks

    def _read(self, task: Any) -> Any:
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan

        table = self._table
        return ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table([task])

    def poll_batch(self, max_records: int) -> list[Any] | None:
        split = self._split
        if split is None:
            return None if self._source.streaming is False else []
        if self._tasks is None:
            if time.monotonic() < self._next_check:
                return []
            listed = self._list(split)
            if listed is None:
                self._next_check = time.monotonic() + self._source.monitor_interval_ms / 1000
                return []
            split, self._tasks = listed
            self._split = split
        if split.file_index >= len(self._tasks):
            self._tasks, self._current = None, None
            if not self._source.streaming:
                self._split = None
                return None
            self._split = IcebergSplit(split.snapshot_id, False, done=True)
            return []
        if self._current is None:
            self._current = self._read(self._tasks[split.file_index])
        data = self._current
        out, end = rows_from(data, split.row_offset, max_records)
        if end >= data.num_rows:
            self._split = replace(split, file_index=split.file_index + 1, row_offset=0)
            self._current = None
        else:
            self._split = replace(split, row_offset=end)
        return out

    def available_in_s(self) -> float | None:
        return max(0.0, self._next_check - time.monotonic()) if self._tasks is None else None

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[Any]:
        return [] if self._split is None else [self._split]
