"""Checkpoint storage on any fsspec filesystem (local, memory://, s3://, hdfs://, ...).

Invariant: a checkpoint directory ``<url>/<job_id>/chk-<n>/`` is complete iff its ``_metadata``
exists; ``_metadata`` is written last and atomically (rename on local disks, a single put on
object stores), and every path it references is relative to that directory.

Layout (as in Flink)::

    <url>/<job_id>/chk-7/_metadata
    <url>/<job_id>/chk-7/<state-file-name>-<uuid>
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import shutil
import tempfile
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from cairn.checkpoint.errors import CheckpointNotFoundError, CorruptCheckpointError
from cairn.checkpoint.handles import (
    SHARED_DIR_NAME,
    SHARED_PATH_PREFIX,
    RocksDBKeyedStateHandle,
    StreamRange,
)
from cairn.checkpoint.metadata import (
    METADATA_FILE_NAME,
    CheckpointMetadata,
    CompletedCheckpoint,
    decode_metadata,
    encode_metadata,
)
from cairn.checkpoint.shared_state import private_path, without_shared_files
from cairn.ids import CheckpointId

log = logging.getLogger(__name__)

CHECKPOINT_DIR_PREFIX = "chk-"
_CHK_RE = re.compile(r"^chk-(\d+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_INCOMPLETE = "incomplete: no _metadata (checkpoint in progress or aborted)"


def default_storage_url() -> str:
    """``file://<tempdir>/cairn-checkpoints``, used when the job configures no storage."""
    return "file://" + os.path.join(tempfile.gettempdir(), "cairn-checkpoints")


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
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == 2:
                raise


def _atomic_write(loc: _Loc, data: bytes) -> None:
    if isinstance(loc.fs, LocalFileSystem):
        # Readers must never see a half-written _metadata: write aside, fsync, rename.
        tmp = f"{loc.path}.inprogress-{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, loc.path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    else:
        loc.fs.pipe_file(loc.path, data)  # object stores publish a single put atomically


class CheckpointStateWriter:
    """Writes state files of one checkpoint (implements ``handles.StateFileWriter``).

    >>> storage = CheckpointStorage("memory://doc-writer", "job")
    >>> w = storage.writer(CheckpointId(1))
    >>> rel = w.write_state_file("keyed/op 1", b"abc")
    >>> rel.startswith("keyed_op_1-"), storage.reader(w.directory).read_state_range(rel, 1, 2)
    (True, b'bc')
    """

    def __init__(self, directory: _Loc, checkpoint_id: CheckpointId) -> None:
        self._dir = directory
        self._checkpoint_id = checkpoint_id
        self._dir_made = False

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self._checkpoint_id

    @property
    def directory(self) -> str:
        return self._dir.public()

    def write_state_file(self, name: str, data: bytes) -> str:
        # Many subtasks in many processes write into one directory: a uuid keeps names unique.
        rel = f"{_UNSAFE.sub('_', name).strip('._') or 'state'}-{uuid.uuid4().hex}"
        if not self._dir_made:
            self._dir.fs.makedirs(self._dir.path, exist_ok=True)
            self._dir_made = True
        self._dir.fs.pipe_file(self._dir.join(rel).path, data)
        return rel

    def write_shared_file(self, name: str, data: bytes) -> str:
        """Write into the job's ``shared/`` directory (incremental checkpoints' SST files)."""
        rel = f"{_UNSAFE.sub('_', name).strip('._') or 'state'}-{uuid.uuid4().hex}"
        shared = self._dir.parent.join(SHARED_DIR_NAME)
        shared.fs.makedirs(shared.path, exist_ok=True)
        shared.fs.pipe_file(shared.join(rel).path, data)
        return SHARED_PATH_PREFIX + rel


