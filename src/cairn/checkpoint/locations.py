"""Locations on any fsspec filesystem and the few writes checkpoints are built from.

Invariant: on a local disk and on HDFS everything written is private to the job's user
(``local_files``, ``hdfs_files``); ``atomic_write`` never lets a reader see a partial file
(write aside, fsync, rename locally; write aside, rename on HDFS; a single put on object
stores); a state path read from metadata is used only after
``check_relative`` confirmed it stays in its checkpoint directory or the job's ``shared/``.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from cairn.checkpoint import hdfs_files, local_files
from cairn.checkpoint.errors import CorruptCheckpointError
from cairn.checkpoint.handles import SHARED_DIR_NAME, SHARED_PATH_PREFIX
from cairn.common.storage_options import url_to_fresh_fs


@dataclass(frozen=True)
class Location:
    """A filesystem plus a path on it; ``as_url`` keeps the user's spelling (URL or plain)."""

    fs: AbstractFileSystem
    path: str
    as_url: bool

    def join(self, *parts: str) -> Location:
        return Location(self.fs, posixpath.join(self.path, *parts), self.as_url)

    @property
    def parent(self) -> Location:
        return Location(self.fs, posixpath.dirname(self.path.rstrip("/")), self.as_url)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def public(self) -> str:
        return str(self.fs.unstrip_protocol(self.path)) if self.as_url else self.path


def resolve(path: str, storage_options: Mapping[str, Any] | None) -> Location:
    fs, p = url_to_fresh_fs(path, storage_options)
    return Location(fs, p.rstrip("/") or p, "://" in path)


def check_relative(rel: str, directory: Location) -> None:
    if rel.startswith(SHARED_PATH_PREFIX):  # the job's shared directory, and nothing else
        rel = rel[len(SHARED_PATH_PREFIX) :]
    parts = rel.replace("\\", "/").split("/")
    if not rel or rel.startswith("/") or "://" in rel or ".." in parts:
        raise CorruptCheckpointError(
            directory.public(), f"state path {rel!r} is not relative to the checkpoint directory"
        )


def locate(directory: Location, rel: str) -> Location:
    """Where a (checked) handle path points: in ``directory`` or in the job's ``shared/``."""
    if rel.startswith(SHARED_PATH_PREFIX):
        return directory.parent.join(SHARED_DIR_NAME, rel[len(SHARED_PATH_PREFIX) :])
    return directory.join(rel)


def remove_tree(loc: Location) -> None:
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
    if not isinstance(loc.fs, LocalFileSystem) and not hdfs_files.is_hdfs(loc.fs):
        # Object stores that keep directories (SeaweedFS's filer) leave a "<dir>/" marker
        # that would be listed as an incomplete checkpoint; on S3 proper this is a no-op.
        try:
            loc.fs.rm_file(loc.path.rstrip("/") + "/")
        except (FileNotFoundError, OSError):
            pass
        loc.fs.invalidate_cache(loc.parent.path)


def is_local(loc: Location) -> bool:
    return isinstance(loc.fs, LocalFileSystem)


def makedirs(loc: Location) -> None:
    if is_local(loc):
        local_files.makedirs_private(loc.path)
    elif hdfs_files.is_hdfs(loc.fs):
        hdfs_files.makedirs_private(loc.fs, loc.path)
    else:
        loc.fs.makedirs(loc.path, exist_ok=True)


def write_new(loc: Location, data: bytes) -> None:
    if is_local(loc):
        local_files.write_private(loc.path, data)
    elif hdfs_files.is_hdfs(loc.fs):
        hdfs_files.write_private(loc.fs, loc.path, data)
    else:
        loc.fs.pipe_file(loc.path, data)


def atomic_write(
    loc: Location,
    data: bytes,
    before_publish: Callable[[], None] | None = None,
    exclusive: bool = False,
) -> None:
    """Write ``data`` at ``loc`` so that readers see all of it or nothing; ``before_publish``
    (a test's fault point) runs after the data is written aside, before it is published;
    ``exclusive``: publish only if nothing is there yet (``FileExistsError`` otherwise) —
    ``link()`` locally, a rename onto a free name on HDFS, ``If-None-Match: *`` on S3 and
    Azure, ``ifGenerationMatch=0`` on GCS, a check then a put elsewhere (not atomic there)."""
    if is_local(loc):
        # Readers must never see a half-written _metadata: write aside, fsync, rename.
        tmp = f"{loc.path}.inprogress-{uuid.uuid4().hex}"
        try:
            local_files.write_private(tmp, data, sync=True)
            if before_publish is not None:
                before_publish()
            if exclusive:
                os.link(tmp, loc.path)  # fails if the name exists, whoever wrote it
            else:
                os.replace(tmp, loc.path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    if hdfs_files.is_hdfs(loc.fs):  # HDFS shows a file while it is written: write aside
        try:
            hdfs_files.publish(
                loc.fs, loc.path, data, exclusive=exclusive, before_publish=before_publish
            )
        except FileExistsError:
            raise FileExistsError(loc.public()) from None
        return
    if before_publish is not None:
        before_publish()
    if not exclusive:
        loc.fs.pipe_file(loc.path, data)  # object stores publish a single put atomically
    elif protocol_of(loc.public()) in ("s3", "s3a"):
        from cairn.checkpoint.ha.s3_store import is_conflict

        try:
            loc.fs.pipe_file(loc.path, data, mode="create")
        except OSError as exc:
            if isinstance(exc, FileExistsError) or not is_conflict(exc):
                raise
            raise FileExistsError(loc.public()) from exc
    elif protocol_of(loc.public()) in ("gs", "gcs", "abfs", "abfss", "az"):
        loc.fs.pipe_file(loc.path, data, mode="create")  # FileExistsError when it exists
    else:
        if loc.fs.exists(loc.path):
            raise FileExistsError(loc.public())
        loc.fs.pipe_file(loc.path, data)


def protocol_of(path: str) -> str:
    return path.split("://", 1)[0] if "://" in path else "file"


def copy_file(src: Location, dst: Location) -> None:
    makedirs(dst.parent)
    try:
        with src.fs.open(src.path, "rb") as fin:
            if is_local(dst):
                with os.fdopen(local_files.open_private(dst.path), "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
            elif hdfs_files.is_hdfs(dst.fs):
                with hdfs_files.open_private(dst.fs, dst.path) as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
            else:
                with dst.fs.open(dst.path, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
    except FileNotFoundError:
        raise CorruptCheckpointError(src.public(), "state file is missing") from None
