"""Partitions of a ``filesystem`` table (``PARTITIONED BY (dt, hm)``), as Flink lays them out
and commits them.

Invariant: a row goes to the directory ``<path>/dt=<value>/hm=<value>`` (Hive's layout: each
value escaped as Flink's ``PartitionPathUtils.escapePathName`` does, a NULL or empty value
``partition.default-name``), and its partition columns are not written into the file — the
directory holds them; reading the table back puts them in again from the path. A partition's
commit (``sink.partition-commit.policy.kind`` = ``success-file``: an empty ``_SUCCESS`` file
in its directory) happens after the part files written into it are visible, once its trigger
is due: ``process-time`` — the wall clock passed the partition's first write plus
``sink.partition-commit.delay``; ``partition-time`` — the watermark passed the time
extracted from the partition's values (``partition.time-extractor.timestamp-pattern``) plus
the delay; and for every partition at the end of input.

>>> partition_path(("dt", "hm"), ("2024-01-02", "10:05"), "__DEFAULT_PARTITION__")
'dt=2024-01-02/hm=10%3A05'
>>> partition_values("dt=2024-01-02/hm=10%3A05", ("dt", "hm"))
('2024-01-02', '10:05')
>>> partition_time_ms("$dt $hm:00", ("dt", "hm"), ("1970-01-02", "00:01"))
86460000
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.common.config_values import parse_duration_ms
from cairn.datastream.connectors.file_sink_config import BucketAssigner, BucketCommitPolicy
from cairn.table.errors import ValidationError

__all__ = [
    "PARTITION_OPTIONS",
    "PartitionBuckets",
    "PartitionCommit",
    "check_partitions",
    "partition_commit",
    "partition_path",
    "partition_time_ms",
    "partition_values",
]

DEFAULT_PARTITION = "__DEFAULT_PARTITION__"

#: The partition options of a ``filesystem`` table (Flink's keys).
PARTITION_OPTIONS = {
    "partition.default-name",
    "partition.time-extractor.kind",
    "partition.time-extractor.timestamp-pattern",
    "partition.time-extractor.timestamp-formatter",
    "sink.partition-commit.trigger",
    "sink.partition-commit.delay",
    "sink.partition-commit.watermark-time-zone",
    "sink.partition-commit.policy.kind",
    "sink.partition-commit.success-file.name",
}

# Flink's PartitionPathUtils.CHAR_TO_ESCAPE: control characters and these.
_ESCAPED = frozenset(chr(c) for c in range(1, 32)) | frozenset("\"#%'*/:=?\\\x7f{[]^")


def _escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def _unescape(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def partition_path(names: Sequence[str], values: Sequence[Any], default_name: str) -> str:
    """The relative directory of a row's partition: ``name=value/...``, values escaped."""
    parts = []
    for name, value in zip(names, values, strict=True):
        text = _text(value)
        parts.append(f"{_escape(name)}={_escape(text) if text else default_name}")
    return "/".join(parts)


def partition_values(path: str, names: Sequence[str]) -> tuple[str | None, ...]:
    """The partition values in a file's ``path`` (its ``name=value`` segments; the default
    partition name is NULL), in the order of ``names``."""
    found: dict[str, str | None] = {}
    for segment in path.replace("\\", "/").split("/"):
        if "=" in segment:
            key, _, value = segment.partition("=")
            text = _unescape(value)
            found[_unescape(key)] = None if text == DEFAULT_PARTITION else text
    return tuple(found.get(n) for n in names)


