"""Part-file naming, rolling and bucketing policies of the ``FileSink`` (PyFlink names).

Invariant: every object here is an immutable, picklable value that makes decisions from its
arguments only (records, part-file facts, times); the writer owns all mutable state.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

__all__ = [
    "BasePathBucketAssigner",
    "BucketAssigner",
    "BucketCommitPolicy",
    "DateTimeBucketAssigner",
    "DefaultRollingPolicy",
    "OnCheckpointRollingPolicy",
    "OutputFileConfig",
    "PartFileInfo",
    "RollingPolicy",
]


@dataclass(frozen=True)
class OutputFileConfig:
    """Prefix and suffix of part file names: ``<prefix>-<uuid>-<subtask>-<n><suffix>``.

    >>> builder = OutputFileConfig.builder().with_part_prefix("part")
    >>> config = builder.with_part_suffix(".txt").build()
    >>> config.get_part_suffix()
    '.txt'
    """

    part_prefix: str = "part"
    part_suffix: str = ""

    def __post_init__(self) -> None:
        if not self.part_prefix or self.part_prefix.startswith((".", "_")):
            raise ValueError(f"part prefix {self.part_prefix!r} would make finished files hidden")
        if "/" in self.part_prefix + self.part_suffix:
            raise ValueError("part prefix and suffix must not contain '/'")

    @staticmethod
    def builder() -> OutputFileConfigBuilder:
        return OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix


class OutputFileConfigBuilder:
    def __init__(self) -> None:
        self._prefix = "part"
        self._suffix = ""

    def with_part_prefix(self, prefix: str) -> OutputFileConfigBuilder:
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> OutputFileConfigBuilder:
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


# ---- rolling -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartFileInfo:
    """What a rolling policy knows of the open part file (times in seconds)."""

    size: int
    opened_at: float
    last_write_at: float


class RollingPolicy:
    """When the open part file is closed and a new one started.

    Cairn always rolls at a checkpoint (``prepare_commit``): fsspec has no resumable
    writer, so a part file never spans two checkpoints. Between checkpoints, the default
    policy also rolls on size and time, evaluated when a record arrives.
    """

    def should_roll_on_event(self, part: PartFileInfo, now: float) -> bool:
        return False

    @staticmethod
    def default_rolling_policy(
        part_size: int = 1024 * 1024 * 128,
        rollover_interval: int = 60 * 1000,
        inactivity_interval: int = 60 * 1000,
    ) -> DefaultRollingPolicy:
        """Roll at ``part_size`` bytes, or when the file is ``rollover_interval`` ms old, or
        after ``inactivity_interval`` ms without writes (intervals in ms, like PyFlink)."""
        return DefaultRollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> OnCheckpointRollingPolicy:
        """Roll only at checkpoints (the default, and the only choice, for bulk formats)."""
        return OnCheckpointRollingPolicy()


@dataclass(frozen=True)
class DefaultRollingPolicy(RollingPolicy):
    part_size: int = 1024 * 1024 * 128
    rollover_interval: int = 60 * 1000
    inactivity_interval: int = 60 * 1000

    def __post_init__(self) -> None:
        if min(self.part_size, self.rollover_interval, self.inactivity_interval) <= 0:
            raise ValueError("rolling policy sizes and intervals must be positive")

    def should_roll_on_event(self, part: PartFileInfo, now: float) -> bool:
        return (
            part.size >= self.part_size
            or (now - part.opened_at) * 1000 >= self.rollover_interval
            or (now - part.last_write_at) * 1000 >= self.inactivity_interval
        )


@dataclass(frozen=True)
class OnCheckpointRollingPolicy(RollingPolicy):
    pass


# ---- bucketing -----------------------------------------------------------------------------


class BucketAssigner:
    """Chooses the sub-directory (bucket) of the base path a record is written to.

    Subclass and override ``get_bucket_id`` for custom bucketing (e.g. by a record field);
    ``""`` means the base path itself.
    """

    def get_bucket_id(self, element: Any, current_time_ms: int) -> str:
        raise NotImplementedError

    @staticmethod
    def base_path_bucket_assigner() -> BasePathBucketAssigner:
        """No buckets: every part file goes to the base path (Cairn's default)."""
        return BasePathBucketAssigner()

    @staticmethod
    def date_time_bucket_assigner(
        format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None
    ) -> DateTimeBucketAssigner:
        """Buckets ``<base>/<processing time formatted by format_str>`` (Flink's default)."""
        return DateTimeBucketAssigner(format_str, timezone_id)


@dataclass(frozen=True)
class BasePathBucketAssigner(BucketAssigner):
    def get_bucket_id(self, element: Any, current_time_ms: int) -> str:
        return ""


_JAVA_TOKENS = {
    "yyyy": "%Y",
    "yy": "%y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
}
_JAVA_PATTERN = re.compile(r"yyyy|yy|MM|dd|HH|mm|ss|'[^']*'|[A-Za-z]")


@functools.lru_cache(maxsize=64)
def java_to_strftime(pattern: str) -> str:
    """Translate the common ``java.time`` pattern letters to ``strftime``.

    >>> java_to_strftime("yyyy-MM-dd--HH")
    '%Y-%m-%d--%H'
    """
    out: list[str] = []
    pos = 0
    for match in _JAVA_PATTERN.finditer(pattern):
        out.append(pattern[pos : match.start()].replace("%", "%%"))
        token = match.group()
        if token.startswith("'"):
            out.append(token[1:-1].replace("%", "%%"))
        elif token in _JAVA_TOKENS:
            out.append(_JAVA_TOKENS[token])
        else:
            raise ValueError(f"unsupported date pattern letter {token!r} in {pattern!r}")
        pos = match.end()
    out.append(pattern[pos:].replace("%", "%%"))
    return "".join(out)


@dataclass(frozen=True)
class DateTimeBucketAssigner(BucketAssigner):
    format_str: str = "yyyy-MM-dd--HH"
    timezone_id: str | None = None

    def __post_init__(self) -> None:
        java_to_strftime(self.format_str)  # fail early on the driver
        if self.timezone_id is not None:
            ZoneInfo(self.timezone_id)

    def get_bucket_id(self, element: Any, current_time_ms: int) -> str:
        tz: tzinfo | None = ZoneInfo(self.timezone_id) if self.timezone_id else None
        moment = datetime.fromtimestamp(current_time_ms / 1000, tz or timezone.utc)
        if tz is None:
            moment = moment.astimezone()  # the worker's local zone, like Java's default
        return moment.strftime(java_to_strftime(self.format_str))


class BucketCommitPolicy:
    """When a bucket (a partition directory) is complete, and how that is marked: the
    partition commit of Flink's filesystem table sink. ``is_due`` decides from the bucket's
    first write time in this writer, the wall clock and the writer's watermark; ``commit``
    marks the directory (idempotent: it may run again after a restore)."""

    def is_due(self, bucket: str, created_ms: int, now_ms: int, watermark: int) -> bool:
        raise NotImplementedError

    def commit(self, fs: Any, directory: str) -> None:
        raise NotImplementedError
