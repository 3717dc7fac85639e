"""Inspecting checkpoints without trusting them: verifying their state files, listing them.

Invariant: nothing here runs code from a checkpoint (metadata is decoded without unpickling);
a state file is intact iff every range the metadata references matches its CRC-32 and, if its
name carries a SHA-256 (written under a signing key), the whole file matches that; with a key
every file must carry one, so the verified signature covers every byte. ``verify`` without
``check_crc`` reads no state byte (a listing: existence and sizes, and digests in the names).
"""

from __future__ import annotations

import hashlib
import posixpath
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.errors import CheckpointNotFoundError, CorruptCheckpointError
from cairn.checkpoint.handles import (
    SHARED_DIR_NAME,
    SHARED_PATH_PREFIX,
    RocksDBKeyedStateHandle,
    StreamRange,
)
from cairn.checkpoint.loading import (
    CHK_RE,
    checkpoint_id_of,
    chk_subdirs,
    has_metadata,
    load_with_signature,
)
from cairn.checkpoint.locations import Location, check_relative, locate, resolve
from cairn.checkpoint.metadata import CheckpointMetadata, SignatureStatus
from cairn.checkpoint.state_files import (
    DIGEST_MISMATCH,
    CheckpointStateReader,
    required_digest,
    state_file_digest,
)
from cairn.ids import CheckpointId, JobId
from cairn.settings import SigningKey

_HASH_CHUNK = 1 << 20


def verify(
    metadata: CheckpointMetadata,
    directory: str,
    storage_options: Mapping[str, Any] | None = None,
    check_crc: bool = True,
    require_digests: bool = False,
) -> None:
    """Check that every state file ``metadata`` references exists in ``directory``, is long
    enough and (unless ``check_crc`` is False: sizes only, one listing, no state byte read)
    that its content is intact: every range referenced matches its CRC-32 and a file whose
    name carries a SHA-256 matches that, so a same-size file with changed bytes is found too.
    ``require_digests`` (metadata verified with a signing key): every file must carry a
    digest in its name (checked by name alone without ``check_crc``).

    Sizes only is what a failover needs for a checkpoint the job completed itself: the
    workers check the CRC-32 (or digest) of every byte they restore, before using it
    (``restore.examine``).

    Raises:
        CorruptCheckpointError: names the exact file and what is wrong with it.
    """
    loc = resolve(directory, storage_options)
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
        shared = loc.parent.join(SHARED_DIR_NAME)  # incremental: the job's shared files
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
        check_relative(rel, loc)
        where = locate(loc, rel).public()
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
        _verify_contents(metadata, CheckpointStateReader(loc), loc, sizes, require_digests)
    elif require_digests:
        for rel in metadata.referenced_files():
            required_digest(rel, locate(loc, rel))


_CRC_WINDOW = 64 << 20  # bytes read at once when checking the ranges of one state file


def _verify_contents(
    metadata: CheckpointMetadata,
    reader: CheckpointStateReader,
    loc: Location,
    sizes: Mapping[str, int],
    require: bool,
) -> None:
    """Every referenced range against its CRC-32 (naming the range that differs), then every
    file with a digest in its name against it; a file up to one window is read only once."""
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
        digest = required_digest(rel, locate(loc, rel)) if require else state_file_digest(rel)
        ordered = sorted(ranges, key=lambda r: (r.offset, r.length))
        size = sizes.get(rel, 0)
        if digest is not None and size <= _CRC_WINDOW:
            whole = reader.read_state_range(rel, 0, size)
            _check_crcs(whole, 0, loc, rel, ordered)
            _check_digest(hashlib.sha256(whole).hexdigest(), digest, loc, rel)
            continue
        # One ranged read per window of neighbouring ranges, not one per key group.
        window: list[StreamRange] = []
        for r in ordered:
            if window and r.offset + r.length - window[0].offset > _CRC_WINDOW:
                _check_window(reader, loc, rel, window)
                window = []
            window.append(r)
        if window:
            _check_window(reader, loc, rel, window)
        if digest is not None:
            h = hashlib.sha256()
            with loc.fs.open(locate(loc, rel).path, "rb") as f:
                while chunk := f.read(_HASH_CHUNK):
                    h.update(chunk)
            _check_digest(h.hexdigest(), digest, loc, rel)


