"""File formats of the file connectors: how a file becomes records, and Parquet to write.

Invariant: formats are picklable values; a ``RecordReader``'s ``position`` is always just
after the last record it returned (a byte offset for line formats, a record count for bulk
formats), so a reader reopened at ``position`` continues with the next record. A
``TextLineReader`` never returns a line before its newline (or end of file) was read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from cairn.common.serialization import BulkWriter, BulkWriterFactory
from cairn.common.typeinfo import RowTypeInfo
from cairn.common.types import Row

if TYPE_CHECKING:
    from cairn.datastream.formats.arrow import ArrowRows

__all__ = [
    "BulkFormat",
    "FileFormat",
    "IteratorReader",
    "ParquetBulkWriters",
    "ParquetWriterFactory",
    "RecordReader",
    "StreamFormat",
    "TextLineReader",
    "rows_to_table",
]

_CHUNK = 1 << 16


class RecordReader(ABC):
    """Reads the records of one file from ``position`` on (``line``: lines consumed)."""

    position: int
    line: int

    @abstractmethod
    def read(self, max_records: int) -> list[Any]:
        """Up to ``max_records`` records; ``[]`` only at the end of the file."""

    @property
    @abstractmethod
    def at_end(self) -> bool:
        """Every record of the file was returned."""


class FileFormat(ABC):
    """How a ``FileSource`` turns one file into records (a ``StreamFormat`` or ``BulkFormat``)."""

    @abstractmethod
    def create_reader(self, stream: BinaryIO, position: int, line: int) -> RecordReader:
        """A reader of ``stream`` (opened at its start) continuing at ``position``."""

    def for_file(self, path: str, fs: Any, local_path: str) -> FileFormat:
        """The format reading the file ``path`` (``fs``: its fsspec filesystem, where it is
        ``local_path``); a format whose records carry the file's metadata (the Table API's
        ``file.path``, ``file.size``...) returns one bound to it. Default: itself."""
        return self


class StreamFormat(FileFormat):
    """Records read line by line from a file (PyFlink ``StreamFormat``); the position is a
    byte offset, so a restore seeks straight to the next line.

    ``StreamFormat.text_line_format("UTF-8")`` gives each line as a ``str``; subclasses
    (``CsvReaderFormat``) turn lines into records by overriding ``records``.
    """

    def __init__(self, charset_name: str = "UTF-8") -> None:
        # Lines are split on the byte b"\n", which only works for ASCII-compatible charsets.
        if "\n".encode(charset_name) != b"\n":
            raise ValueError(f"charset {charset_name!r} is not ASCII-compatible")
        self.charset_name = charset_name

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        """One record per line, without its ``\\n`` / ``\\r\\n`` terminator."""
        return StreamFormat(charset_name)

    def records(self, lines: list[str], first_line: int) -> list[Any]:
        """The records of ``lines``, the first being line ``first_line`` (0-based) of its file."""
        return lines

    def create_reader(self, stream: BinaryIO, position: int, line: int) -> RecordReader:
        if position:
            stream.seek(position)
        return _LineRecords(self, TextLineReader(stream, position, self.charset_name), line)

    def __repr__(self) -> str:
        return f"StreamFormat.text_line_format({self.charset_name!r})"


class _LineRecords(RecordReader):
    def __init__(self, fmt: StreamFormat, lines: TextLineReader, line: int) -> None:
        self._format = fmt
        self._lines = lines
        self.line = line

    @property
    def position(self) -> int:  # type: ignore[override]
        return self._lines.offset

    def read(self, max_records: int) -> list[Any]:
        while True:
            lines = self._lines.read_lines(max_records)
            first = self.line
            self.line += len(lines)
            records = self._format.records(lines, first) if lines else []
            if records or not lines:  # a run of skipped lines (a header) reads on
                return records

    @property
    def at_end(self) -> bool:
        return self._lines.at_end


class BulkFormat(FileFormat):
    """Records decoded from a whole file (PyFlink ``BulkFormat``: Parquet, Avro files); the
    position is the number of records returned, so a restore skips that many."""

    @abstractmethod
    def iterate(self, stream: BinaryIO) -> Iterator[list[Any]]:
        """The file's records in order, in batches."""

    def create_reader(self, stream: BinaryIO, position: int, line: int) -> RecordReader:
        return IteratorReader(self.iterate(stream), position)


class IteratorReader(RecordReader):
    """A ``RecordReader`` over batches of records, skipping the first ``position`` ones."""

    def __init__(self, batches: Iterator[list[Any]], position: int) -> None:
        self._batches = batches
        self._buffer: list[Any] = []
        self._done = False
        self.position = 0
        self.line = 0
        while self.position < position:  # skip what was read before the restore
            if not self._fill():
                break
            take = min(position - self.position, len(self._buffer))
            del self._buffer[:take]
            self.position += take
        self.line = self.position

    def _fill(self) -> bool:
        while not self._buffer and not self._done:
            try:
                self._buffer = list(next(self._batches))
            except StopIteration:
                self._done = True
        return bool(self._buffer)

    def read(self, max_records: int) -> list[Any]:
        if max_records <= 0 or not self._fill():
            return []
        out = self._buffer[:max_records]
        del self._buffer[:max_records]
        self.position += len(out)
        self.line = self.position
        return out

    @property
    def at_end(self) -> bool:
        return not self._fill()