class CheckpointStateReader:
    """Reads ranges of state files of one checkpoint directory (``handles.StateFileReader``)."""

    def __init__(self, directory: _Loc) -> None:
        self._dir = directory

    @property
    def directory(self) -> str:
        return self._dir.public()

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        _check_relative(path, self._dir)
        loc = _locate(self._dir, path)
        try:
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


def open_reader(
    directory: str, storage_options: Mapping[str, Any] | None = None
) -> CheckpointStateReader:
    """Reader for the checkpoint or savepoint at ``directory`` (e.g. on a worker restoring)."""
    return CheckpointStateReader(_resolve(directory, storage_options))


class CheckpointStorage:
    """The checkpoint directories of one job; picklable (re-resolved from url and options).

    >>> s = CheckpointStorage("memory://doc-storage", "job-1")
    >>> s.checkpoint_dir(CheckpointId(7))
    'memory:///doc-storage/job-1/chk-7'
    """

    def __init__(
        self, url: str | None, job_id: str, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        if not job_id or "/" in job_id:
            raise ValueError(f"job_id must be a non-empty name without '/', got {job_id!r}")
        self.url = url or default_storage_url()
        self.job_id = job_id
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self._job = _resolve(self.url, self.storage_options).join(job_id)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CheckpointStorage, (self.url, self.job_id, self.storage_options))

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
        return CheckpointStateWriter(self._chk(checkpoint_id), CheckpointId(checkpoint_id))

    def reader(self, checkpoint_dir: str) -> CheckpointStateReader:
        return open_reader(checkpoint_dir, self._options_for(checkpoint_dir))

    def write_metadata(self, metadata: CheckpointMetadata) -> CompletedCheckpoint:
        """Publish ``metadata`` as ``chk-<id>/_metadata`` (last, atomically): completes it."""
        loc = self._chk(metadata.checkpoint_id)
        loc.fs.makedirs(loc.path, exist_ok=True)
        _atomic_write(loc.join(METADATA_FILE_NAME), encode_metadata(metadata))
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

    def discard_job_dir(self) -> None:
        """Remove this job's whole checkpoint directory (retention on termination)."""
        _remove_tree(self._job)

    def check_savepoint_target(self, target_dir: str) -> None:
        """Raise ``FileExistsError`` if ``target_dir`` already holds a checkpoint or savepoint."""
        target = _resolve(target_dir, self._options_for(target_dir))
        if target.fs.exists(target.join(METADATA_FILE_NAME).path):
            raise FileExistsError(
                f"{target.public()}: already contains a savepoint or checkpoint (_metadata)"
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
        target.fs.makedirs(target.path, exist_ok=True)
        for rel in sorted(metadata.referenced_files()):
            _check_relative(rel, src)
            _copy_file(_locate(src, rel), target.join(private_path(rel)))
        operators = without_shared_files(metadata.operators)
        savepoint = replace(metadata, operators=operators, is_savepoint=True)
        _atomic_write(target.join(METADATA_FILE_NAME), encode_metadata(savepoint))
        return CompletedCheckpoint(savepoint, target.public())

    def list_checkpoints(self, verify_files: bool = True) -> list[CheckpointSummary]:
        if not self._job.fs.exists(self._job.path):
            return []
        return list_checkpoints(self.job_dir, self.storage_options, verify_files=verify_files)

    def _options_for(self, path: str) -> dict[str, Any]:
        # Credentials for the checkpoint store must not leak into a different filesystem.
        same = _resolve_protocol(path) == _resolve_protocol(self.url)
        return self.storage_options if same else {}


def _resolve_protocol(path: str) -> str:
    return path.split("://", 1)[0] if "://" in path else "file"


def _copy_file(src: _Loc, dst: _Loc) -> None:
    dst.fs.makedirs(dst.parent.path, exist_ok=True)
    try:
        with src.fs.open(src.path, "rb") as fin, dst.fs.open(dst.path, "wb") as fout:
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


def _load(loc: _Loc) -> CompletedCheckpoint:
    meta = loc.join(METADATA_FILE_NAME)
    try:
        data = bytes(loc.fs.cat_file(meta.path))
    except FileNotFoundError:
        raise CheckpointNotFoundError(loc.public(), _INCOMPLETE) from None
    return CompletedCheckpoint(decode_metadata(data, meta.public()), loc.public())


def load_checkpoint(
    path: str, storage_options: Mapping[str, Any] | None = None
) -> CompletedCheckpoint:
    """Metadata and directory of the checkpoint at ``path`` (see :func:`resolve_checkpoint_dirs`;
    for a job directory: its newest complete checkpoint, corrupt or not)."""
    newest = resolve_checkpoint_dirs(path, storage_options)[0]
    return _load(_resolve(newest, storage_options))


def read_metadata(
    path: str, storage_options: Mapping[str, Any] | None = None
) -> CheckpointMetadata:
    """The metadata at ``path``: a checkpoint/savepoint dir, its ``_metadata``, or a job dir."""
    return load_checkpoint(path, storage_options).metadata


def verify(
    metadata: CheckpointMetadata,
    directory: str,
    storage_options: Mapping[str, Any] | None = None,
    check_crc: bool = True,
) -> None:
    """Check that every state file ``metadata`` references exists in ``directory``, is long
    enough and (unless ``check_crc`` is False: sizes only) that every range it references
    has its CRC-32: a same-size file with changed bytes is corrupt too, and a restore must
    find that out here, not in every attempt's workers.

    Raises:
        CorruptCheckpointError: names the exact file and what is wrong with it.
    """
    loc = _resolve(directory, storage_options)
    prefix = loc.path.rstrip("/") + "/"
    try:
        listing = loc.fs.find(loc.path, detail=True)
    except FileNotFoundError:
        listing = {}
    sizes = {
        str(name)[len(prefix) :]: int(info.get("size") or 0)
        for name, info in listing.items()
        if str(name).startswith(prefix)
    }
    if any(rel.startswith(SHARED_PATH_PREFIX) for rel in metadata.referenced_files()):
        shared = loc.parent.join(SHARED_DIR_NAME)
        try:
            found = shared.fs.ls(shared.path, detail=True)
        except FileNotFoundError:
            found = []
        sizes.update(
            (SHARED_PATH_PREFIX + posixpath.basename(str(i["name"])), int(i.get("size") or 0))
            for i in found
        )
    cid = metadata.checkpoint_id
    for rel, needed in sorted(metadata.referenced_files().items()):
        _check_relative(rel, loc)
        where = _locate(loc, rel).public()
        if rel not in sizes:
            raise CorruptCheckpointError(
                where, f"state file referenced by checkpoint {cid} is missing"
            )
        if sizes[rel] < needed:
            raise CorruptCheckpointError(
                where,
                f"state file is truncated: {sizes[rel]} bytes, checkpoint {cid} needs at "
                f"least {needed}",
            )
    if check_crc:
        _verify_crcs(metadata, CheckpointStateReader(loc), loc)


_CRC_WINDOW = 64 << 20  # bytes read at once when checking the ranges of one state file


def _verify_crcs(metadata: CheckpointMetadata, reader: CheckpointStateReader, loc: _Loc) -> None:
    by_file: dict[str, set[StreamRange]] = {}
    for op in metadata.operators.values():
        for sub in op.subtasks.values():
            for kh in sub.keyed:
                if isinstance(kh, RocksDBKeyedStateHandle):  # one range: the whole file
                    for f in kh.files:
                        by_file.setdefault(f.path, set()).add(StreamRange(0, f.size, f.crc32))
                    continue
                by_file.setdefault(kh.path, set()).update(kh.sections.values())
            for oh in sub.operator:
                by_file.setdefault(oh.path, set()).add(oh.section)
            ic = sub.input_channels
            if ic is not None:
                by_file.setdefault(ic.path, set()).update(
                    r for rs in ic.buffers.values() for r in rs
                )
    for rel, ranges in sorted(by_file.items()):
        # One ranged read per window of neighbouring ranges, not one per key group.
        window: list[StreamRange] = []
        for r in sorted(ranges, key=lambda r: (r.offset, r.length)):
            if window and r.offset + r.length - window[0].offset > _CRC_WINDOW:
                _check_window(reader, loc, rel, window)
                window = []
            window.append(r)
        if window:
            _check_window(reader, loc, rel, window)


def _check_window(
    reader: CheckpointStateReader, loc: _Loc, rel: str, ranges: list[StreamRange]
) -> None:
    lo = ranges[0].offset
    hi = max(r.offset + r.length for r in ranges)
    data = memoryview(reader.read_state_range(rel, lo, hi - lo))
    for r in ranges:
        if zlib.crc32(data[r.offset - lo : r.offset - lo + r.length]) != r.crc32:
            raise CorruptCheckpointError(
                _locate(loc, rel).public(),
                f"CRC-32 mismatch in bytes [{r.offset}, {r.offset + r.length})",
            )


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    """One row of ``cairn checkpoints PATH``; ``ok`` is False with ``error`` set if unusable."""

    path: str
    checkpoint_id: int | None
    job_id: str | None
    is_savepoint: bool
    trigger_ms: int | None
    completed_ms: int | None
    state_size: int | None
    ok: bool
    error: str | None = None

    @property
    def duration_ms(self) -> int | None:
        if self.trigger_ms is None or self.completed_ms is None:
            return None
        return self.completed_ms - self.trigger_ms


def _summarize(
    loc: _Loc, storage_options: Mapping[str, Any] | None, verify_files: bool
) -> CheckpointSummary:
    m = _CHK_RE.match(loc.name)
    dir_id = int(m.group(1)) if m else None
    job_id = loc.parent.name if m else None
    try:
        cp = _load(loc)
    except (CheckpointNotFoundError, CorruptCheckpointError) as e:
        return CheckpointSummary(
            loc.public(), dir_id, job_id, False, None, None, None, ok=False, error=e.problem
        )
    md = cp.metadata
    error: str | None = None
    if verify_files:
        try:
            verify(md, loc.public(), storage_options)
        except CorruptCheckpointError as e:
            error = str(e)
    return CheckpointSummary(
        loc.public(),
        md.checkpoint_id,
        md.job_id,
        md.is_savepoint,
        md.trigger_ms,
        md.completed_ms,
        md.state_size,
        ok=error is None,
        error=error,
    )


def list_checkpoints(
    path: str, storage_options: Mapping[str, Any] | None = None, verify_files: bool = True
) -> list[CheckpointSummary]:
    """Summaries of the checkpoints under ``path``, oldest first.

    ``path`` may be a checkpoint or savepoint directory, a job directory (``chk-<n>`` inside,
    complete or not), or a directory of job directories and/or savepoint directories.
    """
    loc = _resolve(path, storage_options)
    if _has_metadata(loc):
        return [_summarize(loc, storage_options, verify_files)]
    if not loc.fs.isdir(loc.path):
        raise CheckpointNotFoundError(loc.public(), "no such checkpoint, savepoint or directory")
    if _CHK_RE.match(loc.name):
        return [_summarize(loc, storage_options, verify_files)]
    if _chk_subdirs(loc):
        children = [loc]
    else:
        children = sorted(
            (
                loc.join(posixpath.basename(str(e["name"]).rstrip("/")))
                for e in loc.fs.ls(loc.path, detail=True)
                if e.get("type") == "directory"
            ),
            key=lambda j: j.path,
        )
    rows: list[CheckpointSummary] = []
    for child in children:
        if _has_metadata(child):  # e.g. a directory of savepoints
            rows.append(_summarize(child, storage_options, verify_files))
            continue
        for _, chk in sorted(_chk_subdirs(child), key=lambda t: t[0]):
            rows.append(_summarize(chk, storage_options, verify_files))
    return rows
