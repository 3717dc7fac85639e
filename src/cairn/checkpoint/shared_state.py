"""Shared files of incremental checkpoints: which may be deleted, and when (Flink's
``SharedStateRegistry``), and how a savepoint makes them its own.

Invariant: a shared file is deleted only when no retained checkpoint references it *and* the
backend that uploaded it can no longer reference it in a later checkpoint: that backend is
gone (failover, end of job), or a completed checkpoint holds a handle of it whose base (the
checkpoint whose files it may reuse) is newer than the file's last use. The registry only
decides (pure, no I/O); the coordinator deletes what it returns.

>>> from cairn.checkpoint.handles import RocksDBStateFile as F
>>> def h(cid, base, *names):
...     files = tuple(F(n, "../shared/" + n, 1, 0, shared=True) for n in names)
...     return RocksDBKeyedStateHandle(0, 127, files, len(names), backend_id="b",
...                                    base_checkpoint_id=base)
>>> r = SharedStateRegistry()
>>> r.register(1, [h(1, None, "a", "b")]), r.register(2, [h(2, 1, "b", "c")])
([], [])
>>> r.release(1)  # "a" was last used by 1, and the backend's base is 1: maybe still in use
[]
>>> r.register(3, [h(3, 2, "c")])  # base 2 > 1: "a" can never be referenced again
['../shared/a']
>>> r.release(2), r.backends_gone()
([], ['../shared/b'])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from cairn.checkpoint.handles import (
    SHARED_PATH_PREFIX,
    OperatorSubtaskState,
    RocksDBKeyedStateHandle,
    RocksDBStateFile,
)
from cairn.ids import CheckpointId

__all__ = [
    "SharedStateRegistry",
    "private_path",
    "rocksdb_handles",
    "without_shared_files",
]


@dataclass
class _Entry:
    count: int  # retained checkpoints referencing the file
    last_used: CheckpointId  # newest checkpoint referencing it
    backend: str  # the backend instance that uploaded it


class SharedStateRegistry:
    """Reference counts of shared files over the retained checkpoints of one job."""

    def __init__(self) -> None:
        self._files: dict[str, _Entry] = {}
        self._by_checkpoint: dict[CheckpointId, set[str]] = {}
        self._base: dict[str, CheckpointId] = {}  # backend -> base of its newest registered handle
        self._gone: set[str] = set()

    def register(
        self, checkpoint_id: CheckpointId, handles: Iterable[RocksDBKeyedStateHandle]
    ) -> list[str]:
        """A checkpoint completed with ``handles``; returns files now safe to delete."""
        paths = self._by_checkpoint.setdefault(checkpoint_id, set())
        for h in handles:
            if h.base_checkpoint_id is not None:
                base = h.base_checkpoint_id
                self._base[h.backend_id] = max(self._base.get(h.backend_id, base), base)
            for f in h.shared_files():
                if f.path in paths:
                    continue
                paths.add(f.path)
                entry = self._files.get(f.path)
                if entry is None:
                    self._files[f.path] = _Entry(1, checkpoint_id, h.backend_id)
                else:
                    entry.count += 1
                    entry.last_used = max(entry.last_used, checkpoint_id)
        return self._deletable()

    def release(self, checkpoint_id: CheckpointId) -> list[str]:
        """A checkpoint was discarded (subsumed); returns files now safe to delete."""
        for path in self._by_checkpoint.pop(checkpoint_id, ()):
            self._files[path].count -= 1
        return self._deletable()

    def backends_gone(self) -> list[str]:
        """Every backend that uploaded a registered file is gone (failover, end of job):
        files no retained checkpoint references are safe to delete."""
        self._gone.update(e.backend for e in self._files.values())
        return self._deletable()

    def is_registered(self, path: str) -> bool:
        return path in self._files

    def referenced(self) -> set[str]:
        return set(self._files)

    def _deletable(self) -> list[str]:
        gone, base = self._gone, self._base
        out = [
            p
            for p, e in self._files.items()
            if e.count == 0 and (e.backend in gone or base.get(e.backend, -1) > e.last_used)
        ]
        for p in out:
            del self._files[p]
        return sorted(out)


def rocksdb_handles(states: Iterable[OperatorSubtaskState]) -> list[RocksDBKeyedStateHandle]:
    return [h for s in states for h in s.keyed if isinstance(h, RocksDBKeyedStateHandle)]


def private_path(rel: str) -> str:
    """Where a savepoint keeps a file: a shared file becomes a file of its own directory.

    >>> private_path("../shared/000012.sst-ab"), private_path("keyed-kg0-127.state-cd")
    ('shared-000012.sst-ab', 'keyed-kg0-127.state-cd')
    """
    if rel.startswith(SHARED_PATH_PREFIX):
        return "shared-" + rel[len(SHARED_PATH_PREFIX) :]
    return rel


def without_shared_files(operators: Any) -> Any:
    """``CheckpointMetadata.operators`` with shared files renamed as ``private_path`` does
    (a savepoint is self-contained: it never references the job's shared directory)."""

    def private(h: Any) -> Any:
        if not isinstance(h, RocksDBKeyedStateHandle) or not h.shared_files():
            return h
        files = tuple(
            RocksDBStateFile(f.name, private_path(f.path), f.size, f.crc32) for f in h.files
        )
        return replace(h, files=files, persisted_size=-1, base_checkpoint_id=None)

    return {
        uid: replace(
            op,
            subtasks={
                i: replace(sub, keyed=tuple(private(h) for h in sub.keyed))
                for i, sub in op.subtasks.items()
            },
        )
        for uid, op in operators.items()
    }
