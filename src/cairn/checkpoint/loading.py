"""Finding and reading completed checkpoints: resolving a path, loading its ``_metadata``.

Invariant: a checkpoint directory is complete iff its ``_metadata`` exists; reading one never
runs code from it (the metadata is decoded without unpickling, its signature checked with the
key given) and a ``chk-<n>`` directory whose metadata names another checkpoint is refused.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from cairn.checkpoint.errors import CheckpointNotFoundError, CorruptCheckpointError
from cairn.checkpoint.locations import Location, resolve
from cairn.checkpoint.metadata import (
    METADATA_FILE_NAME,
    CheckpointMetadata,
    CompletedCheckpoint,
    SignatureStatus,
    decode_metadata_checked,
)
from cairn.ids import CheckpointId
from cairn.settings import SigningKey

CHECKPOINT_DIR_PREFIX = "chk-"
CHK_RE = re.compile(r"^chk-(\d+)$")
INCOMPLETE = "incomplete: no _metadata (checkpoint in progress or aborted)"


def checkpoint_id_of(name: str) -> CheckpointId | None:
    """The id in a ``chk-<n>`` directory name (a path's last part), None for other names:
    the one place a checkpoint id is read from a path.

    >>> checkpoint_id_of("chk-12"), checkpoint_id_of("/jobs/j/chk-3/"), checkpoint_id_of("sp-1")
    (12, 3, None)
    """
    m = CHK_RE.match(posixpath.basename(name.rstrip("/")))
    return CheckpointId(int(m.group(1))) if m else None


def chk_subdirs(loc: Location) -> list[tuple[CheckpointId, Location]]:
    """``chk-<n>`` directories directly under ``loc``, newest first."""
    found: list[tuple[CheckpointId, Location]] = []
    for entry in loc.fs.ls(loc.path, detail=True):
        name = posixpath.basename(str(entry["name"]).rstrip("/"))
        checkpoint_id = checkpoint_id_of(name)
        if checkpoint_id is not None and entry.get("type") == "directory":
            found.append((checkpoint_id, loc.join(name)))
    return sorted(found, key=lambda t: t[0], reverse=True)


def has_metadata(loc: Location) -> bool:
    """Whether ``loc`` holds a ``_metadata`` file (a completed checkpoint).

    Raises:
        OSError: the storage did not answer (not "no": a completed checkpoint taken for an
            incomplete one is deleted, and a rerun then starts from scratch).
    """
    return is_file(loc.fs, loc.join(METADATA_FILE_NAME).path)


def is_file(fs: Any, path: str) -> bool:
    """``fs.isfile(path)``, except that an error other than "not found" is raised: fsspec's
    ``isfile`` answers False to every error, a storage outage included."""
    return _type_of(fs, path) == "file"


def is_dir(fs: Any, path: str) -> bool:
    """``fs.isdir(path)``, except that an error other than "not found" is raised (fsspec's
    ``isdir`` answers False to every error: a job directory taken for absent starts the job
    afresh)."""
    return _type_of(fs, path) == "directory"


def _type_of(fs: Any, path: str) -> str | None:
    """fsspec's ``type`` of ``path`` (``"file"``, ``"directory"``), None if it does not
    exist; any other error of the storage is raised."""
    try:
        kind = fs.info(path).get("type")
    except FileNotFoundError:
        return None
    return None if kind is None else str(kind)


def resolve_checkpoint_dirs(
    path: str, storage_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Complete checkpoint directories that ``path`` designates, newest first.

    ``path`` may be a ``chk-<n>`` or savepoint directory, its ``_metadata`` file (one result),
    or a job directory (every complete ``chk-<n>`` in it).

    Raises:
        CheckpointNotFoundError: nothing complete is there; the message says what was found.
    """
    loc = resolve(path, storage_options)
    fs = loc.fs
    if loc.name == METADATA_FILE_NAME and is_file(fs, loc.path):
        return [loc.parent.public()]
    if has_metadata(loc):
        return [loc.public()]
    if not is_dir(fs, loc.path):
        raise CheckpointNotFoundError(loc.public(), "no such checkpoint, savepoint or directory")
    chks = chk_subdirs(loc)
    complete = [c.public() for _, c in chks if has_metadata(c)]
    if complete:
        return complete
    if chks:
        raise CheckpointNotFoundError(
            loc.public(),
            f"job directory holds {len(chks)} checkpoint directories but none is complete "
            "(no _metadata in any chk-<n>)",
        )
    if CHK_RE.match(loc.name):
        raise CheckpointNotFoundError(loc.public(), INCOMPLETE)
    raise CheckpointNotFoundError(
        loc.public(),
        "not a checkpoint or savepoint directory (no _metadata) nor a job checkpoint "
        "directory (no chk-<n> inside)",
    )


def load_with_signature(
    loc: Location, key: SigningKey | None
) -> tuple[CompletedCheckpoint, SignatureStatus]:
    meta = loc.join(METADATA_FILE_NAME)
    try:
        data = bytes(loc.fs.cat_file(meta.path))
    except FileNotFoundError:
        raise CheckpointNotFoundError(loc.public(), INCOMPLETE) from None
    metadata, status = decode_metadata_checked(data, meta.public(), key)
    named = checkpoint_id_of(loc.name)
    if named is not None and not metadata.is_savepoint and named != metadata.checkpoint_id:
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
    return load_with_signature(resolve(newest, storage_options), key)[0]


def read_metadata(
    path: str, storage_options: Mapping[str, Any] | None = None, key: SigningKey | None = None
) -> CheckpointMetadata:
    """The metadata at ``path``: a checkpoint/savepoint dir, its ``_metadata``, or a job dir
    (checked with ``key`` as in :func:`load_checkpoint`)."""
    return load_checkpoint(path, storage_options, key).metadata
