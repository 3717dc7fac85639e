"""A source of the records of files and directories, through fsspec (PyFlink ``FileSource``).

Invariant: a file belongs to the subtask ``crc32(url) % parallelism``, and every file a
subtask knows of is in its snapshot as ``(url, position, line number, finished)``, the
position being just after the last returned record (a byte offset for line formats, a record
count for bulk formats); so after a restore (at any parallelism) each file is read by
exactly one subtask, from exactly where it stopped.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cairn.api.connectors import Source, SourceReader, SourceReaderContext
from cairn.clock import Clock, MonotonicClock
from cairn.common.storage_options import url_to_fresh_fs
from cairn.common.time import Duration
from cairn.datastream.connectors.formats import (
    BulkFormat,
    FileFormat,
    RecordReader,
    StreamFormat,
)
from cairn.ids import CheckpointId

__all__ = ["FileSource", "FileSourceBuilder", "FileSplitState", "StaticFileSet"]


@dataclass(frozen=True)
class FileSplitState:
    """Progress in one file: bytes ``[0, offset)`` (``line`` lines) were returned; for a
    bulk format, ``offset`` records."""

    path: str  # full URL, e.g. "file:///data/in/a.txt"
    offset: int = 0
    line: int = 0
    finished: bool = False


@dataclass(frozen=True)
class StaticFileSet:
    """The files under the source paths when the job started (initial split of every subtask)."""

    paths: tuple[str, ...]


def owner_of(path: str, parallelism: int) -> int:
    """The subtask that reads ``path``: stable across processes and Python versions."""
    return zlib.crc32(path.encode("utf-8")) % parallelism


def list_files(roots: Sequence[str], missing_ok: bool) -> list[str]:
    """Full URLs of the non-hidden files under ``roots``, sorted.

    Directories are listed recursively; a file or directory whose name starts with ``.`` or
    ``_`` below a root is hidden (like Flink; it also hides in-progress sink files and
    ``_SUCCESS`` markers). A root that is itself a file is always read.
    """
    found: set[str] = set()
    for root in roots:
        fs, base = url_to_fresh_fs(root)
        if fs.isfile(base):
            found.add(fs.unstrip_protocol(base))
            continue
        if not fs.isdir(base):
            if missing_ok:
                continue
            raise FileNotFoundError(f"file source path does not exist: {root}")
        prefix = base.rstrip("/") + "/"
        for path in fs.find(base, withdirs=False):
            relative = path[len(prefix) :] if path.startswith(prefix) else path
            if not any(part.startswith((".", "_")) for part in relative.split("/")):
                found.add(fs.unstrip_protocol(path))
    return sorted(found)


class FileSource(Source):
    """Reads files record by record (lines, CSV rows, Avro or Parquet records); bounded
    unless ``monitor_continuously`` was set.

    >>> source = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), "/in")
    ...           .monitor_continuously(Duration.of_seconds(5)).build())
    >>> source.is_bounded()
    False

    Semantics (Cairn):

    * The files present at the start are listed on the driver (``create_splits``); with
      monitoring, every subtask re-lists the paths every ``discovery_interval`` and picks up
      the new files it owns. A file is read once: it must appear complete (write elsewhere,
      then rename into the directory); appends to a file already read are not seen.
    * Each subtask reads its files in path order. Records are what the format makes of them
      (``str`` lines for ``text_line_format``).
    * ``split_redistribution = "union"``: every subtask keeps the progress of every file it
      owns, including finished ones, and on restore each subtask receives the union of all
      snapshots and keeps the entries it owns at the new parallelism. A rescale therefore
      loses nothing (unfinished files continue at their offset under their new owner) and
      reads nothing twice (finished files stay known to their new owner, so re-listing does
      not pick them up again). The price: the state grows with the number of files read.
    * Without monitoring, a restored job reads only the files it knew of (no re-listing).
    * Listing an object store directory can take longer than a poll should; keep the
      discovery interval well above the listing time.
    """

    split_redistribution = "union"

    def __init__(
        self,
        stream_format: FileFormat,
        paths: Sequence[str],
        discovery_interval: Duration | None = None,
    ) -> None:
        if not isinstance(stream_format, FileFormat):
            raise TypeError(
                f"a file source needs a StreamFormat or BulkFormat, got {stream_format!r}"
            )
        if not paths:
            raise ValueError("a file source needs at least one path")
        self.stream_format = stream_format
        self.paths: tuple[str, ...] = tuple(str(p) for p in paths)
        self.discovery_interval = discovery_interval

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        """Start building a source that reads ``paths`` (files or directories, fsspec URLs)."""
        return FileSourceBuilder(stream_format, paths)

    @staticmethod
    def for_bulk_file_format(bulk_format: BulkFormat, *paths: str) -> FileSourceBuilder:
        """Start building a source of a bulk format (``ParquetColumnarRowInputFormat``...)."""
        if not isinstance(bulk_format, BulkFormat):
            raise TypeError(f"for_bulk_file_format() needs a BulkFormat, got {bulk_format!r}")
        return FileSourceBuilder(bulk_format, paths)

    def is_bounded(self) -> bool:
        return self.discovery_interval is None

    def create_splits(self, parallelism: int) -> list[Any]:
        # One identical listing per subtask: each keeps the files it owns by hash, which is
        # the same rule re-listing uses, so the initial assignment agrees with monitoring.
        listing = StaticFileSet(tuple(list_files(self.paths, missing_ok=not self.is_bounded())))
        return [listing] * parallelism

    def create_reader(
        self,
        splits: Sequence[Any],
        context: SourceReaderContext,
        clock: Clock = MonotonicClock(),
    ) -> FileSourceReader:
        interval = None
        if self.discovery_interval is not None:
            interval = self.discovery_interval.to_milliseconds()
        return FileSourceReader(splits, context, self.stream_format, self.paths, interval, clock)


class FileSourceBuilder:
    """Configures a ``FileSource`` (PyFlink ``FileSourceBuilder``)."""

    def __init__(self, stream_format: FileFormat, paths: Sequence[str]) -> None:
        self._format = stream_format
        self._paths = tuple(paths)
        self._interval: Duration | None = None

    def monitor_continuously(self, discovery_interval: Duration) -> FileSourceBuilder:
        """Streaming mode: look for new files every ``discovery_interval``."""
        if discovery_interval.to_milliseconds() <= 0:
            raise ValueError("discovery_interval must be positive")
        self._interval = discovery_interval
        return self

    def process_static_file_set(self) -> FileSourceBuilder:
        """Bounded mode (the default): read the files present at the start, then finish."""
        self._interval = None
        return self

    def build(self) -> FileSource:
        return FileSource(self._format, self._paths, self._interval)


class FileSourceReader(SourceReader):
    def __init__(
        self,
        splits: Sequence[Any],
        context: SourceReaderContext,
        stream_format: FileFormat,
        roots: Sequence[str],
        discovery_interval_ms: int | None,
        clock: Clock,
    ) -> None:
        self._parallelism = context.parallelism
        self._subtask = context.subtask_index
        self._format = stream_format
        self._roots = tuple(roots)
        self._interval_ms = discovery_interval_ms
        self._clock = clock
        self._next_discovery_ms: int | None = None  # None: list at the first poll
        self._files: dict[str, FileSplitState] = {}
        for split in splits:
            if isinstance(split, StaticFileSet):
                for path in split.paths:
                    self._add(FileSplitState(path))
            elif isinstance(split, FileSplitState):
                self._add(split)
            else:
                raise TypeError(f"unexpected file source split {split!r}")
        self._queue = sorted(p for p, s in self._files.items() if not s.finished)
        self._current: RecordReader | None = None
        self._current_handle: Any = None

    def _add(self, state: FileSplitState) -> None:
        if owner_of(state.path, self._parallelism) != self._subtask:
            return
        known = self._files.get(state.path)
        if known is None or (state.finished, state.offset) > (known.finished, known.offset):
            self._files[state.path] = state

    def _discover(self) -> None:
        new = [p for p in list_files(self._roots, missing_ok=True) if p not in self._files]
        for path in new:
            self._add(FileSplitState(path))
        self._queue.extend(p for p in new if p in self._files)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        interval_ms = self._interval_ms
        if interval_ms is not None:
            now_ms = self._clock.now_ms()
            due_ms = self._next_discovery_ms
            if due_ms is None or now_ms >= due_ms:
                self._next_discovery_ms = now_ms + interval_ms
                self._discover()
        while self._queue:
            reader = self._current or self._open(self._queue[0])
            path = self._queue[0]
            try:
                records = reader.read(max_records) if max_records > 0 else []
            except ValueError as exc:  # a record that does not fit its format: say where
                raise ValueError(f"file {path}: {exc}") from exc
            state = self._files[path]
            done = reader.at_end
            self._files[path] = replace(
                state, offset=reader.position, line=reader.line, finished=done
            )
            if done:
                self._close_current()
                self._queue.pop(0)
            if records or not done:
                return records
        return None if self._interval_ms is None else []

    def _open(self, path: str) -> RecordReader:
        fs, local = url_to_fresh_fs(path)
        handle = fs.open(local, "rb")
        state = self._files[path]
        self._current_handle = handle
        fmt = self._format.for_file(path, fs, local)
        self._current = fmt.create_reader(handle, state.offset, state.line)
        return self._current

    def _close_current(self) -> None:
        if self._current_handle is not None:
            self._current_handle.close()
        self._current_handle = None
        self._current = None

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[FileSplitState]:
        return [self._files[p] for p in sorted(self._files)]

    def close(self) -> None:
        self._close_current()
