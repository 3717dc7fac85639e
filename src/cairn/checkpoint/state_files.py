"""Writing and reading the state files of one checkpoint directory.

Invariant: every file name is unique (a uuid), at most 210 bytes long, and, under a signing
key, ends with the SHA-256 of its content, so the signed metadata that lists it covers every
state byte; a reader that requires digests returns no byte of a file before the whole file
matched its digest. Paths stay inside the checkpoint directory or the job's ``shared/``
directory.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from typing import Any

from cairn.checkpoint.errors import CorruptCheckpointError
from cairn.checkpoint.handles import SHARED_DIR_NAME, SHARED_PATH_PREFIX
from cairn.checkpoint.locations import (
    Location,
    check_relative,
    locate,
    makedirs,
    resolve,
    write_new,
)
from cairn.ids import CheckpointId

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# The readable part of a file name, cut so that with the uuid and a digest it stays far under
# the 255 bytes a file system allows (a chained Table vertex's name is hundreds of chars).
_NAME_CHARS = 100
_DIGEST_RE = re.compile(r"-sha256-([0-9a-f]{64})$")


def state_file_digest(rel: str) -> str | None:
    """The SHA-256 (hex) a state file's name carries; None for files named without one.

    >>> state_file_digest("keyed-0a1b-sha256-" + "ab" * 32) == "ab" * 32
    True
    """
    m = _DIGEST_RE.search(rel)
    return m.group(1) if m else None


class CheckpointStateWriter:
    """Writes state files of one checkpoint (implements ``handles.StateFileWriter``).

    With ``digests`` (the storage signs its metadata) each file's name ends with the SHA-256
    of its content; without, CRC-32s of the ranges are the only check (hashing costs CPU on
    every checkpoint, and without a key nobody could trust the digest anyway).

    >>> from cairn.checkpoint.storage import CheckpointStorage
    >>> storage = CheckpointStorage("memory://doc-writer", "job")
    >>> w = storage.writer(CheckpointId(1))
    >>> rel = w.write_state_file("keyed/op 1", b"abc")
    >>> rel.startswith("keyed_op_1-"), storage.reader(w.directory).read_state_range(rel, 1, 2)
    (True, b'bc')
    >>> from cairn.settings import SigningKey
    >>> key = SigningKey.parse("0123456789abcdef0123")
    >>> w = CheckpointStorage("memory://doc-writer", "job", signing_key=key).writer(CheckpointId(1))
    >>> state_file_digest(w.write_state_file("s", b"abc")) == hashlib.sha256(b"abc").hexdigest()
    True
    """

    def __init__(
        self, directory: Location, checkpoint_id: CheckpointId, digests: bool = False
    ) -> None:
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
        rel = self._file_name(name, data)
        if not self._dir_made:
            makedirs(self._dir)
            self._dir_made = True
        write_new(self._dir.join(rel), data)
        return rel

    def write_shared_file(self, name: str, data: bytes) -> str:
        """Write into the job's ``shared/`` directory (incremental checkpoints' SST files),
        named and written like :meth:`write_state_file` (digest under a key; private)."""
        rel = self._file_name(name, data)
        shared = self._dir.parent.join(SHARED_DIR_NAME)
        makedirs(shared)
        write_new(shared.join(rel), data)
        return SHARED_PATH_PREFIX + rel

    def _file_name(self, name: str, data: bytes) -> str:
        # Many subtasks in many processes write into one directory: a uuid keeps names unique.
        # The digest in the name puts it into the (signed) metadata that lists the file.
        readable = _UNSAFE.sub("_", name).strip("._")[:_NAME_CHARS].rstrip("._")
        rel = f"{readable or 'state'}-{uuid.uuid4().hex}"
        if self._digests:
            rel += f"-sha256-{hashlib.sha256(data).hexdigest()}"
        return rel


class CheckpointStateReader:
    """Reads ranges of state files of one checkpoint directory (``handles.StateFileReader``).

    With ``require_digests`` (metadata read with a signing key) a file is read whole and
    checked against the SHA-256 its name carries before any byte of it is returned, so what
    the caller unpickles is what the signed metadata names.
    """

    def __init__(self, directory: Location, require_digests: bool = False) -> None:
        self._dir = directory
        self._require_digests = require_digests
        self._verified: tuple[str, bytes] | None = None  # the last file read whole

    @property
    def directory(self) -> str:
        return self._dir.public()

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        check_relative(path, self._dir)
        loc = locate(self._dir, path)
        try:
            if self._require_digests:
                data = self._verified_file(path, loc)[offset : offset + length]
            elif length == 0:  # no request for no bytes: Azure refuses an empty range
                if not loc.fs.exists(loc.path):
                    raise FileNotFoundError(loc.path)
                data = b""
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
        check_relative(path, self._dir)
        loc = self._dir.join(path)
        try:
            if self._require_digests:
                return self._verified_file(path, loc)
            return bytes(loc.fs.cat_file(loc.path))
        except FileNotFoundError:
            raise CorruptCheckpointError(loc.public(), "state file is missing") from None

    def _verified_file(self, path: str, loc: Location) -> bytes:
        cached = self._verified
        if cached is not None and cached[0] == path:
            return cached[1]
        expected = required_digest(path, loc)
        data = bytes(loc.fs.cat_file(loc.path))
        if hashlib.sha256(data).hexdigest() != expected:
            raise CorruptCheckpointError(loc.public(), DIGEST_MISMATCH)
        self._verified = (path, data)
        return data


DIGEST_MISMATCH = "state file does not match the SHA-256 digest in its name (changed since)"


def required_digest(rel: str, loc: Location) -> str:
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
    return CheckpointStateReader(resolve(directory, storage_options), require_digests)


def open_writer(
    directory: str,
    storage_options: Mapping[str, Any] | None = None,
    digests: bool = False,
    checkpoint_id: CheckpointId = CheckpointId(0),
) -> CheckpointStateWriter:
    """Writer of state files into ``directory`` (e.g. a savepoint written by Spark tasks);
    ``digests``: name each file with its SHA-256, as a storage with a signing key does."""
    return CheckpointStateWriter(resolve(directory, storage_options), checkpoint_id, digests)
