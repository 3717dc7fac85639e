"""Checkpoint storage on any fsspec filesystem (local, memory://, s3://, hdfs://, ...).

Invariant: a checkpoint directory ``<url>/<job_id>/chk-<n>/`` is complete iff its ``_metadata``
exists; ``_metadata`` is written last and atomically (rename on local disks, a single put on
object stores), and every path it references is relative to that directory. On a local disk
everything written is private to the job's user (``local_files``). With a signing key, a
state file's name ends with the SHA-256 of its content, so the signed metadata covers every
state byte, and nothing is read from a checkpoint before its signature and digests are
checked.

Layout (as in Flink)::

    <url>/<job_id>/chk-7/_metadata
    <url>/<job_id>/chk-7/<state-file-name>-<uuid>[-sha256-<hex digest of the content>]
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from cairn.checkpoint import local_files
from cairn.checkpoint.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    SavepointRejectedError,
    SavepointTargetExistsError,
)
from cairn.checkpoint.handles import (
    SHARED_DIR_NAME,
    SHARED_PATH_PREFIX,
)
from cairn.checkpoint.metadata import (
    METADATA_FILE_NAME,
    CheckpointMetadata,
    CompletedCheckpoint,
    SignatureStatus,
    decode_metadata_checked,
    encode_metadata,
)
from cairn.checkpoint.shared_state import private_path, without_shared_files
from cairn.ids import CheckpointId
from cairn.settings import SigningKey

if TYPE_CHECKING:
    from cairn.checkpoint.inspection import CheckpointSummary

log = logging.getLogger(__name__)

CHECKPOINT_DIR_PREFIX = "chk-"
_CHK_RE = re.compile(r"^chk-(\d+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_INCOMPLETE = "incomplete: no _metadata (checkpoint in progress or aborted)"
_DIGEST_RE = re.compile(r"-sha256-([0-9a-f]{64})$")


def default_storage_url() -> str:
    """``file://<tempdir>/cairn-checkpoints-<uid>`` (see ``local_files.default_root``), used
    when the job configures no storage."""
    return "file://" + local_files.default_root()


def state_file_digest(rel: str) -> str | None:
    """The SHA-256 (hex) a state file's name carries; None for files named without one.

    >>> state_file_digest("keyed-0a1b-sha256-" + "ab" * 32) == "ab" * 32
    True
    """
    m = _DIGEST_RE.search(rel)
    return m.group(1) if m else None


@dataclass(frozen=True)
class _Loc:
    """A filesystem plus a path on it; ``as_url`` keeps the user's spelling (URL or plain)."""

    fs: AbstractFileSystem
    path: str
    as_url: bool

    def join(self, *parts: str) -> _Loc:
        return _Loc(self.fs, posixpath.join(self.path, *parts), self.as_url)

    @property
    def parent(self) -> _Loc:
        return _Loc(self.fs, posixpath.dirname(self.path.rstrip("/")), self.as_url)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def public(self) -> str:
        return str(self.fs.unstrip_protocol(self.path)) if self.as_url else self.path


def _resolve(path: str, storage_options: Mapping[str, Any] | None) -> _Loc:
    fs, p = url_to_fs(path, **dict(storage_options or {}))
    return _Loc(fs, p.rstrip("/") or p, "://" in path)


def _check_relative(rel: str, directory: _Loc) -> None:
    if rel.startswith(SHARED_PATH_PREFIX):  # the job's shared directory, and nothing else
        rel = rel[len(SHARED_PATH_PREFIX) :]
    parts = rel.replace("\\", "/").split("/")
    if not rel or rel.startswith("/") or "://" in rel or ".." in parts:
        raise CorruptCheckpointError(
            directory.public(), f"state path {rel!r} is not relative to the checkpoint directory"
        )


def _locate(directory: _Loc, rel: str) -> _Loc:
    """Where a (checked) handle path points: in ``directory`` or in the job's ``shared/``."""
    if rel.startswith(SHARED_PATH_PREFIX):
        return directory.parent.join(SHARED_DIR_NAME, rel[len(SHARED_PATH_PREFIX) :])
    return directory.join(rel)


