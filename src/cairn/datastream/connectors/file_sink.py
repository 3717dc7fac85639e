"""An exactly-once file sink with two-phase commit through fsspec (PyFlink ``FileSink``).

Invariant: records only ever go to hidden in-progress files named after the writer's job
and attempt; a part file becomes visible by one rename (``Committer.commit``) of a committable
returned by ``prepare_commit`` at a checkpoint, and on restore, once the restored committables
are committed, every in-progress file of an earlier attempt or run is deleted by
``abort_leftovers``.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from cairn.api.connectors import Committer, Sink, SinkWriter, SinkWriterContext
from cairn.clock import Clock, SystemClock
from cairn.common.serialization import BulkWriter, BulkWriterFactory, Encoder
from cairn.common.storage_options import url_to_fresh_fs
from cairn.datastream.connectors.file_sink_config import (
    BasePathBucketAssigner,
    BucketAssigner,
    BucketCommitPolicy,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    PartFileInfo,
    RollingPolicy,
)
from cairn.events import MAX_WATERMARK, MIN_WATERMARK
from cairn.ids import CheckpointId

__all__ = [
    "BucketCommittable",
    "BulkFormatBuilder",
    "FileCommitter",
    "FileSink",
    "FileSinkCommittable",
    "FileSinkWriter",
    "RowFormatBuilder",
]


@dataclass(frozen=True)
class FileSinkCommittable:
    """A closed, durable in-progress file and the visible name it gets on commit (URLs)."""

    in_progress_path: str
    final_path: str


@dataclass(frozen=True)
class BucketCommittable:
    """A bucket directory (URL) whose ``BucketCommitPolicy`` came due: committed after the
    part files of the same checkpoint."""

    directory: str


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")  # of a job id, in a file name


def attempt_tag(context: SinkWriterContext) -> str:
    """What the in-progress names of one attempt of one job end with: ``<job id>.<attempt>``.

    >>> attempt_tag(SinkWriterContext(0, 1, 3, "9f2c"))
    '9f2c.3'
    """
    return f"{_UNSAFE.sub('_', context.job_id)}.{context.attempt_number}"


def in_progress_name(config: OutputFileConfig, uid: str, subtask: int, n: int, tag: str) -> str:
    return f".{config.part_prefix}-{uid}-{subtask}-{n}{config.part_suffix}.inprogress.{tag}"


def final_name(config: OutputFileConfig, uid: str, subtask: int, n: int) -> str:
    return f"{config.part_prefix}-{uid}-{subtask}-{n}{config.part_suffix}"


class FileSink(Sink):
    """Writes records into part files under ``base_path``, exactly once.

    >>> sink = (FileSink.for_row_format("/tmp/out", Encoder.simple_string_encoder())
    ...         .with_output_file_config(OutputFileConfig("part", ".txt"))
    ...         .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=1 << 20))
    ...         .build())

    How Cairn does it:

    * Each writer (one per subtask and attempt) writes ``.<prefix>-<uuid>-<subtask>-<n><suffix>
      .inprogress.<job id>.<attempt>``; hidden names keep them out of Spark, pyarrow and
      ``FileSource`` reads. At every checkpoint the open files are flushed, fsync'ed (local
      files) and closed, and become committables; after the checkpoint completes the
      committer renames them to ``<prefix>-<uuid>-<subtask>-<n><suffix>``. Output is
      visible only for completed checkpoints; after a failure, data written since the last
      one is rewritten by the new attempt into new files, and the old attempt's leftovers are
      deleted.
    * Buckets: by default every part file goes straight to ``base_path``, so that
      ``spark.read.text(base_path)`` / ``.parquet(base_path)`` reads it. Flink's default is
      date-hour buckets; ask for them with ``BucketAssigner.date_time_bucket_assigner()``.
    * A part file never spans two checkpoints (no resumable writers in fsspec); the rolling
      policy may roll earlier, checked when a record arrives. ``with_bucket_check_interval``
      is accepted for API compatibility and ignored.
    * ``with_bucket_commit(policy)`` (the filesystem table sink's partition commit): a
      bucket a writer wrote into is committed — e.g. a ``_SUCCESS`` file written into it —
      by the committer after the checkpoint at whose barrier the policy found it due (by
      wall clock or by the writer's watermark), and at the end of input; each writer
      commits the buckets it wrote, and its buckets not yet due are in its state.
    * On object stores (s3://, gs://, ...) fsspec's rename is a copy plus a delete: correct
      (commit is idempotent) but slower, and the copy costs storage traffic.
    * One job writes to a base path with a given prefix: on restore (and on every restart)
      ``abort_leftovers`` deletes every in-progress file with that prefix that the current
      attempt did not write, including those of an earlier run the job was restored from.
    """

    def __init__(
        self,
        base_path: str,
        encoder: Encoder | None = None,
        bulk_writer_factory: BulkWriterFactory | None = None,
        bucket_assigner: BucketAssigner | None = None,
        rolling_policy: RollingPolicy | None = None,
        output_file_config: OutputFileConfig | None = None,
        bucket_commit: BucketCommitPolicy | None = None,
    ) -> None:
        if (encoder is None) == (bulk_writer_factory is None):
            raise ValueError("a file sink needs exactly one of encoder and bulk_writer_factory")
        self.base_path = str(base_path)
        self.encoder = encoder
        self.bulk_writer_factory = bulk_writer_factory
        self.bucket_assigner = bucket_assigner or BasePathBucketAssigner()
        self.rolling_policy = rolling_policy or (
            RollingPolicy.default_rolling_policy() if encoder else OnCheckpointRollingPolicy()
        )
        self.output_file_config = output_file_config or OutputFileConfig()
        self.bucket_commit = bucket_commit

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> RowFormatBuilder:
        """Records encoded one by one (e.g. text lines)."""
        return RowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> BulkFormatBuilder:
        """Records written by a bulk writer, e.g. ``ParquetBulkWriters.for_row_type(schema)``."""
        return BulkFormatBuilder(base_path, writer_factory)

    def create_writer(
        self,
        context: SinkWriterContext,
        restored_state: Sequence[Any],
        clock: Clock = SystemClock(),
    ) -> FileSinkWriter:
        # The writer's random uuid keeps new names apart from old ones; what is restored is
        # the buckets not yet committed (``with_bucket_commit``).
        writer = FileSinkWriter(self, context, clock)
        writer.restore_buckets(restored_state)
        return writer

    def create_committer(self) -> FileCommitter:
        return FileCommitter(self.base_path, self.output_file_config, self.bucket_commit)


_B = TypeVar("_B", bound="_Builder")


class _Builder:
    def __init__(self, base_path: str) -> None:
        self._base_path = base_path
        self._assigner: BucketAssigner | None = None
        self._policy: RollingPolicy | None = None
        self._config: OutputFileConfig | None = None
        self._bucket_commit: BucketCommitPolicy | None = None

    def with_bucket_commit(self: _B, policy: BucketCommitPolicy) -> _B:
        """Commit a bucket once ``policy`` finds it due (see ``FileSink``)."""
        self._bucket_commit = policy
        return self

    def with_bucket_check_interval(self: _B, interval: int) -> _B:
        """Accepted for PyFlink compatibility; Cairn checks rolling on each record."""
        return self

    def with_bucket_assigner(self: _B, bucket_assigner: BucketAssigner) -> _B:
        self._assigner = bucket_assigner
        return self

    def with_output_file_config(self: _B, output_file_config: OutputFileConfig) -> _B:
        self._config = output_file_config
        return self


class RowFormatBuilder(_Builder):
    def __init__(self, base_path: str, encoder: Encoder) -> None:
        super().__init__(base_path)
        self._encoder = encoder

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> RowFormatBuilder:
        self._policy = rolling_policy
        return self

    def build(self) -> FileSink:
        return FileSink(
            self._base_path,
            self._encoder,
            None,
            self._assigner,
            self._policy,
            self._config,
            self._bucket_commit,
        )


class BulkFormatBuilder(_Builder):
    def __init__(self, base_path: str, writer_factory: BulkWriterFactory) -> None:
        super().__init__(base_path)
        self._factory = writer_factory

    def with_rolling_policy(self, rolling_policy: OnCheckpointRollingPolicy) -> BulkFormatBuilder:
        if not isinstance(rolling_policy, OnCheckpointRollingPolicy):
            raise TypeError("bulk formats roll on checkpoints only (on_checkpoint_rolling_policy)")
        self._policy = rolling_policy
        return self

    def build(self) -> FileSink:
        return FileSink(
            self._base_path,
            None,
            self._factory,
            self._assigner,
            self._policy,
            self._config,
            self._bucket_commit,
        )


# ---- writer --------------------------------------------------------------------------------


class _OpenPart:
    """An in-progress part file being written (mutable, owned by one writer)."""

    def __init__(
        self, in_progress: str, final: str, handle: Any, bulk: BulkWriter | None, now: float
    ) -> None:
        self.in_progress = in_progress
        self.final = final
        self.handle = handle
        self.bulk = bulk
        self.size = 0
        self.opened_at = now
        self.last_write_at = now

    def info(self) -> PartFileInfo:
        return PartFileInfo(self.size, self.opened_at, self.last_write_at)


class FileSinkWriter(SinkWriter):
    """Writes one subtask's records; ``prepare_commit`` closes every open part file."""

    def __init__(self, sink: FileSink, context: SinkWriterContext, clock: Clock) -> None:
        self._sink = sink
        self._encoder = sink.encoder
        self._context = context
        self._now_ms = clock.now_ms  # wall clock: time buckets and rolling
        self._fs, self._base = url_to_fresh_fs(sink.base_path)
        self._uid = str(uuid.uuid4())
        self._tag = attempt_tag(context)
        self._counter = 0
        self._parts: dict[str, _OpenPart] = {}
        self._pending: list[FileSinkCommittable] = []  # closed, not yet handed out
        self._made_dirs: set[str] = set()
        self._single_bucket = isinstance(sink.bucket_assigner, BasePathBucketAssigner)
        # with a bucket commit policy: each bucket written and not yet committed, with the
        # wall-clock ms of its first write; the writer's watermark; whether input ended
        self._uncommitted: dict[str, int] = {}
        self._watermark = MIN_WATERMARK
        self._ended = False

    def restore_buckets(self, restored_state: Sequence[Any]) -> None:
        """The uncommitted buckets of a restored writer state (any subtask's: rescaled)."""
        for entry in restored_state:
            if isinstance(entry, tuple) and len(entry) == 3 and entry[0] == "bucket":
                self._uncommitted.setdefault(entry[1], entry[2])

    def write_watermark(self, watermark: int) -> None:
        self._watermark = watermark

    def write(self, record: Any) -> None:
        now_ms = self._now_ms()
        bucket = self._sink.bucket_assigner.get_bucket_id(record, now_ms)
        now = now_ms / 1000
        part = self._part_for(bucket, now)
        if part.bulk is not None:
            part.bulk.add_element(record)
        else:
            assert self._encoder is not None  # a row-format sink
            data = self._encoder.encode(record)
            part.handle.write(data)
            part.size += len(data)
        part.last_write_at = now

    def write_batch(self, records: Sequence[Any]) -> None:
        if not self._single_bucket:
            super().write_batch(records)
            return
        if not records:
            return
        # One bucket: one rolling check and one encode/write per batch (a part may thus
        # exceed part_size by one batch).
        now = self._now_ms() / 1000
        part = self._part_for("", now)
        if part.bulk is not None:
            part.bulk.add_elements(records)
        else:
            assert self._encoder is not None
            data = self._encoder.encode_batch(records)
            part.handle.write(data)
            part.size += len(data)
        part.last_write_at = now

    def _part_for(self, bucket: str, now: float) -> _OpenPart:
        part = self._parts.get(bucket)
        if part is not None and self._sink.rolling_policy.should_roll_on_event(part.info(), now):
            self._roll(bucket)
            part = None
        if part is None:
            part = self._open(bucket, now)
        return part

    def _open(self, bucket: str, now: float) -> _OpenPart:
        directory = f"{self._base.rstrip('/')}/{bucket}" if bucket else self._base.rstrip("/")
        if directory not in self._made_dirs:
            self._fs.makedirs(directory, exist_ok=True)
            self._made_dirs.add(directory)
        if self._sink.bucket_commit is not None:
            self._uncommitted.setdefault(bucket, int(now * 1000))
        config, ctx, n = self._sink.output_file_config, self._context, self._counter
        self._counter += 1
        in_progress = f"{directory}/" + in_progress_name(
            config, self._uid, ctx.subtask_index, n, self._tag
        )
        final = f"{directory}/" + final_name(config, self._uid, ctx.subtask_index, n)
        handle = self._fs.open(in_progress, "wb")
        factory = self._sink.bulk_writer_factory
        bulk = factory.create(handle) if factory is not None else None
        part = _OpenPart(in_progress, final, handle, bulk, now)
        self._parts[bucket] = part
        return part

    def _roll(self, bucket: str) -> None:
        part = self._parts.pop(bucket)
        if part.bulk is not None:
            part.bulk.finish()
        part.handle.flush()
        if isinstance(self._fs, LocalFileSystem):
            os.fsync(part.handle.fileno())  # durable before it is promised to a checkpoint
        part.handle.close()
        unstrip = self._fs.unstrip_protocol
        self._pending.append(FileSinkCommittable(unstrip(part.in_progress), unstrip(part.final)))

    def prepare_commit(self, checkpoint_id: CheckpointId) -> list[FileSinkCommittable]:
        for bucket in list(self._parts):
            self._roll(bucket)
        committables: list[Any] = list(self._pending)
        self._pending = []
        policy = self._sink.bucket_commit
        if policy is not None:
            now_ms = self._now_ms()
            watermark = MAX_WATERMARK if self._ended else self._watermark
            for bucket, created in list(self._uncommitted.items()):
                if self._ended or policy.is_due(bucket, created, now_ms, watermark):
                    del self._uncommitted[bucket]
                    directory = f"{self._base.rstrip('/')}/{bucket}" if bucket else self._base
                    committables.append(BucketCommittable(self._fs.unstrip_protocol(directory)))
        return committables

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[Any]:
        return [("bucket", b, created) for b, created in self._uncommitted.items()]

    def flush(self, end_of_input: bool) -> None:
        self._ended = self._ended or end_of_input
        for part in self._parts.values():
            part.handle.flush()

    def close(self) -> None:
        # Files not handed out by prepare_commit belong to no checkpoint: drop them now
        # rather than leave them to the next attempt's abort_leftovers.
        for part in self._parts.values():
            with contextlib.suppress(Exception):
                part.handle.close()
            with contextlib.suppress(OSError):
                self._fs.rm(part.in_progress)
        for committable in self._pending:
            with contextlib.suppress(OSError):
                fs, path = url_to_fresh_fs(committable.in_progress_path)
                fs.rm(path)
        self._parts.clear()
        self._pending.clear()


# ---- committer -----------------------------------------------------------------------------


class FileCommitter(Committer):
    """Renames committed part files to their visible names; safe to replay."""

    def __init__(
        self,
        base_path: str,
        output_file_config: OutputFileConfig,
        bucket_commit: BucketCommitPolicy | None = None,
    ) -> None:
        self.base_path = base_path
        self.output_file_config = output_file_config
        self.bucket_commit = bucket_commit

    def commit(self, committables: Sequence[Any]) -> None:
        """The part files, then the buckets due (after every file of theirs is visible)."""
        synced_dirs: dict[str, AbstractFileSystem] = {}
        buckets = [c for c in committables if isinstance(c, BucketCommittable)]
        for c in committables:
            if isinstance(c, BucketCommittable):
                continue
            fs, in_progress = url_to_fresh_fs(c.in_progress_path)
            _, final = url_to_fresh_fs(c.final_path)
            if fs.exists(in_progress):
                if fs.exists(final):
                    fs.rm(in_progress)  # an earlier copy-then-delete rename stopped halfway
                else:
                    fs.mv(in_progress, final)
                synced_dirs[final.rsplit("/", 1)[0]] = fs
            elif not fs.exists(final):
                raise FileNotFoundError(
                    f"cannot commit {c.final_path}: neither it nor its in-progress file "
                    f"{c.in_progress_path} exists"
                )
        for directory, fs in synced_dirs.items():
            if isinstance(fs, LocalFileSystem):
                _fsync_dir(directory)
        if self.bucket_commit is not None:
            for bucket in buckets:
                fs, directory = url_to_fresh_fs(bucket.directory)
                self.bucket_commit.commit(fs, directory)

    def abort_leftovers(self, context: SinkWriterContext) -> None:
        """Delete every in-progress file of this sink's prefix and suffix that the attempt of
        ``context`` did not write: earlier attempts of this job and earlier runs (a job
        restored with ``--from-checkpoint`` starts at attempt 0 again). Called after the
        restored committables were committed, so none of their files is among them."""
        config = self.output_file_config
        pattern = re.compile(
            rf"^\.{re.escape(config.part_prefix)}-.+{re.escape(config.part_suffix)}"
            r"\.inprogress\.(.+)$"
        )
        current = attempt_tag(context)
        fs, base = url_to_fresh_fs(self.base_path)
        if not fs.exists(base):
            return
        for path in fs.find(base, withdirs=False):
            match = pattern.match(path.rsplit("/", 1)[-1])
            if match and match.group(1) != current:
                with contextlib.suppress(FileNotFoundError):  # another cleaner was first
                    fs.rm(path)


def _fsync_dir(directory: str) -> None:
    """Make renames in ``directory`` durable (POSIX); best effort elsewhere."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
