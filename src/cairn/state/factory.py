"""Building the keyed state backend a job's settings choose (``state.backend.type``).

Invariant: the worker builds every keyed backend here, from the validated ``StateSettings``
only, so heap and RocksDB subtasks of one job never differ in anything but their key groups.
RocksDB working directories go under ``<localdir>/cairn-rocksdb-<job>/attempt-<n>/``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile

from cairn.ids import AttemptNumber, JobId
from cairn.settings import StateBackendKind, StateSettings
from cairn.state.api import KeyedStateBackend
from cairn.state.heap_backend import HeapKeyedStateBackend
from cairn.state.key_groups import KeyGroupRange
from cairn.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory

__all__ = ["clean_local_state", "create_keyed_backend", "rocksdb_attempt_dir"]

log = logging.getLogger(__name__)

_ATTEMPT = re.compile(r"^attempt-(\d+)$")


def rocksdb_attempt_dir(settings: StateSettings, job_id: JobId, attempt: AttemptNumber) -> str:
    """Where the RocksDB backends of one attempt of a job keep their working directories.

    >>> rocksdb_attempt_dir(StateSettings(), "j1", 2).endswith("cairn-rocksdb-j1/attempt-2")
    True
    """
    root = settings.rocksdb.local_dir or tempfile.gettempdir()
    return os.path.join(root, f"cairn-rocksdb-{job_id}", f"attempt-{attempt}")


def create_keyed_backend(
    settings: StateSettings,
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    *,
    job_id: JobId,
    attempt: AttemptNumber,
    name: str,
) -> KeyedStateBackend:
    """The keyed backend of one subtask of one operator (``name`` prefixes its files)."""
    if settings.backend is StateBackendKind.ROCKSDB:
        r = settings.rocksdb
        return RocksDBKeyedStateBackend(
            key_group_range,
            max_parallelism,
            local_dir=rocksdb_attempt_dir(settings, job_id, attempt),
            memory=RocksDBMemory(r.block_cache_bytes, r.write_buffer_bytes, r.write_buffer_count),
            incremental=settings.incremental,
            file_prefix=name,
            transfer_threads=r.transfer_threads,
        )
    return HeapKeyedStateBackend(
        key_group_range,
        max_parallelism,
        fork_threshold=settings.fork_threshold,
        fork_niceness=settings.fork_niceness,
    )


def clean_local_state(
    settings: StateSettings, job_id: JobId, attempt: AttemptNumber, *, ending: bool
) -> None:
    """Remove local RocksDB directories of this job that nobody uses any more.

    Starting (``ending=False``): the directories of earlier attempts (a killed worker never
    disposes its backends; its attempt is over when a later one starts). Ending: this
    attempt's directory and the job's, once empty (the backends removed their own).
    """
    if settings.backend is not StateBackendKind.ROCKSDB:
        return
    mine = rocksdb_attempt_dir(settings, job_id, attempt)
    job_dir = os.path.dirname(mine)
    if ending:
        for d in (mine, job_dir):
            try:
                os.rmdir(d)
            except OSError:
                pass  # not empty (another worker of this machine) or gone
        return
    try:
        names = os.listdir(job_dir)
    except OSError:
        return
    for name in names:
        m = _ATTEMPT.match(name)
        if m and int(m.group(1)) < attempt:
            log.info("removing local RocksDB files of attempt %s of job %s", m.group(1), job_id)
            shutil.rmtree(os.path.join(job_dir, name), ignore_errors=True)
