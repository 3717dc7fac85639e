"""The ``filesystem`` table connector on Cairn's ``FileSource`` and exactly-once ``FileSink``.

Invariant: the sink writes insert-only rows, one line per row in the table's format, through
``FileSink`` — part files become visible only when the checkpoint that covers them completes,
so after any failure the committed files hold each row once. The source reads every file
under ``path`` line by line (byte offsets checkpointed), each line a ``+I`` row, followed
by the file's metadata its table declares (``file.path``, ``file.name``, ``file.size``,
``file.modification-time``, Flink's keys), read when the file is opened.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
from collections.abc import Mapping
from typing import Any

from cairn.api.functions import MapFunction
from cairn.common.config_values import parse_duration_ms, parse_memory_bytes
from cairn.common.serialization import DeserializationSchema, Encoder, SerializationSchema
from cairn.common.time import Duration
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream.connectors.file_sink import FileSink
from cairn.datastream.connectors.file_sink_config import RollingPolicy
from cairn.datastream.connectors.file_source import FileSource, FileSourceBuilder
from cairn.datastream.connectors.formats import StreamFormat
from cairn.datastream.data_stream import DataStream
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.analysis import Columns
from cairn.table.columnar_csv import ColumnarCsvFormat, columnar_csv_options
from cairn.table.errors import ValidationError
from cairn.table.filesystem_partitions import (
    DEFAULT_PARTITION,
    PARTITION_OPTIONS,
    PartitionBuckets,
    check_partitions,
    partition_commit,
    partition_values,
)
from cairn.table.formats import format_keys, row_deserializer, row_serializer
from cairn.table.metadata import with_metadata
from cairn.table.plan import StreamScan
from cairn.table.scan_pushdown import ScanSpec
from cairn.table.schema import Schema, partition_keys
from cairn.table.source_reuse import reused
from cairn.table.timestamps import epoch_millis, source_watermarks, timestamp_of_millis
from cairn.table.types import DataType, DataTypes

__all__ = [
    "FILE_READABLE",
    "check_filesystem",
    "filesystem_options",
    "filesystem_scan",
    "filesystem_sink",
    "line_rows",
]

#: The metadata a ``filesystem`` source reads, with Flink's types.
FILE_READABLE: dict[str, DataType] = {
    "file.path": DataTypes.STRING(False),
    "file.name": DataTypes.STRING(False),
    "file.size": DataTypes.BIGINT(False),
    "file.modification-time": DataTypes.TIMESTAMP_LTZ(3, False),
}

_KEYS = {
    "path",
    "format",
    "source.monitor-interval",
    "sink.rolling-policy.file-size",
    "sink.rolling-policy.rollover-interval",
    "sink.rolling-policy.inactivity-interval",
    "sink.rolling-policy.check-interval",
    "sink.parallelism",
    "lookup.join.cache.ttl",  # as a lookup join's table (cairn.table.lookup_source)
}
#: Flink's defaults: 128 MB parts, rolled every 30 minutes or after 30 idle minutes.
_ROLLING = {
    "sink.rolling-policy.file-size": ("128mb", parse_memory_bytes),
    "sink.rolling-policy.rollover-interval": ("30 min", parse_duration_ms),
    "sink.rolling-policy.inactivity-interval": ("30 min", parse_duration_ms),
}


def filesystem_options(columns: Columns, options: Mapping[str, str]) -> set[str]:
    """The option keys of a ``filesystem`` table with ``options``."""
    formats = format_keys(options["format"], "") if "format" in options else set()
    return _KEYS | PARTITION_OPTIONS | formats


def check_filesystem(
    connector: str, columns: Columns, options: Mapping[str, str], schema: Schema | None
) -> None:
    """Fail at planning on a missing ``path``/``format`` or a bad value."""
    missing = [k for k in ("path", "format") if not options.get(k)]
    if missing:
        raise ValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n"
            + "\n".join(missing)
        )
    keys = partition_keys(options)
    check_partitions(keys, columns.names, options)
    row_serializer(options["format"], _in_files(columns, keys), options)
    _rolling(options)


def _in_files(columns: Columns, keys: tuple[str, ...]) -> Columns:
    """The columns a file holds: all but the partition columns (its directories hold them)."""
    if not keys:
        return columns
    pairs = zip(columns.names, columns.types, strict=True)
    return Columns.of([(n, t) for n, t in pairs if n not in keys])


def _rolling(options: Mapping[str, str]) -> RollingPolicy:
    values = []
    for key, (default, parse) in _ROLLING.items():
        text = options.get(key, default)
        try:
            values.append(parse(text))
        except ValueError as e:
            raise ValidationError(f"Could not parse value '{text}' for key '{key}': {e}") from None
    return RollingPolicy.default_rolling_policy(*values)


class _LineEncoder(Encoder):
    """A row in the table's format, one line per row (Flink's filesystem row formats)."""

    def __init__(self, schema: SerializationSchema, kept: tuple[int, ...] | None = None) -> None:
        self.schema = schema
        self.kept = kept  # the fields written (a partitioned table's non-partition columns)

    def encode(self, element: Any) -> bytes:
        if self.kept is not None:
            element = tuple(element[i] for i in self.kept)
        data: bytes = self.schema.serialize(element)
        return data if data.endswith(b"\n") else data + b"\n"


class _Row(MapFunction):
    def map(self, value: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
        return value[1]


def filesystem_sink(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    """Write the insert-only rows of ``stream`` as part files under ``path`` (of a
    partitioned table: under its partitions' directories, ``filesystem_partitions``)."""
    keys = partition_keys(options)
    in_files = _in_files(columns, keys)
    kept = tuple(columns.names.index(n) for n in in_files.names)
    encoder = _LineEncoder(
        row_serializer(options["format"], in_files, options), None if not keys else kept
    )
    builder = FileSink.for_row_format(options["path"], encoder).with_rolling_policy(
        _rolling(options)
    )
    if keys:
        default = options.get("partition.default-name", DEFAULT_PARTITION)
        indexes = tuple(columns.names.index(k) for k in keys)
        builder = builder.with_bucket_assigner(PartitionBuckets(indexes, keys, default))
        commit = partition_commit(keys, options)
        if commit is not None:
            builder = builder.with_bucket_commit(commit)
    sink = builder.build()
    rows = stream.map(_Row()).name(f"Sink rows: {name}")
    out = rows.sink_to(sink).name(f"Sink: {name}").uid(f"table-sink-{name}")
    if "sink.parallelism" in options:
        out.set_parallelism(int(options["sink.parallelism"]))


class _LineRows(StreamFormat):
    """Each non-empty line through the table's deserializer, as a ``+I`` record; a line the
    format skips (``*.ignore-parse-errors``) is dropped."""

    def __init__(
        self,
        schema: DeserializationSchema,
        metadata: tuple[str, ...] = (),
        partitions: tuple[tuple[str, DataType], ...] = (),
        positions: tuple[int, ...] = (),
    ) -> None:
        super().__init__("UTF-8")
        self.schema = schema
        self.metadata = metadata
        self.values: tuple[Any, ...] = ()  # the metadata of the file it is bound to
        # a partitioned table: its partition columns and where each goes in the row
        self.partitions = partitions
        self.positions = positions
        self.partition_row: tuple[Any, ...] = ()  # the partition values of the bound file

    def for_file(self, path: str, fs: Any, local_path: str) -> StreamFormat:
        if not self.metadata and not self.partitions:
            return self
        bound = copy.copy(self)
        if self.partitions:
            names = [n for n, _ in self.partitions]
            texts = partition_values(local_path, names)
            bound.partition_row = tuple(
                _typed(text, t) for text, (_, t) in zip(texts, self.partitions, strict=True)
            )
        if not self.metadata:
            return bound
        info = {
            "file.path": local_path,
            "file.name": local_path.rstrip("/").rsplit("/", 1)[-1],
            "file.size": int(fs.size(local_path)),
            "file.modification-time": _modified(fs, local_path),
        }
        bound.values = tuple(info[k] for k in self.metadata)
        return bound

    def _with_partitions(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(row)
        for position, value in zip(self.positions, self.partition_row, strict=True):
            out.insert(position, value)
        return tuple(out)

    def records(self, lines: list[str], first_line: int) -> list[Any]:
        out = []
        for n, line in enumerate(lines):
            if not line:
                continue
            try:
                row = self.schema.deserialize(line.encode())
            except (ValueError, TypeError) as e:
                raise ValueError(f"Failed to deserialize line {first_line + n + 1}: {e}") from e
            if row is not None:
                values = tuple(row) if not self.partitions else self._with_partitions(tuple(row))
                out.append((0, (*values, *self.values)))
        return out


def _typed(text: str | None, data_type: DataType) -> Any:
    """A partition value read from a path, in its column's type."""
    if text is None:
        return None
    if data_type.root in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return int(text)
    if data_type.root in ("FLOAT", "DOUBLE"):
        return float(text)
    if data_type.root == "BOOLEAN":
        return text.lower() == "true"
    if data_type.root == "DATE":
        return datetime.date.fromisoformat(text)
    return text


def _modified(fs: Any, path: str) -> datetime.datetime:
    """The file's modification time as a ``TIMESTAMP_LTZ(3)`` value (UTC, milliseconds)."""
    return timestamp_of_millis(epoch_millis(fs.modified(path)))


def filesystem_scan(
    name: str, columns: Columns, options: Mapping[str, str], schema: Schema | None = None
) -> StreamScan:
    """The scan of a ``filesystem`` table: the files under ``path``."""
    check_filesystem("filesystem", columns, options, schema)
    keys = tuple(c.key for c in schema.metadata_columns()) if schema is not None else ()
    partitioned = partition_keys(options)
    in_files = _in_files(columns, partitioned)
    positions = tuple(sorted(columns.names.index(k) for k in partitioned))
    fmt = _LineRows(
        row_deserializer(options["format"], in_files, options),
        keys,
        tuple((columns.names[i], columns.types[i]) for i in positions),
        positions,
    )
    interval = options.get("source.monitor-interval")
    path = f"default_catalog.default_database.{name}"

    def build(env: StreamExecutionEnvironment) -> DataStream:
        builder = FileSource.for_record_stream_format(fmt, options["path"])
        if interval is not None:
            builder.monitor_continuously(Duration.of_millis(parse_duration_ms(interval)))
        stream = env.from_source(
            builder.build(), WatermarkStrategy.no_watermarks(), f"Source: {name}"
        )
        scanned: DataStream = stream.uid(f"table-source-{path}")
        return scanned

    pushdown = None
    if (
        options["format"] == "csv"
        and not keys
        and not partitioned
        and columnar_csv_options(options)
    ):
        pushdown = _CsvPushdown(name, path, dict(options), fmt)
    columns = with_metadata(columns, schema, FILE_READABLE)
    return StreamScan(columns, path, reused(build), pushdown=pushdown)


def line_rows(columns: Columns, options: Mapping[str, str]) -> StreamFormat:
    """The row-at-a-time format of an unpartitioned table without metadata columns: each
    non-empty line through the table's deserializer, as a ``+I`` row."""
    return _LineRows(row_deserializer(options["format"], columns, options))


class _CsvPushdown:
    """A CSV table's scan computing pushed projections, filters and its watermark on Arrow
    batches (``columnar_csv``); each distinct ``ScanSpec`` is one source (its own uid), and
    equal ones share it."""

    def __init__(
        self, name: str, path: str, options: dict[str, str], row_format: StreamFormat
    ) -> None:
        self.name = name
        self.path = path
        self.options = options
        self.row_format = row_format
        self._build = reused(self._source)

    def build(self, spec: ScanSpec) -> Any:
        return lambda env: self._build(env, spec)

    def _source(self, env: StreamExecutionEnvironment, spec: ScanSpec) -> DataStream:
        fmt = ColumnarCsvFormat(spec, self.options, self.row_format)
        builder = FileSourceBuilder(fmt, (self.options["path"],))
        interval = self.options.get("source.monitor-interval")
        if interval is not None:
            builder.monitor_continuously(Duration.of_millis(parse_duration_ms(interval)))
        strategy = WatermarkStrategy.no_watermarks()
        if spec.rowtime is not None:
            strategy = source_watermarks(spec.delay_ms, spec.idle_ms)
        stream = env.from_source(builder.build(), strategy, f"Source: {self.name}")
        digest = hashlib.sha1(repr(spec).encode()).hexdigest()[:12]
        scanned: DataStream = stream.uid(f"table-source-{self.path}-{digest}")
        return scanned