class TextLineReader:
    """Reads decoded lines from a binary stream positioned at byte ``offset``.

    >>> import io
    >>> r = TextLineReader(io.BytesIO(b"a\\nbb\\r\\nc"), offset=0, charset_name="UTF-8")
    >>> r.read_lines(2), r.offset, r.read_lines(5), r.offset
    (['a', 'bb'], 6, ['c'], 7)
    """

    def __init__(self, stream: BinaryIO, offset: int, charset_name: str) -> None:
        self._stream = stream
        self._charset = charset_name
        self.offset = offset
        self._buf = b""
        self._pos = 0  # start of the first unreturned line in _buf
        self.eof = False

    def read_lines(self, max_lines: int, max_bytes: int = 4 * _CHUNK) -> list[str]:
        """Up to ``max_lines`` lines; fewer at end of file or after ``max_bytes`` were read."""
        lines: list[str] = []
        raw_read = 0
        while len(lines) < max_lines:
            nl = self._buf.find(b"\n", self._pos)
            if nl < 0:
                if self.eof or (raw_read >= max_bytes and lines):
                    break
                chunk = self._stream.read(_CHUNK)
                raw_read += len(chunk)
                self._buf = self._buf[self._pos :] + chunk
                self._pos = 0
                if chunk:
                    continue
                self.eof = True
                if not self._buf:
                    break
                nl = len(self._buf)  # a last line without newline
            end = nl - 1 if nl > self._pos and self._buf[nl - 1] == 0x0D else nl
            lines.append(self._buf[self._pos : end].decode(self._charset))
            self.offset += min(nl + 1, len(self._buf)) - self._pos
            self._pos = min(nl + 1, len(self._buf))
        return lines

    @property
    def at_end(self) -> bool:
        """End of file reached and every line returned."""
        return self.eof and self._pos >= len(self._buf)


# ---- Parquet ------------------------------------------------------------------------------


class ParquetBulkWriters:
    """Factories of Parquet writers for ``FileSink.for_bulk_format`` (PyFlink's name).

    >>> import pyarrow as pa
    >>> schema = pa.schema([("k", pa.string()), ("n", pa.int64())])
    >>> factory = ParquetBulkWriters.for_row_type(schema)

    Records are dicts or named ``Row``s (by field name; missing fields are null) or
    tuples, lists and unnamed ``Row``s (by position); the output files are
    plain Parquet, readable by Spark (``spark.read.parquet(base_path)``) and pyarrow.
    """

    @staticmethod
    def for_row_type(
        schema: Any, compression: str = "snappy", row_group_size: int = 65536
    ) -> ParquetWriterFactory:
        """``schema``: a ``pyarrow.Schema`` or ``Types.ROW_NAMED(...)`` (PyFlink's row type)."""
        from cairn.datastream.formats.arrow import arrow_schema

        row_type = schema if isinstance(schema, RowTypeInfo) else None
        return ParquetWriterFactory(arrow_schema(schema), compression, row_group_size, row_type)


class ParquetWriterFactory(BulkWriterFactory):
    def __init__(
        self,
        schema: pa.Schema,
        compression: str,
        row_group_size: int,
        row_type: RowTypeInfo | None = None,
    ) -> None:
        if row_group_size < 1:
            raise ValueError(f"row_group_size must be >= 1, got {row_group_size}")
        self.schema = schema
        self.compression = compression
        self.row_group_size = row_group_size
        self.row_type = row_type

    def create(self, stream: BinaryIO) -> BulkWriter:
        return ParquetBulkWriter(
            stream, self.schema, self.compression, self.row_group_size, self.row_type
        )


class ParquetBulkWriter(BulkWriter):
    """Buffers rows and writes one row group per ``row_group_size`` rows."""

    def __init__(
        self,
        stream: BinaryIO,
        schema: pa.Schema,
        compression: str,
        row_group_size: int,
        row_type: RowTypeInfo | None = None,
    ) -> None:
        self._schema = schema
        self._codec = arrow_rows(row_type)
        self._row_group_size = row_group_size
        self._writer = pq.ParquetWriter(stream, schema, compression=compression)
        self._rows: list[Any] = []

    def add_element(self, element: Any) -> None:
        self._rows.append(element)
        if len(self._rows) >= self._row_group_size:
            self.flush()

    def add_elements(self, elements: Sequence[Any]) -> None:
        self._rows.extend(elements)
        if len(self._rows) >= self._row_group_size:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            self._writer.write_table(rows_to_table(self._rows, self._schema, self._codec))
            self._rows = []

    def finish(self) -> None:
        self.flush()
        self._writer.close()  # writes the footer; the stream stays open (caller's)


def arrow_rows(row_type: RowTypeInfo | None) -> ArrowRows | None:
    """The converters of a row type's records (built once per writer), if there is one."""
    if row_type is None:
        return None
    from cairn.datastream.formats.arrow import ArrowRows

    return ArrowRows(row_type)


def rows_to_table(rows: list[Any], schema: pa.Schema, codec: ArrowRows | None = None) -> pa.Table:
    """Records (dicts and named ``Row``s by name, others by position) as a table; with the
    ``codec`` of a row type, nested rows, tuples and maps are converted by it."""
    width = len(schema)
    if not all(type(r) is tuple for r in rows):
        rows = [_values(r, schema.names) for r in rows]
    for row in rows:
        if len(row) != width:
            raise ValueError(f"row {row!r} has {len(row)} fields, the schema has {width}")
    if codec is not None:
        return codec.table(rows)
    columns = list(zip(*rows, strict=True))
    arrays = [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _values(row: Any, names: list[str]) -> tuple[Any, ...]:
    """A row's values in schema order: dicts and named ``Row``s by name, others by position."""
    if isinstance(row, Row):
        try:
            row = row.as_dict()
        except TypeError:  # a Row without field names
            return tuple(row)
    if isinstance(row, dict):
        return tuple(row.get(name) for name in names)
    return tuple(row)
