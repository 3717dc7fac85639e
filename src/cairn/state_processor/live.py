"""Reading the latest completed checkpoint of a running job: a private copy, read in peace.

A running job subsumes its checkpoints: once a newer one completes, the older one's
directory, and the shared files of incremental RocksDB checkpoints no retained checkpoint
references any more, are deleted. A Spark DataFrame is lazy and is read again by every
action, for as long as its user holds it; so reading a job's checkpoint in place would
either fail half-way when it is subsumed, or need the job to keep it for a reader it cannot
see end. The state processor therefore **copies first**: ``snapshot_latest`` copies the
newest completed checkpoint's ``_metadata`` and every file it references (private files
and ``../shared/`` SST files alike) into a directory of the reader's, as a self-contained
native savepoint (the same copy ``cairn savepoint --type native`` makes of a checkpoint),
and the reader reads only that copy.

Why a copy rather than a lease the job's cleanup would honour: the job is never disturbed.
Its coordinator does no extra I/O and waits for nothing, its retention and disk use stay
what its configuration says, and a reader that crashes or forgets to close leaves nothing
the job must honour or expire (Flink's rule: a job owns its checkpoints). The files the job
keeps are only ever read, never written, renamed or deleted by the reader. The price is one
copy of the checkpoint's files (a RocksDB reader downloads them to local disk anyway).

Invariant: a snapshot is either a complete copy of one completed checkpoint, or it is not
published: its ``_metadata`` is written last, after every referenced file was copied. If
the job deletes the checkpoint while it is being copied (a file missing, or its
``_metadata`` gone), the partial copy is removed and the then-newest checkpoint is copied,
up to ``attempts`` times; a checkpoint that is still there but cannot be read (corrupt, bad
signature) fails at once.

>>> # with SavepointReader.read_latest(spark, "file:///chk/<job-id>") as reader:
>>> #     reader.read_keyed_state("keyed-sum", SUM).createOrReplaceTempView("sums")
"""

from __future__ import annotations

import logging
import posixpath
import tempfile
from collections.abc import Mapping
from typing import Any

from cairn.checkpoint.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    UnverifiedCheckpointError,
)
from cairn.checkpoint.loading import has_metadata
from cairn.checkpoint.locations import protocol_of, remove_tree, resolve
from cairn.checkpoint.metadata import METADATA_FILE_NAME, CompletedCheckpoint
from cairn.checkpoint.storage import CheckpointStorage, load_checkpoint
from cairn.ids import JobId
from cairn.settings import SigningKey
from cairn.state_processor.errors import StateProcessorError

__all__ = ["DEFAULT_ATTEMPTS", "is_job_directory", "new_snapshot_dir", "snapshot_latest"]

log = logging.getLogger(__name__)

DEFAULT_ATTEMPTS = 5


def is_job_directory(path: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``path`` is a job's checkpoint directory (holding ``chk-<n>/``), not one
    checkpoint or savepoint (a directory with ``_metadata``, or that file)."""
    loc = resolve(path, storage_options)
    if loc.name == METADATA_FILE_NAME:
        return False
    return loc.fs.isdir(loc.path) and not has_metadata(loc)


def new_snapshot_dir() -> str:
    """A new private local directory for a snapshot (``file://``; on a cluster give a
    directory every executor can read instead)."""
    return "file://" + tempfile.mkdtemp(prefix="cairn-state-snapshot-")


def snapshot_latest(
    job_dir: str,
    target_dir: str,
    storage_options: Mapping[str, Any] | None = None,
    key: SigningKey | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
) -> CompletedCheckpoint:
    """Copy the newest completed checkpoint under ``job_dir`` into ``target_dir`` (empty or
    missing) as a self-contained savepoint; returns the copy (its ``checkpoint_id`` says
    which checkpoint it is).

    Raises:
        CheckpointNotFoundError: the job has no completed checkpoint.
        StateProcessorError: every attempt lost its checkpoint to the job's cleanup.
        CorruptCheckpointError: the checkpoint is there but cannot be read.
    """
    options = dict(storage_options or {})
    job = resolve(job_dir, options)
    storage = CheckpointStorage(
        job.parent.public(), JobId(posixpath.basename(job.path.rstrip("/"))), options, key
    )
    lost: list[int] = []
    for _ in range(attempts):
        checkpoint = load_checkpoint(job.public(), options, key)
        try:
            return storage.write_savepoint(
                checkpoint.metadata, target_dir, source_dir=checkpoint.directory
            )
        except (CheckpointNotFoundError, CorruptCheckpointError) as exc:
            if isinstance(exc, UnverifiedCheckpointError) or _still_there(checkpoint, options):
                raise
            lost.append(checkpoint.checkpoint_id)
            log.info(
                "chk-%d of %s was subsumed while it was copied; copying the newest again",
                checkpoint.checkpoint_id,
                job.public(),
            )
            same = protocol_of(target_dir) == protocol_of(job_dir)
            remove_tree(resolve(target_dir, options if same else {}))
    raise StateProcessorError(
        f"{job.public()}: the job subsumed every checkpoint while it was copied "
        f"(chk-{', chk-'.join(map(str, lost))}); retry, or give it a longer checkpoint "
        "interval or more retained checkpoints (execution.checkpointing.num-retained)"
    )


def _still_there(checkpoint: CompletedCheckpoint, options: Mapping[str, Any]) -> bool:
    try:
        return has_metadata(resolve(checkpoint.directory, options))
    except OSError:
        return False
