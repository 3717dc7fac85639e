"""RocksDB's own checkpoint of a snapshot, taken off the task thread while the task goes on.

Invariant: while a native checkpoint is pending (``NativeGate.pending`` set), nothing the task
does after the barrier reaches RocksDB: value-like states write into their write caches only
(a cache that fills waits, ``WriteCache.flush``), and every other write to the database (list,
map and timer column families, state registration, restore, compaction, closing) first calls
``NativeGate.settle``, which waits for the pending checkpoint to end and raises its error if it
failed. The checkpoint thread writes the frozen caches (the entries written before the barrier)
and then takes the checkpoint (memtable flush + hard links), so the checkpoint holds exactly
the state at the barrier, and the synchronous part of a snapshot is only the freezing: a copy
of each cache's dirty entries, bounded by the caches' size, not by the state's.

>>> gate = NativeGate()
>>> done = []
>>> _ = gate.start(lambda: done.append("checkpoint"))
>>> gate.settle(); done, gate.pending
(['checkpoint'], None)
>>> gate.close()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import rocksdict

__all__ = [
    "FrozenCache",
    "NativeCheckpointError",
    "NativeGate",
    "native_checkpoint",
    "wait_native",
]

log = logging.getLogger(__name__)


class NativeCheckpointError(OSError):
    """Writing the frozen caches or RocksDB's checkpoint failed: the database may miss writes
    the task made before the barrier, so the task must fail (and restore) rather than go on."""


class FrozenCache(Protocol):
    """A write cache, as the checkpoint thread sees it."""

    def write_frozen(self, frozen: dict[bytes, bytes | None]) -> None: ...


def native_checkpoint(
    db: Any,
    frozen: Sequence[tuple[FrozenCache, dict[bytes, bytes | None]]],
    columns: Sequence[Any],
    local: str,
    label: str,
) -> Callable[[], None]:
    """The checkpoint thread's work: write the ``frozen`` caches' entries to ``db`` (a raw
    ``Rdict``), flush the memtables of ``columns`` (its column families), then RocksDB's
    checkpoint of it into ``local`` (hard links; its own flush has little left: the default
    column family's registrations). The flush is called apart because rocksdict releases the
    GIL while it waits for a flush but not inside ``create_checkpoint``: the task thread
    processes records meanwhile. The parts go to the DEBUG log as ``label``'s."""

    def work() -> None:
        t0 = time.perf_counter()
        for cache, entries in frozen:
            cache.write_frozen(entries)
        t1 = time.perf_counter()
        for column in columns:
            column.flush()
        t2 = time.perf_counter()
        rocksdict.Checkpoint(db).create_checkpoint(local)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "RocksDB checkpoint %s: %d frozen entries written in %.1f ms, "
                "memtable flush %.1f ms, hard links %.1f ms",
                label,
                sum(len(e) for _, e in frozen),
                (t1 - t0) * 1000,
                (t2 - t1) * 1000,
                (time.perf_counter() - t2) * 1000,
            )

    return work


def wait_native(future: Future[None]) -> None:
    """Snapshot thread: wait for the native checkpoint of ``future`` (raising its failure)
    before uploading its files."""
    exc = future.exception()
    if exc is not None:
        raise NativeCheckpointError(
            f"RocksDB's checkpoint failed: {type(exc).__name__}: {exc}"
        ) from exc


class NativeGate:
    """The pending native checkpoint of one backend, and the thread that takes it."""

    __slots__ = ("_pool", "pending", "waited_ms")

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self.pending: Future[None] | None = None
        self.waited_ms = 0.0  # task-thread time spent in ``settle`` waiting (diagnostics)

    def start(self, work: Callable[[], None]) -> Future[None]:
        """Run ``work`` (write the frozen caches, take the checkpoint) on the gate's thread;
        the caller has settled any earlier checkpoint first."""
        assert self.pending is None, "settle the pending native checkpoint first"
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(1, thread_name_prefix="rocksdb-checkpoint")
        future = self.pending = pool.submit(work)
        return future

    def settle(self) -> None:
        """Wait for the pending native checkpoint, if any (cheap when there is none)."""
        future = self.pending
        if future is None:
            return
        if not future.done():
            t0 = time.perf_counter()
            exc = future.exception()
            self.waited_ms += (time.perf_counter() - t0) * 1000
        else:
            exc = future.exception()
        self.pending = None
        if exc is not None:
            raise NativeCheckpointError(
                f"RocksDB's checkpoint (writing the write caches, flush, hard links) failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def close(self) -> None:
        """Settle (logging, not raising, a failure) and stop the thread."""
        try:
            self.settle()
        except NativeCheckpointError:
            log.warning("a pending RocksDB checkpoint failed at close", exc_info=True)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
