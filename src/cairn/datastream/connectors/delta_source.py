"""A Delta Lake source (``DeltaSource``): a table's snapshot, then the rows its new versions
append (Flink's Delta connector's bounded and continuous modes), on delta-rs.

Invariant: one split reads the table in a fixed order — a snapshot (every file of one
version, sorted by path), then each later version's added files (sorted) — and its state
``(version, snapshot, file index, row offset)`` names the next row to emit in that order,
so a restore resumes with no row lost or repeated. A compaction's version (every action
``dataChange = false``: OPTIMIZE) adds no rows and is skipped; a version that removes files
otherwise (a MERGE or DELETE rewrote rows) cannot be read as appends and fails the source
naming it. With ``change_data_feed()`` the versions are read from the table's change data
feed instead (``_change_type`` as each ``Row``'s ``RowKind``: updates and deletes too), one
version at a time, its state the same ``(version, row offset)``.

>>> s = DeltaSource.for_continuous_row_data("/tmp/t").starting_version(3).build()
>>> s.is_bounded(), s.create_splits(2)
(False, [DeltaSplit(version=3, snapshot=False, file_index=0, row_offset=0)])
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from cairn.api.connectors import Source, SourceReader, SourceReaderContext
from cairn.common.storage_options import url_to_fresh_fs
from cairn.common.types import Row, RowKind
from cairn.datastream.connectors.delta_protocol import fsspec_options
from cairn.datastream.formats.arrow import rows_from
from cairn.ids import CheckpointId

__all__ = [
    "CHANGE_KINDS",
    "DeltaSource",
    "DeltaSourceBuilder",
    "DeltaSplit",
    "added_files",
    "change_rows_of",
    "rewrites_only",
]

_CHANGES = "<change data feed>"  # the one "file" of a version read as changes


@dataclass(frozen=True)
class DeltaSplit:
    """The next row to read: of ``version``'s snapshot (``snapshot``) or of the files that
    version added, at ``file_index`` (sorted paths) and ``row_offset`` in that file.
    ``version`` -1: the snapshot of the latest version when reading starts."""

    version: int
    snapshot: bool
    file_index: int = 0
    row_offset: int = 0


def added_files(before: Sequence[str], after: Sequence[str], version: int) -> list[str]:
    """The files a version added (sorted); refuses a version that removed any.

    >>> added_files(["a"], ["a", "c", "b"], 4)
    ['b', 'c']
    >>> added_files(["a", "b"], ["c"], 5)
    Traceback (most recent call last):
    ValueError: Delta version 5 removed 2 files (MERGE, DELETE, OPTIMIZE): only appends are read
    """
    removed = set(before) - set(after)
    if removed:
        raise ValueError(
            f"Delta version {version} removed {len(removed)} files (MERGE, DELETE,"
            f" OPTIMIZE): only appends are read"
        )
    return sorted(set(after) - set(before))


def rewrites_only(commit: Sequence[dict[str, Any]]) -> bool:
    """Whether a Delta commit's actions (one JSON object a line of its log file) only
    rearrange files — its ``add`` and ``remove`` actions all ``dataChange = false``, as an
    OPTIMIZE writes them — so it changes no row.

    >>> rewrites_only([{"commitInfo": {}}, {"add": {"path": "b", "dataChange": False}},
    ...                {"remove": {"path": "a", "dataChange": False}}])
    True
    >>> rewrites_only([{"add": {"path": "b", "dataChange": True}}]), rewrites_only([{}])
    (False, False)
    """
    files = [a["add"] if "add" in a else a["remove"] for a in commit if "add" in a or "remove" in a]
    return bool(files) and all(f.get("dataChange") is False for f in files)


#: The change data feed's ``_change_type`` values as ``RowKind``s.
CHANGE_KINDS = {
    "insert": RowKind.INSERT,
    "update_preimage": RowKind.UPDATE_BEFORE,
    "update_postimage": RowKind.UPDATE_AFTER,
    "delete": RowKind.DELETE,
}
_CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def change_rows_of(changes: pa.Table) -> list[Row]:
    """A version's change data feed as ``Row``s of the table's columns with their kinds.

    >>> rows = change_rows_of(pa.table({"n": [1, 2], "_change_type": ["insert", "delete"],
    ...                                 "_commit_version": [3, 3]}))
    >>> [(r.n, r.get_row_kind().short_string()) for r in rows]
    [(1, '+I'), (2, '-D')]
    """
    kinds = [CHANGE_KINDS[k] for k in changes.column("_change_type").to_pylist()]
    data = changes.drop_columns([c for c in _CDF_COLUMNS if c in changes.column_names])
    out, _ = rows_from(data, 0, data.num_rows)
    for row, kind in zip(out, kinds, strict=True):
        row.set_row_kind(kind)
    return list(out)


class DeltaSource(Source):
    """Rows of a Delta table as named ``Row``s; bounded (one snapshot) or continuous (then
    every new version's appended rows, checked every ``update_check_interval_ms``)."""

    def __init__(
        self,
        table_path: str,
        bounded: bool,
        version: int | None,
        snapshot: bool,
        update_check_interval_ms: int,
        storage_options: dict[str, str],
        change_data_feed: bool = False,
    ) -> None:
        self.change_data_feed = change_data_feed
        self.table_path = table_path.rstrip("/")
        self.bounded = bounded
        self.version = version
        self.snapshot = snapshot
        self.update_check_interval_ms = update_check_interval_ms
        self.storage_options = storage_options

    @staticmethod
    def for_bounded_row_data(table_path: str) -> DeltaSourceBuilder:
        """The table's latest snapshot (or ``version_as_of``'s), then the end of input."""
        return DeltaSourceBuilder(table_path, bounded=True)

    @staticmethod
    def for_continuous_row_data(table_path: str) -> DeltaSourceBuilder:
        """The latest snapshot and then what new versions append; with
        ``starting_version(v)``, what versions ``v``, ``v + 1``, ... append (no snapshot)."""
        return DeltaSourceBuilder(table_path, bounded=False)

    def is_bounded(self) -> bool:
        return self.bounded

    def create_splits(self, parallelism: int) -> list[DeltaSplit]:
        version = -1 if self.version is None else self.version
        return [DeltaSplit(version, self.snapshot)]

    def create_reader(
        self, splits: Sequence[Any], context: SourceReaderContext
    ) -> DeltaSourceReader:
        return DeltaSourceReader(self, list(splits))


class DeltaSourceBuilder:
    def __init__(self, table_path: str, bounded: bool) -> None:
        self._path = table_path
        self._bounded = bounded
        self._version: int | None = None
        self._snapshot = True
        self._interval_ms = 5000  # Flink's Delta source's update check interval
        self._storage: dict[str, str] = {}
        self._cdf = False

    def change_data_feed(self) -> DeltaSourceBuilder:
        """Continuous: read each version's changes from the table's change data feed
        (``delta.enableChangeDataFeed = true``), ``Row``s with their ``RowKind``: inserts,
        updates (``-U``/``+U``) and deletes, MERGEs included (the snapshot, if read, is
        ``+I``)."""
        if self._bounded:
            raise ValueError("change_data_feed is for continuous sources")
        self._cdf = True
        return self

    def version_as_of(self, version: int) -> DeltaSourceBuilder:
        """Bounded: read this version's snapshot."""
        self._version, self._snapshot = int(version), True
        return self

    def starting_version(self, version: int) -> DeltaSourceBuilder:
        """Continuous: read the rows versions ``version`` and later append, no snapshot."""
        if self._bounded:
            raise ValueError("starting_version is for continuous sources (version_as_of)")
        self._version, self._snapshot = int(version), False
        return self

    def update_check_interval(self, ms: int) -> DeltaSourceBuilder:
        self._interval_ms = int(ms)
        return self

    def with_storage_options(self, options: dict[str, str]) -> DeltaSourceBuilder:
        self._storage = dict(options)
        return self

    def build(self) -> DeltaSource:
        return DeltaSource(
            self._path, self._bounded, self._version, self._snapshot, self._interval_ms,
            self._storage, self._cdf,
        )  # fmt: skip


class DeltaSourceReader(SourceReader):
    """Reads the one split (other subtasks have none and end at once, or idle)."""

    def __init__(self, source: DeltaSource, splits: list[DeltaSplit]) -> None:
        self._source = source
        self._split: DeltaSplit | None = splits[0] if splits else None
        self._fs, self._root = url_to_fresh_fs(
            source.table_path, fsspec_options(source.table_path, source.storage_options)
        )
        self._files: list[str] | None = None  # of the split's version, once listed
        self._current: Any = None  # the rows of the file at file_index, once read
        self._next_check = 0.0

    def _table(self, version: int | None = None) -> Any:
        import deltalake

        table = deltalake.DeltaTable(
            self._source.table_path, storage_options=self._source.storage_options or None
        )
        if version is not None:
            table.load_as_version(version)
        return table

    def _paths(self, version: int) -> list[str]:
        from cairn.datastream.connectors.delta import table_file_paths

        return table_file_paths(self._table(version))

    def _list(self, split: DeltaSplit) -> tuple[DeltaSplit, list[str]] | None:
        """The split (its version resolved) and its files; None if its version is not there
        yet."""
        latest = self._table().version()
        if split.version == -1:
            split = replace(split, version=latest)
        if split.version > latest:
            return None
        if split.snapshot:
            return split, sorted(self._paths(split.version))
        if split.version > 0 and rewrites_only(self._commit(split.version)):
            return split, []  # a compaction: the same rows in other files
        if self._source.change_data_feed:
            return split, [_CHANGES]
        before = self._paths(split.version - 1) if split.version > 0 else []
        return split, added_files(before, self._paths(split.version), split.version)

    def _commit(self, version: int) -> list[dict[str, Any]]:
        """The actions of ``version``'s commit, from its log file."""
        import json

        path = posixpath.join(self._root, "_delta_log", f"{version:020d}.json")
        with self._fs.open(path, "rb") as f:
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]

    def poll_batch(self, max_records: int) -> list[Any] | None:
        split = self._split
        if split is None:
            return None if self._source.bounded else []
        if self._files is None:
            if time.monotonic() < self._next_check:
                return []
            listed = self._list(split)
            if listed is None:
                self._next_check = time.monotonic() + self._source.update_check_interval_ms / 1000
                return []
            split, self._files = listed
            self._split = split
        if split.file_index >= len(self._files):
            self._files, self._current = None, None
            if self._source.bounded:
                self._split = None
                return None
            self._split = DeltaSplit(split.version + 1, False)
            return []
        if self._current is None:
            if self._files[split.file_index] == _CHANGES:
                changes = self._table().load_cdf(split.version, split.version).read_all()
                self._current = change_rows_of(pa.table(changes))
            else:
                import pyarrow.parquet as pq

                path = posixpath.join(self._root, self._files[split.file_index])
                with self._fs.open(path, "rb") as f:
                    self._current = pq.read_table(f)
        table = self._current
        if isinstance(table, list):  # a version's changes, as Rows
            end = min(len(table), split.row_offset + max_records)
            out = table[split.row_offset : end]
            total = len(table)
        else:
            out, end = rows_from(table, split.row_offset, max_records)
            total = table.num_rows
        if end >= total:
            self._split = replace(split, file_index=split.file_index + 1, row_offset=0)
            self._current = None
        else:
            self._split = replace(split, row_offset=end)
        return out

    def available_in_s(self) -> float | None:
        return max(0.0, self._next_check - time.monotonic()) if self._files is None else None

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[Any]:
        return [] if self._split is None else [self._split]
