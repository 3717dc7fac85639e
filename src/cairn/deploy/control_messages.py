"""Control messages between the job master (driver) and workers.

Invariant: messages are immutable values sent only over authenticated connections
(``runtime.network``); every message from a worker names its deployment attempt so that the
job master can drop late messages of an attempt it already cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.messages import TaskKey
from cairn.deploy.failure_facts import FailureFacts
from cairn.deploy.initialization import WorkerInitialization
from cairn.deploy.worker_cpu import WorkerCpu
from cairn.events import CheckpointBarrier
from cairn.ids import AttemptNumber, CheckpointId, JobId
from cairn.runtime.reports import CollectedResults, SourceExhausted, TaskFinished, TaskMetrics

__all__ = [  # the runtime's reports are part of the protocol: re-exported
    "CollectedResults",
    "SourceExhausted",
    "TaskFinished",
    "TaskMetrics",
    "WorkerInitialization",
]

# ---------------------------------------------------------------- worker -> job master


@dataclass(frozen=True)
class RegisterWorker:
    attempt: AttemptNumber
    worker_index: int
    data_address: tuple[str, int]
    pid: int
    host: str


@dataclass(frozen=True)
class WorkerRunning:
    """State restored, operators opened: the worker processes records now (and how long its
    start and restore took)."""

    attempt: AttemptNumber
    worker_index: int
    initialization: WorkerInitialization | None = None


@dataclass(frozen=True)
class TaskFailed:
    attempt: AttemptNumber
    task: TaskKey | None
    error_type: str
    message: str
    traceback: str  # the user's traceback, formatted on the worker
    # The restored checkpoint's state failed its checks (CRC, decoding, a missing file): the
    # job master does not restore that checkpoint again.
    restore_failed: bool = False
    # Where in the user's code (``deploy/failure_facts.py``): the operator that raised, the
    # user's own frames (file, line, function, source), the record it was given (repr).
    facts: FailureFacts | None = None


@dataclass(frozen=True)
class MetricsReport:
    """The worker's tasks' counters and the CPU time the worker used (``deploy/worker_cpu.py``),
    read at the same moment."""

    attempt: AttemptNumber
    worker_index: int
    tasks: Mapping[TaskKey, TaskMetrics]
    cpu: WorkerCpu | None = None


@dataclass(frozen=True)
class WorkerOutput:
    """Whole lines a local-mode Spark worker printed (``output_forwarding``), for the driver's
    stdout."""

    attempt: AttemptNumber
    worker_index: int
    text: str


# ---------------------------------------------------------------- job master -> worker


@dataclass(frozen=True)
class PeerTable:
    data_addresses: Mapping[int, tuple[str, int]]


@dataclass(frozen=True)
class TriggerCheckpoint:
    barrier: CheckpointBarrier


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    checkpoint_id: CheckpointId


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    checkpoint_id: CheckpointId
    reason: CheckpointFailureReason


@dataclass(frozen=True)
class EndSources:
    """Every source is exhausted and the final checkpoint (if any) completed: end input."""


@dataclass(frozen=True)
class ResumeSources:
    """A stop-with-savepoint failed: sources suspended after its barrier poll again."""


@dataclass(frozen=True)
class Shutdown:
    """All tasks finished (or the attempt is cancelled): release resources and return."""

    cancelled: bool = False


@dataclass(frozen=True)
class RestoreInfo:
    """The checkpoint an attempt restores. ``metadata``: its ``_metadata`` as the job master
    chose it, encoded and signed with the job's key (``None``: too large to ship, or an older
    job master): a worker checks it as it would the file and need not ask the storage for it,
    so a restore whose state is all in local recovery's copies makes no storage request."""

    checkpoint_dir: str
    checkpoint_id: CheckpointId
    metadata: bytes | None = None


@dataclass(frozen=True)
class WorkerLaunch:
    """Everything a worker needs to start; travels inside the Spark closure."""

    job_id: JobId
    attempt: AttemptNumber
    num_workers: int
    master_address: tuple[str, int]
    secret: bytes
    job_payload: bytes  # cloudpickled (JobSettings, JobGraph)
    restore: RestoreInfo | None = None
    faults: tuple[Any, ...] = field(default_factory=tuple)
    # Set by the Spark executor in local mode: stdout goes to the driver's stdout.
    forward_output: bool = False
