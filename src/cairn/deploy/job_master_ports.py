"""The ports of the job master: what each of its helpers may do to it, and nothing more.

Invariant: a helper (``coordinator_gateway.py``, ``attempt_driver.py``,
``job_master_leadership.py``) receives one of these ports, never the ``JobMaster``, and the
job master implements each with public methods; so no helper reads or writes the job
master's private state, and every way in to it is listed here. ``ObservedJob`` is what the
observers (progress line, control endpoint, metrics reporters, doctor) read: a STREAMING
job's ``JobMaster`` and a BATCH job's ``batch.monitor.BatchMonitor`` both provide it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from cairn.checkpoint.ha.leader import Leadership
from cairn.checkpoint.messages import TaskKey
from cairn.checkpoint.storage import CheckpointStorage
from cairn.common.job_client import JobClient
from cairn.common.job_status import JobStatus
from cairn.deploy import control_messages as p
from cairn.deploy.job_view import JobView
from cairn.deploy.savepoint_requests import StopWithSavepoint
from cairn.deploy.worker_cpu import WorkerCpu
from cairn.events import SavepointFormatType
from cairn.graph.job_graph import JobGraph
from cairn.ids import AttemptNumber, JobId
from cairn.settings import JobSettings

__all__ = [
    "AttemptHost",
    "AttemptPort",
    "LeadershipPort",
    "Listener",
    "ObservedJob",
    "ServedClient",
    "SourceTasks",
]

Listener = Callable[[str, Any], None]


class AttemptPort(Protocol):
    """What the checkpoint coordinator's gateway may do to the running attempt."""

    def leads(self) -> bool:
        """Whether this driver still holds its leadership (always True without HA)."""
        ...

    def broadcast_to_current(self, message: object) -> None:
        """Send ``message`` to every worker of the current attempt (none: dropped)."""
        ...

    def fail_current(self, reason: str) -> None:
        """Fail the current attempt with ``reason`` (the restart strategy decides next)."""
        ...

    def emit(self, event: str, payload: Any) -> None:
        """Tell the job's listeners of ``event``."""
        ...


class AttemptHost(Protocol):
    """What one attempt's driver (``attempt_driver.py``) may do to the job master, on its
    thread."""

    def all_workers_running(
        self,
        attempt: AttemptNumber,
        launched_ms: int,
        initializations: Mapping[int, p.WorkerInitialization],
    ) -> None:
        """Every worker of ``attempt`` runs (called on every tick from then on): the job is
        RUNNING."""
        ...

    def worker_registered(
        self, worker_index: int, pid: int, data_address: tuple[str, int]
    ) -> None: ...

    def record_metrics(
        self, reports: Mapping[TaskKey, p.TaskMetrics], cpu: tuple[int, WorkerCpu] | None = None
    ) -> None:
        """The latest counters of some tasks and (with a worker's periodic report) the CPU
        time worker ``cpu[0]`` used."""
        ...

    def deliver_collected(self, results: p.CollectedResults) -> None:
        """Hand released ``execute_and_collect`` results to the client (once each)."""
        ...

    def checkpoint_acknowledged(self) -> None:
        """A task acknowledged a checkpoint (which may have completed it)."""
        ...


class LeadershipPort(Protocol):
    """What standing by and taking over (high availability) may do to the job master."""

    @property
    def job_id(self) -> JobId: ...
    @property
    def settings(self) -> JobSettings: ...
    @property
    def graph(self) -> JobGraph: ...
    @property
    def storage(self) -> CheckpointStorage: ...
    @property
    def executor(self) -> object: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def num_workers(self) -> int: ...
    @property
    def leadership(self) -> Leadership | None: ...

    @property
    def cancelled(self) -> threading.Event:
        """Set once the client cancelled the job (a standby stops waiting)."""
        ...

    def current_worker_pids(self) -> Mapping[int, int]:
        """The pids of the current attempt's registered workers."""
        ...

    def add_listener(self, listener: Listener) -> None: ...

    def end_unled(self, status: JobStatus, error: BaseException | None) -> None:
        """End the job in ``status`` without running it here (the leader ended it, or this
        standby was cancelled or fenced)."""
        ...

    def take_over(self, restore_path: str | None, first_id: int) -> None:
        """This driver leads: restore the HA pointer's checkpoint (if any), and number
        checkpoints from ``first_id`` at least."""
        ...

    def start_leading(self, decided: bool) -> None:
        """Plan the run now; ``decided``: the HA pointer, not the run record, says where to
        resume."""
        ...

    def post(self, message: object) -> None:
        """Put ``message`` into the job master's inbox, as of its current attempt (any
        thread)."""
        ...


class SourceTasks(Protocol):
    """The part of a job's plan observers read: which subtasks are its sources' (their
    records out are the job's input)."""

    @property
    def source_tasks(self) -> tuple[TaskKey, ...]: ...


class ObservedJob(Protocol):
    """What the job's observers read of it, from any thread: its identity and plan, the
    immutable ``view`` (read once per look, swapped whole), and ``listeners`` called with
    ``(event, payload)`` (``"status"`` with each new ``JobStatus``); ``stop_with_savepoint``
    for the control endpoint (a BATCH job's fails: it has no checkpoints)."""

    @property
    def job_id(self) -> JobId: ...
    @property
    def settings(self) -> JobSettings: ...
    @property
    def graph(self) -> JobGraph: ...
    @property
    def plan(self) -> SourceTasks: ...
    @property
    def view(self) -> JobView: ...
    @property
    def leadership(self) -> Leadership | None: ...
    @property
    def listeners(self) -> list[Listener]: ...

    def stop_with_savepoint(
        self,
        target_dir: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
        drain: bool = False,
    ) -> StopWithSavepoint: ...


class ServedClient(JobClient, Protocol):
    """The client a job's control endpoint serves: PyFlink's ``JobClient`` and what its
    observers read (``job_master``: the STREAMING job master, or a BATCH job's monitor)."""

    @property
    def job_master(self) -> ObservedJob: ...
