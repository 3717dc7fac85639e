"""High availability on the driver: open the HA storage, stand by, and decide how a new
leader starts.

Invariant: a driver runs its job only after ``await_leadership`` returned ``Lead``: it then
holds the lease, has claimed the HA pointer under its fencing token, and numbers its
checkpoints past every checkpoint an earlier leader may still finish writing. A standby
whose leader ended the job on purpose (FINISHED, CANCELED) or for good (FAILED) ends the same
way without running it; a driver that finds such a pointer without having waited starts the
job afresh. Layout: ``<storageDir>/<job-id>/`` holds ``leader-lease``,
``checkpoint-pointer`` and ``job-graph`` (the graph's description and fingerprint).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from cairn.checkpoint.ha.azure_store import AzureStore
from cairn.checkpoint.ha.fence import LeadershipLost
from cairn.checkpoint.ha.file_store import FileStore
from cairn.checkpoint.ha.gcs_store import GcsStore
from cairn.checkpoint.ha.hdfs_store import HdfsStore
from cairn.checkpoint.ha.leader import Leadership
from cairn.checkpoint.ha.pointer import Pointer
from cairn.checkpoint.ha.s3_store import S3Store
from cairn.checkpoint.ha.store import ConditionalStore, MemoryStore, WriteConflict
from cairn.checkpoint.hdfs_files import is_hdfs
from cairn.checkpoint.loading import chk_subdirs
from cairn.checkpoint.locations import resolve
from cairn.checkpoint.storage import default_storage_url
from cairn.common.exceptions import JobSubmissionError
from cairn.common.job_status import JobStatus
from cairn.common.storage_options import (
    AZURE_SCHEMES,
    GCS_SCHEMES,
    HDFS_SCHEMES,
    S3_SCHEMES,
    url_to_fresh_fs,
)
from cairn.graph.job_graph import JobGraph
from cairn.ids import CheckpointId, JobId
from cairn.settings import JobSettings, RerunPolicy

__all__ = ["End", "Lead", "LostLeadership", "await_leadership", "leadership_for"]

log = logging.getLogger(__name__)

GRAPH = "job-graph"
_MEMORY: dict[str, MemoryStore] = {}  # memory:// HA storage, shared by drivers in one process


@dataclass(frozen=True, slots=True)
class LostLeadership:
    """Queued to the job master when its lease is lost: the attempt ends SUSPENDED."""

    reason: str


@dataclass(frozen=True, slots=True)
class Lead:
    """Run the job, restoring ``restore_path`` (None: from scratch); number checkpoints from
    ``first_id``."""

    restore_path: str | None
    first_id: CheckpointId
    decided: bool = True  # False: no HA pointer yet (the run-status record decides)


@dataclass(frozen=True, slots=True)
class End:
    """Do not run: end with ``status`` (the leader ended the job while this one stood by,
    or this one was cancelled or fenced first); ``error``: what the client raises."""

    status: JobStatus
    reason: str

    @property
    def error(self) -> BaseException | None:
        return None if self.status is JobStatus.FINISHED else LeadershipLost(self.reason)


def open_store(url: str, storage_options: Mapping[str, Any]) -> ConditionalStore:
    """The conditional store at ``url``: a local directory, ``s3://``, ``gs://``,
    ``abfs://``/``az://`` or ``hdfs://`` (their conditional writes probed first) or
    ``memory://`` (one process)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
    if scheme == "memory":
        return _MEMORY.setdefault(url, MemoryStore())
    fs, path = url_to_fresh_fs(url, storage_options)
    if isinstance(fs, LocalFileSystem):
        return FileStore(path)
    store: S3Store | GcsStore | AzureStore | HdfsStore
    if scheme in S3_SCHEMES:
        store = S3Store(fs, path)
    elif scheme in GCS_SCHEMES:
        store = GcsStore(fs, path)
    elif scheme in AZURE_SCHEMES:
        store = AzureStore(fs, path, scheme)
    elif scheme in HDFS_SCHEMES and is_hdfs(fs):
        store = HdfsStore(fs, path)
    else:
        raise JobSubmissionError(
            f"high-availability.storageDir {url!r}: only local directories, s3://, gs://, "
            "abfs:// (az://) and hdfs:// support the conditional writes the leader lease needs"
        )
    store.check_conditional()
    return store


