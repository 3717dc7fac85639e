"""Checkpoint storage on any fsspec filesystem (local, memory://, s3://, hdfs://, ...).

Invariant: a checkpoint directory ``<url>/<job_id>/chk-<n>/`` is complete iff its ``_metadata``
exists; ``_metadata`` is written last and atomically (rename on local disks, a single put on
object stores), and every path it references is relative to that directory. On a local disk
everything written is private to the job's user (``local_files``). With a signing key, a
state file's name ends with the SHA-256 of its content, so the signed metadata covers every
state byte, and nothing is read from a checkpoint before its signature and digests are
checked.

This module is the job's side (``CheckpointStorage``: write, publish, discard, savepoints); it
re-exports what other modules import from it. Beside it: ``locations`` (fsspec paths and
private, atomic writes), ``state_files`` (state file writer and reader, digests), ``loading``
(resolving and reading completed checkpoints), ``inspection`` (verifying, listing).

Layout (as in Flink)::

    <url>/<job_id>/chk-7/_metadata
    <url>/<job_id>/chk-7/<state-file-name>-<uuid>[-sha256-<hex digest of the content>]
    <url>/<job_id>/shared/<state-file-name>-<uuid>[-sha256-...]   (incremental checkpoints)
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from cairn.checkpoint import local_files
from cairn.checkpoint.errors import (
    CheckpointNotFoundError,
    SavepointRejectedError,
    SavepointTargetExistsError,
)
from cairn.checkpoint.handles import SHARED_DIR_NAME, SHARED_PATH_PREFIX
from cairn.checkpoint.inspection import CheckpointSummary, list_checkpoints
from cairn.checkpoint.job_identity import RUN_STATUS_FILE
from cairn.checkpoint.loading import (
    CHECKPOINT_DIR_PREFIX,
    chk_subdirs,
    has_metadata,
    load_checkpoint,
    load_with_signature,
    read_metadata,
    resolve_checkpoint_dirs,
)
from cairn.checkpoint.locations import (
    Location,
    atomic_write,
    check_relative,
    copy_file,
    locate,
    makedirs,
    protocol_of,
    remove_tree,
    resolve,
)
from cairn.checkpoint.metadata import (
    METADATA_FILE_NAME,
    CheckpointMetadata,
    CompletedCheckpoint,
    encode_metadata,
)
from cairn.checkpoint.shared_state import private_path, without_shared_files
from cairn.checkpoint.state_files import (
    CheckpointStateReader,
    CheckpointStateWriter,
    open_reader,
    open_writer,
    state_file_digest,
)
from cairn.ids import CheckpointId, JobId
from cairn.settings import SigningKey

__all__ = [  # what other modules import from here (the reading and file parts live beside it)
    "CHECKPOINT_DIR_PREFIX",
    "CheckpointStateReader",
    "CheckpointStateWriter",
    "CheckpointStorage",
    "default_storage_url",
    "dispose_savepoint",
    "load_checkpoint",
    "open_reader",
    "open_writer",
    "publish_metadata",
    "read_metadata",
    "resolve_checkpoint_dirs",
    "state_file_digest",
]

log = logging.getLogger(__name__)


def default_storage_url() -> str:
    """``file://<tempdir>/cairn-checkpoints-<uid>`` (see ``local_files.default_root``), used
    when the job configures no storage."""
    return "file://" + local_files.default_root()


def publish_metadata(
    metadata: CheckpointMetadata,
    directory: str,
    storage_options: Mapping[str, Any] | None = None,
    key: SigningKey | None = None,
) -> CompletedCheckpoint:
    """Write ``metadata`` as ``directory/_metadata`` (atomically, signed with ``key`` if
    given): the last step of writing a savepoint whose state files are already there.

    Raises:
        FileExistsError: ``directory`` already holds a checkpoint or savepoint.
    """
    loc = resolve(directory, storage_options)
    if loc.fs.exists(loc.join(METADATA_FILE_NAME).path):
        raise FileExistsError(f"{loc.public()}: already contains a savepoint or checkpoint")
    makedirs(loc)
    atomic_write(loc.join(METADATA_FILE_NAME), encode_metadata(metadata, key))
    return CompletedCheckpoint(metadata, loc.public())


class CheckpointStorage:
    """The checkpoint directories of one job; picklable (re-resolved from url and options).

    ``signing_key`` signs the metadata it writes and is required of what it reads. Without
    ``url``, the per-user default root is used (created 0700, refused if it is not private).

    >>> s = CheckpointStorage("memory://doc-storage", "job-1")
    >>> s.checkpoint_dir(CheckpointId(7))
    'memory:///doc-storage/job-1/chk-7'
    """

    def __init__(
        self,
        url: str | None,
        job_id: JobId,
        storage_options: Mapping[str, Any] | None = None,
        signing_key: SigningKey | None = None,
    ) -> None:
        if not job_id or "/" in job_id:
            raise ValueError(f"job_id must be a non-empty name without '/', got {job_id!r}")
        if not url:
            local_files.ensure_private_root(local_files.default_root())
        self.url = url or default_storage_url()
        self.job_id = job_id
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self.signing_key = signing_key
        self._job = resolve(self.url, self.storage_options).join(job_id)

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.url, self.job_id, self.storage_options, self.signing_key)
        return (CheckpointStorage, args)

    def __repr__(self) -> str:
        return f"CheckpointStorage({self.url!r}, {self.job_id!r})"

    @property
    def job_dir(self) -> str:
        return self._job.public()

    def _chk(self, checkpoint_id: CheckpointId) -> Location:
        return self._job.join(f"{CHECKPOINT_DIR_PREFIX}{checkpoint_id}")

    def checkpoint_dir(self, checkpoint_id: CheckpointId) -> str:
        return self._chk(checkpoint_id).public()

    def writer(self, checkpoint_id: CheckpointId) -> CheckpointStateWriter:
        """Writer of checkpoint ``checkpoint_id``'s state files (digest-named if it signs)."""
        digests = self.signing_key is not None
        return CheckpointStateWriter(self._chk(checkpoint_id), checkpoint_id, digests)

    def reader(self, checkpoint_dir: str) -> CheckpointStateReader:
        """Reader of a checkpoint's state files (checking digests if this storage signs)."""
        options = self._options_for(checkpoint_dir)
        return open_reader(checkpoint_dir, options, require_digests=self.signing_key is not None)

    def read_metadata(self, checkpoint_dir: str) -> CheckpointMetadata:
        """The metadata at ``checkpoint_dir``, verified with this storage's signing key."""
        options = self._options_for(checkpoint_dir)
        return read_metadata(checkpoint_dir, options, key=self.signing_key)

    def write_metadata(
        self,
        metadata: CheckpointMetadata,
        before_publish: Callable[[], None] | None = None,
        exclusive: bool = False,
    ) -> CompletedCheckpoint:
        """Publish ``metadata`` as ``chk-<id>/_metadata`` (last, atomically): completes it.
        ``before_publish`` runs once the bytes are written aside, before they are published;
        ``exclusive`` (high availability): ``FileExistsError`` if one is there already."""
        loc = self._chk(metadata.checkpoint_id)
        makedirs(loc)
        data = encode_metadata(metadata, self.signing_key)
        atomic_write(loc.join(METADATA_FILE_NAME), data, before_publish, exclusive)
        return CompletedCheckpoint(metadata, loc.public())

    def withdraw_metadata(self, checkpoint_id: CheckpointId) -> None:
        """Remove ``chk-<id>/_metadata`` again (one this driver wrote exclusively, but could
        not record as the job's latest): the checkpoint is incomplete again."""
        loc = self._chk(checkpoint_id).join(METADATA_FILE_NAME)
        loc.fs.rm_file(loc.path)

    def discard(self, checkpoint_id: CheckpointId) -> None:
        """Remove ``chk-<id>`` and everything in it; a missing directory is fine."""
        remove_tree(self._chk(checkpoint_id))

    def delete_shared_files(self, paths: list[str]) -> None:
        """Delete shared files (``../shared/<name>`` paths); missing ones are fine."""
        for rel in paths:
            check_relative(rel, self._job)
            loc = self._job.join(SHARED_DIR_NAME, rel[len(SHARED_PATH_PREFIX) :])
            try:
                loc.fs.rm_file(loc.path)
            except FileNotFoundError:
                pass

    def list_shared_files(self) -> list[str]:
        """Every file in the job's shared directory, as ``../shared/<name>`` paths."""
        shared = self._job.join(SHARED_DIR_NAME)
        try:
            names = shared.fs.ls(shared.path, detail=False)
        except FileNotFoundError:
            return []
        return sorted(SHARED_PATH_PREFIX + posixpath.basename(str(n)) for n in names)

    def discard_directory(self, directory: str) -> None:
        """Remove a checkpoint directory outside this job's (one claimed on restore)."""
        remove_tree(resolve(directory, self._options_for(directory)))

    def discard_run(self, first_own: CheckpointId | None) -> list[str]:
        """The run ended and the retention policy discards its checkpoints (those it owns
        were discarded before): remove the ``chk-<n>`` directories this run made (``n >=
        first_own``; None: it made none), then, if nothing but Cairn's bookkeeping is left
        (``shared/``, the run-status record), the job directory. What is not this run's
        stays: an earlier run's checkpoints (retained, or restored from in NO_CLAIM mode),
        HA records or a user's files kept there. Returns the names left in the directory."""
        job = self._job
        if not job.fs.isdir(job.path):
            return []
        if first_own is not None:
            for cid, loc in chk_subdirs(job):
                if cid >= first_own:
                    remove_tree(loc)
        job.fs.invalidate_cache(job.path)
        names = sorted(
            posixpath.basename(str(p).rstrip("/")) for p in job.fs.ls(job.path, detail=False)
        )
        if any(name not in (SHARED_DIR_NAME, RUN_STATUS_FILE) for name in names):
            return names
        remove_tree(job)
        return []

    def check_savepoint_target(self, target_dir: str) -> None:
        """Raise ``SavepointTargetExistsError`` (a ``FileExistsError``) if ``target_dir`` holds
        a checkpoint or savepoint, or anything else: a savepoint gets a directory of its own."""
        target = resolve(target_dir, self._options_for(target_dir))
        fs = target.fs
        if fs.exists(target.join(METADATA_FILE_NAME).path):
            raise SavepointTargetExistsError(
                target.public(), "already contains a savepoint or checkpoint (_metadata)"
            )
        if fs.isdir(target.path) and fs.ls(target.path):
            raise SavepointTargetExistsError(
                target.public(),
                "exists and is not empty; give a new directory for the savepoint",
            )

    def write_savepoint(
        self, metadata: CheckpointMetadata, target_dir: str, source_dir: str | None = None
    ) -> CompletedCheckpoint:
        """Copy the state files of ``metadata`` into ``target_dir`` and publish it there.

        The result is self-contained (relative paths), so the directory can be moved. The
        source (default: ``chk-<id>`` of this job) is left alone; discard it separately.
        """
        self.check_savepoint_target(target_dir)
        target = resolve(target_dir, self._options_for(target_dir))
        src = (
            self._chk(metadata.checkpoint_id)
            if source_dir is None
            else resolve(source_dir, self._options_for(source_dir))
        )
        makedirs(target)
        for rel in sorted(metadata.referenced_files()):
            check_relative(rel, src)
            copy_file(locate(src, rel), target.join(private_path(rel)))
        operators = without_shared_files(metadata.operators)
        savepoint = replace(metadata, operators=operators, is_savepoint=True)
        atomic_write(target.join(METADATA_FILE_NAME), encode_metadata(savepoint, self.signing_key))
        return CompletedCheckpoint(savepoint, target.public())

    def list_checkpoints(self, verify_files: bool = True) -> list[CheckpointSummary]:
        if not self._job.fs.exists(self._job.path):
            return []
        return list_checkpoints(
            self.job_dir, self.storage_options, verify_files=verify_files, key=self.signing_key
        )

    def _options_for(self, path: str) -> dict[str, Any]:
        # Credentials for the checkpoint store must not leak into a different filesystem.
        same = protocol_of(path) == protocol_of(self.url)
        return self.storage_options if same else {}


def dispose_savepoint(path: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """Delete the savepoint at ``path`` (its directory or ``_metadata``), returning the
    directory removed. Only a savepoint is deleted: the metadata must decode and say so.

    Raises:
        CheckpointNotFoundError: nothing is there (e.g. disposed already), or no savepoint.
        CorruptCheckpointError: ``_metadata`` does not decode (nothing is deleted).
        SavepointRejectedError: it is a checkpoint; its job's retention policy owns it.
    """
    loc = resolve(path, storage_options)
    if loc.name == METADATA_FILE_NAME:
        loc = loc.parent
    if not loc.fs.exists(loc.path):
        raise CheckpointNotFoundError(loc.public(), "no such savepoint (disposed already?)")
    if not has_metadata(loc):
        raise CheckpointNotFoundError(loc.public(), "not a savepoint (no _metadata): left alone")
    checkpoint, _ = load_with_signature(loc, None)
    if not checkpoint.metadata.is_savepoint:
        raise SavepointRejectedError(
            f"{loc.public()} is checkpoint {checkpoint.checkpoint_id}, not a savepoint: "
            "left alone (its job's retention policy owns it)"
        )
    remove_tree(loc)
    log.info("Disposed savepoint %s.", loc.public())
    return loc.public()