def partition_time_ms(pattern: str | None, names: Sequence[str], values: Sequence[Any]) -> int:
    """Flink's default partition time extractor: ``pattern`` with ``$name`` replaced by the
    values (no pattern: the first value), read as ``yyyy-MM-dd[ HH:mm:ss]`` in UTC."""
    if pattern is None:
        text = _text(values[0]) or ""
    else:
        text = pattern
        for name, value in sorted(zip(names, values, strict=True), key=lambda p: -len(p[0])):
            text = text.replace(f"${name}", _text(value) or "")
    text = text.strip()
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            moment = datetime.datetime.strptime(text, fmt)
        except ValueError:
            continue
        return int(moment.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    raise ValueError(f"Partition time '{text}' is not yyyy-MM-dd [HH:mm:ss]")


@dataclass(frozen=True)
class PartitionBuckets(BucketAssigner):
    """The bucket of a row: its partition's directory."""

    indexes: tuple[int, ...]
    names: tuple[str, ...]
    default_name: str = DEFAULT_PARTITION

    def get_bucket_id(self, element: Any, current_time_ms: int) -> str:
        return partition_path(self.names, [element[i] for i in self.indexes], self.default_name)


@dataclass(frozen=True)
class PartitionCommit(BucketCommitPolicy):
    """``sink.partition-commit.*`` with the ``success-file`` policy."""

    trigger: str  # "process-time" or "partition-time"
    delay_ms: int
    names: tuple[str, ...]
    pattern: str | None
    success_file: str = "_SUCCESS"

    def is_due(self, bucket: str, created_ms: int, now_ms: int, watermark: int) -> bool:
        if self.trigger == "process-time":
            return now_ms >= created_ms + self.delay_ms
        values = partition_values(bucket, self.names)
        try:
            time_ms = partition_time_ms(self.pattern, self.names, values)
        except ValueError:
            return False  # no time in its values (the default partition): at end of input
        return watermark >= time_ms + self.delay_ms

    def commit(self, fs: Any, directory: str) -> None:
        fs.makedirs(directory, exist_ok=True)
        with fs.open(f"{directory.rstrip('/')}/{self.success_file}", "wb"):
            pass


def check_partitions(
    keys: Sequence[str], column_names: Sequence[str], options: Mapping[str, str]
) -> None:
    """Fail at planning on a partition key that is not a column, on a partition of every
    column, or on a partition commit option Cairn does not take."""
    for key in keys:
        if key not in column_names:
            raise ValidationError(f"Partition column '{key}' not defined in the table schema")
    if keys and len(keys) == len(column_names):
        raise ValidationError("A partitioned filesystem table needs a non-partition column")
    partition_commit(keys, options)


def partition_commit(keys: Sequence[str], options: Mapping[str, str]) -> PartitionCommit | None:
    """The partition commit the options ask for (``None``: none, the default)."""
    kinds = [k.strip() for k in options.get("sink.partition-commit.policy.kind", "").split(",")]
    kinds = [k for k in kinds if k]
    for kind in kinds:
        if kind != "success-file":
            raise ValidationError(
                f"Partition commit policy '{kind}' is not supported by Cairn:"
                " 'sink.partition-commit.policy.kind' takes 'success-file'"
            )
    trigger = options.get("sink.partition-commit.trigger", "process-time")
    if trigger not in ("process-time", "partition-time"):
        raise ValidationError(
            f"Could not parse value '{trigger}' for key 'sink.partition-commit.trigger':"
            " 'process-time' or 'partition-time'"
        )
    delay_text = options.get("sink.partition-commit.delay", "0 s")
    try:
        delay = parse_duration_ms(delay_text)
    except ValueError as e:
        raise ValidationError(
            f"Could not parse value '{delay_text}' for key 'sink.partition-commit.delay': {e}"
        ) from None
    zone = options.get("sink.partition-commit.watermark-time-zone", "UTC")
    if zone.upper() != "UTC":
        raise ValidationError(
            "'sink.partition-commit.watermark-time-zone' other than UTC is not supported yet"
        )
    extractor = options.get("partition.time-extractor.kind", "default")
    if extractor != "default" or "partition.time-extractor.timestamp-formatter" in options:
        raise ValidationError("Cairn extracts partition times with the default extractor only")
    if not kinds or not keys:
        return None
    return PartitionCommit(
        trigger,
        delay,
        tuple(keys),
        options.get("partition.time-extractor.timestamp-pattern"),
        options.get("sink.partition-commit.success-file.name", "_SUCCESS"),
    )