def leadership_for(settings: JobSettings, job_id: JobId) -> Leadership | None:
    """The job's ``Leadership`` (None without high availability); raises
    ``JobSubmissionError`` when the HA storage is unusable."""
    ha = settings.ha
    if not ha.enabled:
        return None
    base = ha.storage_dir
    if base is None:
        base = (settings.checkpoint.storage_url or default_storage_url()).rstrip("/") + "/_ha"
    url = base.rstrip("/") + "/" + job_id
    try:
        store = open_store(url, ha.storage_options)
    except JobSubmissionError:
        raise
    except Exception as exc:
        raise JobSubmissionError(f"cannot use the HA storage {url}: {exc}") from exc
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    leadership = Leadership(store, holder, ha.lease_ms, ha.renew_interval_ms)
    try:
        leadership.look()
    except Exception as exc:
        raise JobSubmissionError(f"cannot read the leader lease in {url}: {exc}") from exc
    return leadership


def graph_fingerprint(graph: JobGraph) -> tuple[str, str]:
    """(digest, description) of the job graph: what a new leader compares with its own."""
    description = graph.describe()
    return hashlib.sha256(description.encode()).hexdigest()[:32], description


def await_leadership(
    leadership: Leadership,
    cancelled: threading.Event,
    job_id: JobId,
    graph: JobGraph,
    settings: JobSettings,
    storage_job_dir: str,
) -> Lead | End:
    """Stand by until this driver leads, then decide how it starts."""
    end = _standby_end(leadership, cancelled, job_id, graph, settings, storage_job_dir)
    if isinstance(end, End):
        log.warning("job %s ends %s without running here: %s", job_id, end.status.name, end.reason)
    return end


def _standby_end(
    leadership: Leadership,
    cancelled: threading.Event,
    job_id: JobId,
    graph: JobGraph,
    settings: JobSettings,
    storage_job_dir: str,
) -> Lead | End:
    digest, description = graph_fingerprint(graph)
    try:
        takeover = leadership.acquire(cancelled, job_id, digest)
    except LeadershipLost as exc:
        return End(JobStatus.SUSPENDED, str(exc))
    if takeover is None:
        return End(JobStatus.CANCELED, "cancelled while standing by")
    previous = takeover.previous
    _record_graph(leadership.store, digest, description, settings.job_name)
    if previous is not None and previous.graph_digest and previous.graph_digest != digest:
        log.warning(
            "the job graph differs from the one the previous leader ran (%s); restoring maps "
            "state by operator uid",
            previous.graph_digest,
        )
    if previous is not None and previous.ended and takeover.waited:
        leadership.finish(previous.status)  # the pointer as the leader left it
        return End(
            JobStatus[previous.status],
            f"the leader ended the job {previous.status} while this driver stood by",
        )
    first = _first_free_id(previous, settings, storage_job_dir)
    if previous is None:  # the job's first run under HA: an earlier run may still resume
        return Lead(None, first, decided=False)
    policy = settings.on_rerun  # cairn.recovery.on-rerun applies to a takeover as to a rerun
    fresh = previous.checkpoint_dir is None or (
        previous.status in ("FINISHED", "CANCELED") and policy is not RerunPolicy.FORCE_RESUME
    )
    if fresh or policy is RerunPolicy.FRESH:
        if previous.checkpoint_dir is not None:
            log.warning(
                "starting afresh: the last run ended %s (on-rerun %s)",
                previous.status,
                policy.value,
            )
        return Lead(None, first)
    if policy is RerunPolicy.REFUSE:
        leadership.finish(previous.status)
        return End(
            JobStatus.FAILED,
            f"refusing to resume from checkpoint {previous.checkpoint_id} "
            f"({previous.checkpoint_dir}): cairn.recovery.on-rerun is REFUSE",
        )
    log.warning(
        "resuming from checkpoint %d (%s), the latest the previous leader completed",
        previous.checkpoint_id,
        previous.checkpoint_dir,
    )
    return Lead(previous.checkpoint_dir, first)


def _first_free_id(previous: Pointer | None, settings: JobSettings, job_dir: str) -> CheckpointId:
    """Past the pointer's checkpoint plus what an old leader may still have in flight, and
    past every ``chk-<n>`` directory already there."""
    first = 1
    if previous is not None and previous.checkpoint_id is not None:
        first = previous.checkpoint_id + 1 + settings.checkpoint.max_concurrent
    try:
        loc = resolve(job_dir, settings.checkpoint.storage_options)
        if loc.fs.isdir(loc.path):
            found = chk_subdirs(loc)
            if found:
                first = max(first, found[0][0] + 1)
    except Exception as exc:  # the numbering margin above still holds
        log.warning("could not list %s: %s", job_dir, exc)
    return CheckpointId(first)


def _record_graph(store: ConditionalStore, digest: str, description: str, name: str) -> None:
    data = json.dumps({"job_name": name, "digest": digest, "description": description}).encode()
    try:
        current = store.read(GRAPH)
        if current is None:
            store.create(GRAPH, data)
        elif current.data != data:
            store.replace(GRAPH, data, current.version)
    except (WriteConflict, OSError) as exc:  # informational only
        log.warning("could not record the job graph in the HA storage: %s", exc)
