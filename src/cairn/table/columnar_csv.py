"""A ``filesystem`` table's CSV files read as Arrow batches, with its pushed projections,
filter and watermark computed on them (``scan_pushdown.ScanSpec``).

Invariant: the reader returns what the row-at-a-time path returns (each non-empty line
through the table's CSV deserializer as a ``+I`` row, then the pushed ``Calc`` and the
event time per row): the same rows in the same order, the same timestamps, and a
``max_read`` that covers every row read, kept or not (the dropped rows at a file's very end
come with its last, empty batch, which the file source passes over: the rows after them
or the end of input move the watermark on). Its ``position`` is always just after
the line of the last row returned (or of the last dropped row before the next one), so a
reader reopened there continues with the next row; rows parsed ahead wait in memory and are
parsed again after a restore. A block that Arrow refuses (a malformed line, a value Arrow
reads differently) is read by the row path: its error names the line, or its rows go on.

>>> import io
>>> from cairn.table.analysis import Columns, Rex
>>> from cairn.table.filesystem import line_rows
>>> from cairn.table.scan_pushdown import ScanSpec
>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("k", DataTypes.INT()), ("v", DataTypes.STRING())])
>>> k, v = (Rex("input", c.data_type, index=i) for i, c in enumerate(cols.columns))
>>> kept = Rex("call", DataTypes.BOOLEAN(), op="greater_than",
...     operands=(k, Rex("literal", DataTypes.INT(False), value=1)))
>>> spec = ScanSpec(cols, (v,), kept)
>>> fmt = ColumnarCsvFormat(spec, {"format": "csv"}, line_rows(cols, {"format": "csv"}))
>>> reader = fmt.create_reader(io.BytesIO(b"1,a\\n2,b\\n\\n3,c\\n"), 0, 0)
>>> reader.read(1), reader.position, reader.read(5), reader.position, reader.read(5)
([(0, ('b',))], 8, [(0, ('c',))], 13, [])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from cairn.api.connectors import TimestampedBatch
from cairn.datastream.connectors.formats import FileFormat, RecordReader, StreamFormat
from cairn.table.analysis import Rex
from cairn.table.arrow_eval import arrow_type, evaluate
from cairn.table.codegen import CompiledCalc, calc_source
from cairn.table.scan_pushdown import ScanSpec
from cairn.table.timestamps import epoch_millis

__all__ = ["ColumnarCsvFormat", "columnar_csv_options"]

_BLOCK = 1 << 20  # bytes parsed at once
_MIN_TS = np.iinfo(np.int64).min  # a row without event time (never raises the watermark)
_MIN_WATERMARK = -(2**63)


def columnar_csv_options(options: Mapping[str, str]) -> bool:
    """The ``csv`` options of a table whose files Arrow reads as the row path does: no
    comments, no skipped lines, and nulls that are empty fields (``csv.null-literal`` unset
    or ``''``)."""
    flag = {k: v.strip().lower() == "true" for k, v in options.items()}
    if flag.get("csv.allow-comments") or flag.get("csv.ignore-parse-errors"):
        return False
    return options.get("csv.null-literal") in (None, "")


@dataclass
class _Chunk:
    """One parsed block: the kept rows (``rows``, ``stamps``), the positions of the kept
    rows among all rows (``kept``), and per row its end offset, line and event time."""

    rows: list[Any]
    stamps: list[int | None] | None
    kept: Any  # numpy int array
    ends: Any  # numpy int64: byte offset just after each row's line
    lines: Any  # numpy int64: lines consumed once each row's line is
    times: Any  # numpy int64 (``_MIN_TS``: none)
    end: int  # byte offset just after the block
    end_line: int
    row: int = 0  # next row to consume
    taken: int = 0  # kept rows already returned


class ColumnarCsvFormat(FileFormat):
    """Reads a CSV table's files a block at a time with Arrow, computing ``spec``
    (``row_format``: the table's row-at-a-time format, for blocks Arrow refuses)."""

    def __init__(self, spec: ScanSpec, options: Mapping[str, str], row_format: StreamFormat):
        self.spec = spec
        self.row_format = row_format
        read = spec.read
        position = {file_index: k for k, file_index in enumerate(read)}
        self.names = [f"f{i}" for i in range(len(spec.file_columns))]
        types = spec.file_columns.types
        self.read_types = {self.names[i]: arrow_type(types[i]) for i in read}
        self.read_names = [self.names[i] for i in read]
        self.projections = tuple(_remap(p, position) for p in spec.projections)
        self.condition = None if spec.condition is None else _remap(spec.condition, position)
        self.rowtime = None if spec.rowtime is None else _remap(spec.rowtime, position)
        delimiter = options.get("csv.field-delimiter", ",")
        quote = options.get("csv.quote-character", '"')
        if options.get("csv.disable-quote-character", "false").lower() == "true":
            quote = ""
        self.parse_options = (delimiter, quote or False, options.get("csv.escape-character"))
        self.null_is_empty = options.get("csv.null-literal") == ""
        self.calc = CompiledCalc(calc_source(spec.projections, spec.condition, []))
        self.rowtime_calc = (
            None if spec.rowtime is None else CompiledCalc(calc_source([spec.rowtime], None, []))
        )

    def create_reader(self, stream: BinaryIO, position: int, line: int) -> RecordReader:
        if position:
            stream.seek(position)
        return _ColumnarReader(self, stream, position, line)

    def parse(self, block: bytes, offset: int, first_line: int) -> _Chunk:
        """``block`` (whole lines, starting at byte ``offset`` and line ``first_line`` of
        its file) computed: by Arrow, or by the row path when Arrow refuses it."""
        data = np.frombuffer(block, dtype=np.uint8)
        breaks = np.flatnonzero(data == 10)
        starts = np.concatenate(([0], breaks + 1)).astype(np.int64)
        stops = np.concatenate((breaks, [len(block)])).astype(np.int64)
        if block.endswith(b"\n"):
            starts, stops = starts[:-1], stops[:-1]
        carriage = (stops > starts) & (data[np.maximum(stops - 1, 0)] == 13)
        filled = np.flatnonzero(stops - starts - carriage > 0)
        ends = np.minimum(stops[filled] + 1, len(block)) + offset
        lines = filled + first_line + 1
        try:
            computed = self._arrow(block, len(filled))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            computed = None
        if computed is None:
            texts = [
                block[s : e - c].decode("utf-8")
                for s, e, c in zip(starts.tolist(), stops.tolist(), carriage.tolist(), strict=True)
            ]
            computed = self._rows(texts, first_line)
        rows, stamps, kept, times = computed
        return _Chunk(
            rows, stamps, kept, ends, lines, times, offset + len(block), first_line + len(starts)
        )

    def _arrow(self, block: bytes, expected: int) -> tuple[Any, ...] | None:
        delimiter, quote, escape = self.parse_options
        table = pacsv.read_csv(
            pa.py_buffer(block),
            read_options=pacsv.ReadOptions(column_names=self.names, use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=quote, escape_char=escape or False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=self.read_types,
                include_columns=self.read_names,
                null_values=[""],
                strings_can_be_null=self.null_is_empty,
                quoted_strings_can_be_null=self.null_is_empty,
                true_values=["true", "True", "TRUE"],
                false_values=["false", "False", "FALSE"],
            ),
        )
        if table.num_rows != expected:
            return None
        times = None
        if self.rowtime is not None:
            times = _millis(evaluate(self.rowtime, table), table.num_rows)
        if self.condition is None:
            kept = np.arange(table.num_rows)
        else:
            kept = _true_positions(evaluate(self.condition, table), table.num_rows)
            table = table.take(pa.array(kept))
        columns = [_values(evaluate(p, table), table.num_rows) for p in self.projections]
        rows = (
            list(zip(repeat(0), zip(*columns, strict=True))) if columns else [(0, ())] * len(kept)
        )
        stamps = None
        if times is not None:
            chosen = times[kept]
            stamps = np.where(chosen == _MIN_TS, _MIN_WATERMARK, chosen).tolist()
        return rows, stamps, kept, times

    def _rows(self, texts: list[str], first_line: int) -> tuple[Any, ...]:
        """The row path over a block's lines: its error names the line."""
        parsed = self.row_format.records(texts, first_line)
        calc = self.calc.function()
        rowtime = None if self.rowtime_calc is None else self.rowtime_calc.function()
        rows, kept, times = [], [], []
        for n, (_, row) in enumerate(parsed):
            if rowtime is not None:
                value = rowtime(row)[0]  # type: ignore[index]
                times.append(_MIN_TS if value is None else epoch_millis(value))
            out = calc(row)
            if out is not None:
                rows.append((0, out))
                kept.append(n)
        kept_at = np.array(kept, dtype=np.int64)
        if rowtime is None:
            return rows, None, kept_at, None
        all_times = np.array(times, dtype=np.int64)
        chosen = all_times[kept_at]
        return (
            rows,
            np.where(chosen == _MIN_TS, _MIN_WATERMARK, chosen).tolist(),
            kept_at,
            all_times,
        )


class _ColumnarReader(RecordReader):
    def __init__(self, fmt: ColumnarCsvFormat, stream: BinaryIO, position: int, line: int):
        self._format = fmt
        self._stream = stream
        self.position = position
        self.line = line
        self._next_offset = position
        self._next_line = line
        self._carry = b""
        self._eof = False
        self._chunk: _Chunk | None = None
        self._done = False

    @property
    def at_end(self) -> bool:
        return self._done

    def read(self, max_records: int) -> list[Any]:
        rows: list[Any] = []
        stamps: list[int | None] = []
        high = _MIN_TS
        timed = self._format.rowtime is not None
        while len(rows) < max_records:
            chunk = self._chunk
            if chunk is None or chunk.row >= len(chunk.ends):
                if chunk is not None:
                    self.position, self.line = chunk.end, chunk.end_line
                chunk = self._chunk = self._parse_next()
                if chunk is None:
                    self._done = True
                    break
                continue
            need = max_records - len(rows)
            stop = min(chunk.taken + need, len(chunk.kept))
            last = int(chunk.kept[stop - 1]) if stop < len(chunk.kept) else len(chunk.ends) - 1
            rows.extend(chunk.rows[chunk.taken : stop])
            if timed:
                stamps.extend(chunk.stamps[chunk.taken : stop])  # type: ignore[index]
                seen = chunk.times[chunk.row : last + 1]
                if len(seen):
                    high = max(high, int(seen.max()))
            chunk.taken, chunk.row = stop, last + 1
            self.position, self.line = int(chunk.ends[last]), int(chunk.lines[last])
        if not timed:
            return rows
        return TimestampedBatch.of(rows, stamps, None if high == _MIN_TS else high)

    def _parse_next(self) -> _Chunk | None:
        block = self._next_block()
        if block is None:
            return None
        chunk = self._format.parse(block, self._next_offset, self._next_line)
        self._next_offset, self._next_line = chunk.end, chunk.end_line
        return chunk

    def _next_block(self) -> bytes | None:
        data = self._carry
        while not self._eof:
            more = self._stream.read(_BLOCK)
            if not more:
                self._eof = True
                break
            data += more
            cut = data.rfind(b"\n")
            if cut >= 0:
                self._carry = data[cut + 1 :]
                return data[: cut + 1]
        self._carry = b""
        return data or None


def _remap(rex: Rex, position: dict[int, int]) -> Rex:
    if rex.kind == "input":
        return Rex("input", rex.data_type, index=position[rex.index])
    if not rex.operands:
        return rex
    return Rex(
        rex.kind,
        rex.data_type,
        rex.index,
        rex.value,
        rex.op,
        tuple(_remap(o, position) for o in rex.operands),
    )


def _values(result: Any, length: int) -> list[Any]:
    """Python values of a result: numbers through ``to_pylist``; strings, dates and
    timestamps through NumPy, many times faster for them (a ``datetime`` per value either
    way; NULL is ``None``)."""
    if isinstance(result, pa.Scalar):
        return [result.as_py()] * length
    kind = result.type
    if pa.types.is_string(kind) or pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        values: list[Any] = result.to_numpy(zero_copy_only=False).tolist()
    else:
        values = result.to_pylist()
    return values


def _true_positions(result: Any, length: int) -> Any:
    if isinstance(result, pa.Scalar):
        return np.arange(length) if result.as_py() is True else np.arange(0)
    mask = result.fill_null(False).to_numpy(zero_copy_only=False)
    return np.flatnonzero(mask)


def _millis(result: Any, length: int) -> Any:
    """Epoch milliseconds (floored, as ``epoch_millis``) of a timestamp result; ``_MIN_TS``
    where it is NULL."""
    if isinstance(result, pa.Scalar):
        value = result.as_py()
        return np.full(length, _MIN_TS if value is None else epoch_millis(value), np.int64)
    micros = result.cast(pa.timestamp("us")).cast(pa.int64())
    valid = micros.is_valid().to_numpy(zero_copy_only=False)
    millis = micros.fill_null(0).to_numpy(zero_copy_only=False) // 1000
    return np.where(valid, millis, _MIN_TS)
