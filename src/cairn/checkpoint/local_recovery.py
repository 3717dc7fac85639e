"""Local recovery: a second copy of the state files a worker writes, on its own host's disk,
read first when a worker of the same job restores on that host (Flink's
``state.backend.local-recovery``).

Invariant: a local copy is used only for the file it copies and only when it still holds the
bytes written: the copy lives under the job's storage location (hashed) and the checkpoint's
directory, named by the file's own unique name (which the restoring worker takes from the
verified metadata), and its size and CRC-32, recorded beside it when it was written, are
checked before any byte of it is returned (with a signing key, its SHA-256 too, as the remote
file's would be). Anything else (missing, short, changed, unreadable) falls back to the
checkpoint storage, which stays the source of truth: the local copy never fails a restore.
Files no retained checkpoint of this worker references are removed when a checkpoint
completes, and the worker's copies go when the job finishes.

>>> import tempfile
>>> from cairn.checkpoint.storage import CheckpointStorage
>>> storage = CheckpointStorage("memory://doc-local", "job")
>>> store = LocalRecoveryStore(tempfile.mkdtemp(), storage.job_dir, worker_index=0)
>>> w = store.writer(storage.writer(CheckpointId(3)))
>>> rel = w.write_state_file("keyed", b"abcdef")
>>> storage.reader(storage.checkpoint_dir(CheckpointId(3))).read_state_range(rel, 0, 3)
b'abc'
>>> r = store.reader(storage.reader(storage.checkpoint_dir(CheckpointId(3))), CheckpointId(3))
>>> r.read_state_range(rel, 2, 3), r.local_bytes
(b'cde', 3)
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import zlib
from collections.abc import Iterable
from typing import Any

from cairn.checkpoint.handles import (
    SHARED_DIR_NAME,
    SHARED_PATH_PREFIX,
    KeyedStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
    RocksDBKeyedStateHandle,
    StateFileReader,
    StateFileWriter,
)
from cairn.checkpoint.local_files import makedirs_private, write_private
from cairn.checkpoint.state_files import state_file_digest
from cairn.ids import CheckpointId

__all__ = [
    "LocalCopyWriter",
    "LocalFirstReader",
    "LocalRecoveryStore",
    "local_recovery_root",
    "referenced_paths",
]

log = logging.getLogger(__name__)

_CHECK_SUFFIX = ".check"  # beside each copy: "<size> <crc32>" of the bytes written
_READ_CHUNK = 8 << 20


def local_recovery_root() -> str:
    """``<tempdir>/cairn-local-recovery-<uid>``: the default root, one per user (private, like
    the default checkpoint root: the copies are pickled state)."""
    return os.path.join(tempfile.gettempdir(), f"cairn-local-recovery-{os.getuid()}")


def referenced_paths(states: Iterable[OperatorSubtaskState]) -> set[str]:
    """Every state file path (relative to the checkpoint directory) ``states`` refer to.

    >>> from cairn.checkpoint.handles import StreamRange
    >>> sorted(referenced_paths([OperatorSubtaskState(keyed=(
    ...     KeyedStateHandle("k-1", 0, 1, {0: StreamRange(0, 1, 0)}, 1),))]))
    ['k-1']
    """
    paths: set[str] = set()
    for state in states:
        for handle in state.keyed:
            if isinstance(handle, RocksDBKeyedStateHandle):
                paths.update(f.path for f in handle.files)
            elif isinstance(handle, KeyedStateHandle):
                paths.add(handle.path)
        for op in state.operator:
            if isinstance(op, OperatorStateHandle):
                paths.add(op.path)
        if state.input_channels is not None:
            paths.add(state.input_channels.path)
    return paths


class LocalRecoveryStore:
    """One worker's local copies of the state files of one job, under
    ``root/<hash of the job's storage location>/worker-<index>/``: ``chk-<id>/<file>`` for a
    checkpoint's own files, ``shared/<file>`` for shared (incremental) ones. Readers look in
    every worker's folder of the job on this host (a replacement worker may run another
    index's subtasks)."""

    def __init__(self, root: str, job_dir: str, worker_index: int) -> None:
        digest = hashlib.sha256(job_dir.encode()).hexdigest()[:20]
        self.job_root = os.path.join(os.path.abspath(root), f"job-{digest}")
        self.directory = os.path.join(self.job_root, f"worker-{worker_index}")
        self._lock = threading.Lock()
        self._written: dict[CheckpointId, set[str]] = {}  # local paths, by checkpoint
        self._referenced: dict[CheckpointId, set[str]] = {}  # from this worker's acks
        self.last_reader: LocalFirstReader | None = None

    # ------------------------------------------------------------------ writing

    def writer(self, inner: StateFileWriter) -> LocalCopyWriter:
        """``inner``, each file it writes also copied here (best effort: a local failure is
        logged and the copy skipped; the checkpoint does not depend on it)."""
        return LocalCopyWriter(inner, self)

    def local_path(self, directory: str, checkpoint_id: CheckpointId, rel: str) -> str | None:
        """Where the copy of ``rel`` (a handle path) of checkpoint ``checkpoint_id`` lives in
        worker folder ``directory``; ``None`` for a path that leaves both folders."""
        if rel.startswith(SHARED_PATH_PREFIX):
            name, base = rel[len(SHARED_PATH_PREFIX) :], os.path.join(directory, SHARED_DIR_NAME)
        else:
            name, base = rel, os.path.join(directory, f"chk-{checkpoint_id}")
        if not name or "/" in name or os.sep in name or name in (".", ".."):
            return None
        return os.path.join(base, name)

    def copy(self, checkpoint_id: CheckpointId, rel: str, data: bytes) -> None:
        path = self.local_path(self.directory, checkpoint_id, rel)
        if path is None:
            return
        try:
            makedirs_private(os.path.dirname(path))
            tmp = f"{path}.{threading.get_ident()}.tmp"
            write_private(tmp, data)
            write_private(tmp + _CHECK_SUFFIX, f"{len(data)} {zlib.crc32(data)}".encode())
            os.replace(tmp + _CHECK_SUFFIX, path + _CHECK_SUFFIX)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("local recovery: no local copy of %s: %s", rel, exc)
            return
        with self._lock:
            self._written.setdefault(checkpoint_id, set()).add(path)

    # ------------------------------------------------------------------ reading

    def reader(self, inner: StateFileReader, checkpoint_id: CheckpointId) -> LocalFirstReader:
        """``inner``, reading the local copies of checkpoint ``checkpoint_id``'s files first
        (the last reader made is ``last_reader``, for its counts)."""
        folders = sorted(glob.glob(os.path.join(glob.escape(self.job_root), "worker-*")))
        self.last_reader = LocalFirstReader(inner, self, checkpoint_id, folders)
        return self.last_reader

    # ------------------------------------------------------------------ retention

    def acknowledged(self, checkpoint_id: CheckpointId, states: Iterable[Any]) -> None:
        """This worker acknowledged ``checkpoint_id`` with ``states``: the files they name
        are kept while the checkpoint may be the latest completed one."""
        paths = set()
        for rel in referenced_paths(s for s in states if isinstance(s, OperatorSubtaskState)):
            path = self.local_path(self.directory, checkpoint_id, rel)
            if path is not None:
                paths.add(path)
        with self._lock:
            self._referenced.setdefault(checkpoint_id, set()).update(paths)

    def completed(self, checkpoint_id: CheckpointId) -> None:
        """``checkpoint_id`` completed: remove the copies no later restore can want (those of
        older checkpoints that it does not reference)."""
        with self._lock:
            keep = set()
            for cid, paths in self._referenced.items():
                if cid >= checkpoint_id:
                    keep |= paths
            for cid, paths in self._written.items():
                if cid > checkpoint_id:
                    keep |= paths
            for table in (self._written, self._referenced):
                for cid in [c for c in table if c < checkpoint_id]:
                    del table[cid]
        self._remove_except(keep, checkpoint_id)

    def _remove_except(self, keep: set[str], checkpoint_id: CheckpointId) -> None:
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            folder = os.path.join(self.directory, name)
            if name.startswith("chk-") and name[4:].isdigit() and int(name[4:]) < checkpoint_id:
                shutil.rmtree(folder, ignore_errors=True)
            elif name == SHARED_DIR_NAME:
                for f in os.listdir(folder):
                    path = os.path.join(folder, f)
                    base = path[: -len(_CHECK_SUFFIX)] if f.endswith(_CHECK_SUFFIX) else path
                    if base not in keep and not f.endswith(".tmp"):
                        _unlink(path)

    def discard(self) -> None:
        """The job ended: remove this worker's copies (and the job's folder once empty)."""
        shutil.rmtree(self.directory, ignore_errors=True)
        try:
            os.rmdir(self.job_root)
        except OSError:
            pass  # another worker of this host still has copies