def _remove_tree(loc: _Loc) -> None:
    # A late upload may create the directory or a file in it while we remove it.
    for attempt in range(3):
        try:
            loc.fs.rm(loc.path, recursive=True)
            break
        except FileNotFoundError:
            break
        except OSError:
            if attempt == 2:
                raise
    if not isinstance(loc.fs, LocalFileSystem):
        # Object stores that keep directories (SeaweedFS's filer) leave a "<dir>/" marker
        # that would be listed as an incomplete checkpoint; on S3 proper this is a no-op.
        try:
            loc.fs.rm_file(loc.path.rstrip("/") + "/")
        except (FileNotFoundError, OSError):
            pass
        loc.fs.invalidate_cache(loc.parent.path)


def _is_local(loc: _Loc) -> bool:
    return isinstance(loc.fs, LocalFileSystem)


def _makedirs(loc: _Loc) -> None:
    if _is_local(loc):
        local_files.makedirs_private(loc.path)
    else:
        loc.fs.makedirs(loc.path, exist_ok=True)


def _write_new(loc: _Loc, data: bytes) -> None:
    if _is_local(loc):
        local_files.write_private(loc.path, data)
    else:
        loc.fs.pipe_file(loc.path, data)


def _atomic_write(loc: _Loc, data: bytes) -> None:
    if _is_local(loc):
        # Readers must never see a half-written _metadata: write aside, fsync, rename.
        tmp = f"{loc.path}.inprogress-{uuid.uuid4().hex}"
        try:
            local_files.write_private(tmp, data, sync=True)
            os.replace(tmp, loc.path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    else:
        loc.fs.pipe_file(loc.path, data)  # object stores publish a single put atomically


class CheckpointStateWriter:
    """Writes state files of one checkpoint (implements ``handles.StateFileWriter``).

    With ``digests`` (the storage signs its metadata) each file's name ends with the SHA-256
    of its content; without, CRC-32s of the ranges are the only check (hashing costs CPU on
    every checkpoint, and without a key nobody could trust the digest anyway).

    >>> storage = CheckpointStorage("memory://doc-writer", "job")
    >>> w = storage.writer(CheckpointId(1))
    >>> rel = w.write_state_file("keyed/op 1", b"abc")
    >>> rel.startswith("keyed_op_1-"), storage.reader(w.directory).read_state_range(rel, 1, 2)
    (True, b'bc')
    >>> w = CheckpointStateWriter(w._dir, CheckpointId(1), digests=True)
    >>> state_file_digest(w.write_state_file("s", b"abc")) == hashlib.sha256(b"abc").hexdigest()
    True
    """

    def __init__(self, directory: _Loc, checkpoint_id: CheckpointId, digests: bool = False) -> None:
        self._dir = directory
        self._checkpoint_id = checkpoint_id
        self._digests = digests
        self._dir_made = False

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self._checkpoint_id

    @property
    def directory(self) -> str:
        return self._dir.public()

    def write_state_file(self, name: str, data: bytes) -> str:
        # Many subtasks in many processes write into one directory: a uuid keeps names unique.
        # The digest in the name puts it into the (signed) metadata that lists the file.
        rel = f"{_UNSAFE.sub('_', name).strip('._') or 'state'}-{uuid.uuid4().hex}"
        if self._digests:
            rel += f"-sha256-{hashlib.sha256(data).hexdigest()}"
        if not self._dir_made:
            _makedirs(self._dir)
            self._dir_made = True
        _write_new(self._dir.join(rel), data)
        return rel

    def write_shared_file(self, name: str, data: bytes) -> str:
        """Write into the job's ``shared/`` directory (incremental checkpoints' SST files),
        named and written like :meth:`write_state_file` (digest under a key; private)."""
        rel = f"{_UNSAFE.sub('_', name).strip('._') or 'state'}-{uuid.uuid4().hex}"
        if self._digests:
            rel += f"-sha256-{hashlib.sha256(data).hexdigest()}"
        shared = self._dir.parent.join(SHARED_DIR_NAME)
        _makedirs(shared)
        _write_new(shared.join(rel), data)
        return SHARED_PATH_PREFIX + rel


class CheckpointStateReader:
    """Reads ranges of state files of one checkpoint directory (``handles.StateFileReader``).

    With ``require_digests`` (metadata read with a signing key) a file is read whole and
    checked against the SHA-256 its name carries before any byte of it is returned, so what
    the caller unpickles is what the signed metadata names.
    """

    def __init__(self, directory: _Loc, require_digests: bool = False) -> None:
        self._dir = directory
        self._require_digests = require_digests
        self._verified: tuple[str, bytes] | None = None  # the last file read whole

    @property
    def directory(self) -> str:
        return self._dir.public()

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        _check_relative(path, self._dir)
        loc = _locate(self._dir, path)
        try:
            if self._require_digests:
                data = self._verified_file(path, loc)[offset : offset + length]
            else:
                data = bytes(loc.fs.cat_file(loc.path, start=offset, end=offset + length))
        except FileNotFoundError:
            raise CorruptCheckpointError(loc.public(), "state file is missing") from None
        if len(data) != length:
            raise CorruptCheckpointError(
                loc.public(),
                f"state file is truncated: needed bytes [{offset}, {offset + length}) "
                f"but it ends at byte {offset + len(data)}",
            )
        return data

    def read_state_file(self, path: str) -> bytes:
        """The whole of ``path`` (checked against its digest like ranges are), e.g. to copy it."""
        _check_relative(path, self._dir)
        loc = self._dir.join(path)
        try:
            if self._require_digests:
                return self._verified_file(path, loc)
            return bytes(loc.fs.cat_file(loc.path))
        except FileNotFoundError:
            raise CorruptCheckpointError(loc.public(), "state file is missing") from None

    def _verified_file(self, path: str, loc: _Loc) -> bytes:
        cached = self._verified
        if cached is not None and cached[0] == path:
            return cached[1]
        expected = _required_digest(path, loc)
        data = bytes(loc.fs.cat_file(loc.path))
        if hashlib.sha256(data).hexdigest() != expected:
            raise CorruptCheckpointError(loc.public(), _DIGEST_MISMATCH)
        self._verified = (path, data)
        return data


_DIGEST_MISMATCH = "state file does not match the SHA-256 digest in its name (changed since)"


def _required_digest(rel: str, loc: _Loc) -> str:
    digest = state_file_digest(rel)
    if digest is None:
        raise CorruptCheckpointError(
            loc.public(),
            "state file has no SHA-256 digest in its name, so the checkpoint's signature "
            "does not cover it (written by an older Cairn, or renamed)",
        )
    return digest


def open_reader(
    directory: str,
    storage_options: Mapping[str, Any] | None = None,
    require_digests: bool = False,
) -> CheckpointStateReader:
    """Reader for the checkpoint or savepoint at ``directory`` (e.g. on a worker restoring);
    ``require_digests``: check every file against its digest (see the reader)."""
    return CheckpointStateReader(_resolve(directory, storage_options), require_digests)


def open_writer(
    directory: str,
    storage_options: Mapping[str, Any] | None = None,
    digests: bool = False,
    checkpoint_id: int = 0,
) -> CheckpointStateWriter:
    """Writer of state files into ``directory`` (e.g. a savepoint written by Spark tasks);
    ``digests``: name each file with its SHA-256, as a storage with a signing key does."""
    return CheckpointStateWriter(
        _resolve(directory, storage_options), CheckpointId(checkpoint_id), digests
    )


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
    loc = _resolve(directory, storage_options)
    if loc.fs.exists(loc.join(METADATA_FILE_NAME).path):
        raise FileExistsError(f"{loc.public()}: already contains a savepoint or checkpoint")
    _makedirs(loc)
    _atomic_write(loc.join(METADATA_FILE_NAME), encode_metadata(metadata, key))
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
        job_id: str,
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
        self._job = _resolve(self.url, self.storage_options).join(job_id)

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.url, self.job_id, self.storage_options, self.signing_key)
        return (CheckpointStorage, args)

    def __repr__(self) -> str:
        return f"CheckpointStorage({self.url!r}, {self.job_id!r})"

    @property
    def job_dir(self) -> str:
        return self._job.public()

    def _chk(self, checkpoint_id: int) -> _Loc:
        return self._job.join(f"{CHECKPOINT_DIR_PREFIX}{checkpoint_id}")

    def checkpoint_dir(self, checkpoint_id: int) -> str:
        return self._chk(checkpoint_id).public()

    def writer(self, checkpoint_id: int) -> CheckpointStateWriter:
        """Writer of checkpoint ``checkpoint_id``'s state files (digest-named if it signs)."""
        digests = self.signing_key is not None
        return CheckpointStateWriter(self._chk(checkpoint_id), CheckpointId(checkpoint_id), digests)

    def reader(self, checkpoint_dir: str) -> CheckpointStateReader:
        """Reader of a checkpoint's state files (checking digests if this storage signs)."""
        options = self._options_for(checkpoint_dir)
        return open_reader(checkpoint_dir, options, require_digests=self.signing_key is not None)

    def read_metadata(self, checkpoint_dir: str) -> CheckpointMetadata:
        """The metadata at ``checkpoint_dir``, verified with this storage's signing key."""
        options = self._options_for(checkpoint_dir)
        return read_metadata(checkpoint_dir, options, key=self.signing_key)

    def write_metadata(self, metadata: CheckpointMetadata) -> CompletedCheckpoint:
        """Publish ``metadata`` as ``chk-<id>/_metadata`` (last, atomically): completes it."""
        loc = self._chk(metadata.checkpoint_id)
        _makedirs(loc)
        _atomic_write(loc.join(METADATA_FILE_NAME), encode_metadata(metadata, self.signing_key))
        return CompletedCheckpoint(metadata, loc.public())

    def discard(self, checkpoint_id: int) -> None:
        """Remove ``chk-<id>`` and everything in it; a missing directory is fine."""
        _remove_tree(self._chk(checkpoint_id))

    def delete_shared_files(self, paths: list[str]) -> None:
        """Delete shared files (``../shared/<name>`` paths); missing ones are fine."""
        for rel in paths:
            _check_relative(rel, self._job)
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
        _remove_tree(_resolve(directory, self._options_for(directory)))

    def discard_job_dir(self) -> None:
        """Remove this job's whole checkpoint directory (retention on termination)."""
        _remove_tree(self._job)

    def check_savepoint_target(self, target_dir: str) -> None:
        """Raise ``SavepointTargetExistsError`` (a ``FileExistsError``) if ``target_dir`` holds
        a checkpoint or savepoint, or anything else: a savepoint gets a directory of its own."""
        target = _resolve(target_dir, self._options_for(target_dir))
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
        target = _resolve(target_dir, self._options_for(target_dir))
        src = (
            self._chk(metadata.checkpoint_id)
            if source_dir is None
            else _resolve(source_dir, self._options_for(source_dir))
        )
        _makedirs(target)
        for rel in sorted(metadata.referenced_files()):
            _check_relative(rel, src)
            _copy_file(_locate(src, rel), target.join(private_path(rel)))
        operators = without_shared_files(metadata.operators)
        savepoint = replace(metadata, operators=operators, is_savepoint=True)
        _atomic_write(target.join(METADATA_FILE_NAME), encode_metadata(savepoint, self.signing_key))
        return CompletedCheckpoint(savepoint, target.public())

    def list_checkpoints(self, verify_files: bool = True) -> list[CheckpointSummary]:
        from cairn.checkpoint.inspection import list_checkpoints  # it builds on this module

        if not self._job.fs.exists(self._job.path):
            return []
        return list_checkpoints(
            self.job_dir, self.storage_options, verify_files=verify_files, key=self.signing_key
        )

    def _options_for(self, path: str) -> dict[str, Any]:
        # Credentials for the checkpoint store must not leak into a different filesystem.
        same = _resolve_protocol(path) == _resolve_protocol(self.url)
        return self.storage_options if same else {}