def _check_digest(actual: str, digest: str, loc: Location, rel: str) -> None:
    if actual != digest:
        raise CorruptCheckpointError(locate(loc, rel).public(), DIGEST_MISMATCH)


def _check_window(
    reader: CheckpointStateReader, loc: Location, rel: str, ranges: list[StreamRange]
) -> None:
    lo = ranges[0].offset
    hi = max(r.offset + r.length for r in ranges)
    _check_crcs(reader.read_state_range(rel, lo, hi - lo), lo, loc, rel, ranges)


def _check_crcs(data: bytes, lo: int, loc: Location, rel: str, ranges: list[StreamRange]) -> None:
    view = memoryview(data)
    for r in ranges:
        if zlib.crc32(view[r.offset - lo : r.offset - lo + r.length]) != r.crc32:
            raise CorruptCheckpointError(
                locate(loc, rel).public(),
                f"CRC-32 mismatch in bytes [{r.offset}, {r.offset + r.length})",
            )


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    """One row of ``cairn checkpoints PATH``; ``ok`` is False with ``error`` set if unusable."""

    path: str
    checkpoint_id: CheckpointId | None
    job_id: JobId | None
    is_savepoint: bool
    trigger_ms: int | None
    completed_ms: int | None
    state_size: int | None
    ok: bool
    error: str | None = None
    signature: SignatureStatus | None = None  # None: the metadata could not be read

    @property
    def duration_ms(self) -> int | None:
        if self.trigger_ms is None or self.completed_ms is None:
            return None
        return self.completed_ms - self.trigger_ms


def _summarize(
    loc: Location,
    storage_options: Mapping[str, Any] | None,
    verify_files: bool,
    key: SigningKey | None,
) -> CheckpointSummary:
    dir_id = checkpoint_id_of(loc.name)
    job_id = JobId(loc.parent.name) if dir_id is not None else None
    try:
        cp, signature = load_with_signature(loc, key)
    except (CheckpointNotFoundError, CorruptCheckpointError) as e:
        return CheckpointSummary(
            loc.public(), dir_id, job_id, False, None, None, None, ok=False, error=e.problem
        )
    md = cp.metadata
    error: str | None = None
    if verify_files:
        try:
            verify(md, loc.public(), storage_options, require_digests=key is not None)
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
        signature=signature,
    )


def list_checkpoints(
    path: str,
    storage_options: Mapping[str, Any] | None = None,
    verify_files: bool = True,
    key: SigningKey | None = None,
) -> list[CheckpointSummary]:
    """Summaries of the checkpoints under ``path``, oldest first.

    ``path`` may be a checkpoint or savepoint directory, a job directory (``chk-<n>`` inside,
    complete or not), or a directory of job directories and/or savepoint directories.
    Listing runs no code from the checkpoints; with ``key``, a checkpoint whose signature
    does not verify is listed as unusable, saying why.
    """
    loc = resolve(path, storage_options)
    if has_metadata(loc):
        return [_summarize(loc, storage_options, verify_files, key)]
    if not loc.fs.isdir(loc.path):
        raise CheckpointNotFoundError(loc.public(), "no such checkpoint, savepoint or directory")
    if CHK_RE.match(loc.name):
        return [_summarize(loc, storage_options, verify_files, key)]
    if chk_subdirs(loc):
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
        if has_metadata(child):  # e.g. a directory of savepoints
            rows.append(_summarize(child, storage_options, verify_files, key))
            continue
        for _, chk in sorted(chk_subdirs(child), key=lambda t: t[0]):
            rows.append(_summarize(chk, storage_options, verify_files, key))
    return rows