class LocalCopyWriter:
    """A ``StateFileWriter`` that writes through ``inner`` and keeps a local copy of each
    file it wrote (implements ``write_shared_file`` when ``inner`` does)."""

    def __init__(self, inner: StateFileWriter, store: LocalRecoveryStore) -> None:
        self._inner = inner
        self._store = store

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self._inner.checkpoint_id

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never forward private names (unpickling looks them up)
            raise AttributeError(name)
        if name == "write_shared_file":
            shared = getattr(self._inner, name)

            def write_shared_file(file_name: str, data: bytes) -> str:
                rel: str = shared(file_name, data)
                self._store.copy(self.checkpoint_id, rel, data)
                return rel

            return write_shared_file
        return getattr(self._inner, name)

    def write_state_file(self, name: str, data: bytes) -> str:
        rel = self._inner.write_state_file(name, data)
        self._store.copy(self.checkpoint_id, rel, data)
        return rel


class LocalFirstReader:
    """A ``StateFileReader`` that serves a file from its verified local copy if there is
    one, else from ``inner``; ``local_bytes``/``remote_bytes`` count where reads came from."""

    def __init__(
        self,
        inner: StateFileReader,
        store: LocalRecoveryStore,
        checkpoint_id: CheckpointId,
        folders: list[str],
    ) -> None:
        self._inner = inner
        self._store = store
        self._checkpoint_id = checkpoint_id
        self._folders = folders
        self._lock = threading.Lock()
        self._found: dict[str, str | None] = {}  # handle path -> verified local copy
        self.local_bytes = 0
        self.remote_bytes = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        local = self._local(path)
        if local is not None:
            try:
                with open(local, "rb") as f:
                    f.seek(offset)
                    data = f.read(length)
                if len(data) == length:
                    with self._lock:
                        self.local_bytes += length
                    return data
            except OSError:
                pass
            with self._lock:
                self._found[path] = None
        data = self._inner.read_state_range(path, offset, length)
        with self._lock:
            self.remote_bytes += len(data)
        return data

    def _local(self, path: str) -> str | None:
        with self._lock:
            if path in self._found:
                return self._found[path]
        found = None
        for folder in self._folders:
            candidate = self._store.local_path(folder, self._checkpoint_id, path)
            if candidate is not None and _intact(candidate, path):
                found = candidate
                break
        with self._lock:
            self._found[path] = found
        return found


def _intact(local: str, rel: str) -> bool:
    """The copy at ``local`` holds the bytes recorded beside it (and, for a digest-named
    file, the bytes its name's SHA-256 names)."""
    digest = state_file_digest(rel)
    sha = hashlib.sha256() if digest is not None else None
    size = crc = 0
    try:
        with open(local + _CHECK_SUFFIX, "rb") as f:
            size_text, crc_text = f.read().split()
        with open(local, "rb") as f:
            while chunk := f.read(_READ_CHUNK):  # bounded memory for large SST files
                size += len(chunk)
                crc = zlib.crc32(chunk, crc)
                if sha is not None:
                    sha.update(chunk)
        expected = (int(size_text), int(crc_text))
    except (OSError, ValueError):
        return False
    if (size, crc) != expected:
        log.warning("local recovery: the local copy %s changed since it was written", local)
        return False
    return sha is None or sha.hexdigest() == digest


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