def _resolve_protocol(path: str) -> str:
    return path.split("://", 1)[0] if "://" in path else "file"


def _copy_file(src: _Loc, dst: _Loc) -> None:
    _makedirs(dst.parent)
    try:
        with src.fs.open(src.path, "rb") as fin:
            if _is_local(dst):
                with os.fdopen(local_files.open_private(dst.path), "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
            else:
                with dst.fs.open(dst.path, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
    except FileNotFoundError:
        raise CorruptCheckpointError(src.public(), "state file is missing") from None


# --- reading, resolving, verifying, listing ----------------------------------------------------


def _chk_subdirs(loc: _Loc) -> list[tuple[int, _Loc]]:
    """``chk-<n>`` directories directly under ``loc``, newest first."""
    found: list[tuple[int, _Loc]] = []
    for entry in loc.fs.ls(loc.path, detail=True):
        m = _CHK_RE.match(posixpath.basename(str(entry["name"]).rstrip("/")))
        if m and entry.get("type") == "directory":
            found.append((int(m.group(1)), loc.join(m.group(0))))
    return sorted(found, key=lambda t: t[0], reverse=True)


def _has_metadata(loc: _Loc) -> bool:
    return bool(loc.fs.isfile(loc.join(METADATA_FILE_NAME).path))


def resolve_checkpoint_dirs(
    path: str, storage_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Complete checkpoint directories that ``path`` designates, newest first.

    ``path`` may be a ``chk-<n>`` or savepoint directory, its ``_metadata`` file (one result),
    or a job directory (every complete ``chk-<n>`` in it).

    Raises:
        CheckpointNotFoundError: nothing complete is there; the message says what was found.
    """
    loc = _resolve(path, storage_options)
    fs = loc.fs
    if loc.name == METADATA_FILE_NAME and fs.isfile(loc.path):
        return [loc.parent.public()]
    if _has_metadata(loc):
        return [loc.public()]
    if not fs.isdir(loc.path):
        raise CheckpointNotFoundError(loc.public(), "no such checkpoint, savepoint or directory")
    chks = _chk_subdirs(loc)
    complete = [c.public() for _, c in chks if _has_metadata(c)]
    if complete:
        return complete
    if chks:
        raise CheckpointNotFoundError(
            loc.public(),
            f"job directory holds {len(chks)} checkpoint directories but none is complete "
            "(no _metadata in any chk-<n>)",
        )
    if _CHK_RE.match(loc.name):
        raise CheckpointNotFoundError(loc.public(), _INCOMPLETE)
    raise CheckpointNotFoundError(
        loc.public(),
        "not a checkpoint or savepoint directory (no _metadata) nor a job checkpoint "
        "directory (no chk-<n> inside)",
    )


def _load(loc: _Loc, key: SigningKey | None) -> tuple[CompletedCheckpoint, SignatureStatus]:
    meta = loc.join(METADATA_FILE_NAME)
    try:
        data = bytes(loc.fs.cat_file(meta.path))
    except FileNotFoundError:
        raise CheckpointNotFoundError(loc.public(), _INCOMPLETE) from None
    metadata, status = decode_metadata_checked(data, meta.public(), key)
    named = _CHK_RE.match(loc.name)
    if named and not metadata.is_savepoint and int(named.group(1)) != metadata.checkpoint_id:
        # A (validly signed) older checkpoint copied over a newer one must not pass for it.
        raise CorruptCheckpointError(
            meta.public(),
            f"holds the metadata of checkpoint {metadata.checkpoint_id}, not of "
            f"{loc.name}: copied or moved from another checkpoint directory",
        )
    return CompletedCheckpoint(metadata, loc.public()), status


def load_checkpoint(
    path: str, storage_options: Mapping[str, Any] | None = None, key: SigningKey | None = None
) -> CompletedCheckpoint:
    """Metadata and directory of the checkpoint at ``path`` (see :func:`resolve_checkpoint_dirs`;
    for a job directory: its newest complete checkpoint, corrupt or not).

    Reading never runs code from the checkpoint; with ``key`` the metadata must be signed
    with it (``UnverifiedCheckpointError`` otherwise).
    """
    newest = resolve_checkpoint_dirs(path, storage_options)[0]
    return _load(_resolve(newest, storage_options), key)[0]


def read_metadata(
    path: str, storage_options: Mapping[str, Any] | None = None, key: SigningKey | None = None
) -> CheckpointMetadata:
    """The metadata at ``path``: a checkpoint/savepoint dir, its ``_metadata``, or a job dir
    (checked with ``key`` as in :func:`load_checkpoint`)."""
    return load_checkpoint(path, storage_options, key).metadata


def dispose_savepoint(path: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """Delete the savepoint at ``path`` (its directory or ``_metadata``), returning the
    directory removed. Only a savepoint is deleted: the metadata must decode and say so.

    Raises:
        CheckpointNotFoundError: nothing is there (e.g. disposed already), or no savepoint.
        CorruptCheckpointError: ``_metadata`` does not decode (nothing is deleted).
        SavepointRejectedError: it is a checkpoint; its job's retention policy owns it.
    """
    loc = _resolve(path, storage_options)
    if loc.name == METADATA_FILE_NAME:
        loc = loc.parent
    if not loc.fs.exists(loc.path):
        raise CheckpointNotFoundError(loc.public(), "no such savepoint (disposed already?)")
    if not _has_metadata(loc):
        raise CheckpointNotFoundError(loc.public(), "not a savepoint (no _metadata): left alone")
    checkpoint, _ = _load(loc, None)
    if not checkpoint.metadata.is_savepoint:
        raise SavepointRejectedError(
            f"{loc.public()} is checkpoint {checkpoint.checkpoint_id}, not a savepoint: "
            "left alone (its job's retention policy owns it)"
        )
    _remove_tree(loc)
    log.info("Disposed savepoint %s.", loc.public())
    return loc.public()
