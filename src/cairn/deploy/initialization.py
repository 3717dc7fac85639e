"""Where the time of a restore goes (Flink's ``JobInitialization`` trace): what each worker
measured while it started and restored, and the job master's summary of one attempt.

Invariant: pure records and arithmetic; every duration is measured by the process that spent
it (the job master's own phases on its clock, a worker's on its own), and the only figures
compared across processes are wall-clock instants (a worker's start against the launch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cairn.ids import CheckpointId

__all__ = ["JobInitialization", "WorkerInitialization"]


@dataclass(frozen=True)
class WorkerInitialization:
    """One worker's start, sent with ``WorkerRunning``.

    ``started_ms``: wall clock when the worker began (its process scheduled, forked and its
    code imported before that); ``setup_ms``: connecting to the job master and the peers
    (waiting for the other workers too); ``metadata_ms``: reading the checkpoint's metadata
    (on an object store the first request of a new process sets its client up);
    ``initialize_state_ms``: building the tasks and restoring their state, of which
    ``state_read_ms`` reading ``state_bytes`` (reads running at once count once), of which
    ``local_bytes`` from local recovery's copies on the worker's host, the rest from checkpoint
    storage.
    """

    started_ms: int
    setup_ms: int = 0
    metadata_ms: int = 0
    initialize_state_ms: int = 0
    state_read_ms: int = 0
    state_bytes: int = 0
    local_bytes: int = 0


@dataclass(frozen=True)
class JobInitialization:
    """One attempt's restore, from the job master's view.

    >>> init = JobInitialization.of(
    ...     checkpoint_id=7, began_ms=1_000, chosen_ms=1_150, launched_ms=1_160,
    ...     running_ms=3_300,
    ...     workers=[WorkerInitialization(1_200, 5, 3, 300, 250, 50_000_000),
    ...              WorkerInitialization(2_100, 10, 400, 700, 600, 60_000_000)])
    >>> init.total_ms, init.choose_ms, init.workers_started_ms, init.initialize_state_ms
    (2300, 150, 940, 700)
    >>> init.describe()  # doctest: +NORMALIZE_WHITESPACE
    'restored checkpoint 7 in 2300 ms: choosing and verifying it 150 ms, the last worker
    started 940 ms after the launch, its metadata 400 ms, its state 700 ms (reading 60.0 MB
    in 600 ms); 110.0 MB read in all'
    """

    checkpoint_id: CheckpointId
    total_ms: int  # from choosing the checkpoint to every worker running
    choose_ms: int  # choosing and verifying the checkpoint in the job master
    workers_started_ms: int  # from the launch until the last worker began
    metadata_ms: int  # of the slowest worker (see below)
    initialize_state_ms: int  # the longest of any worker
    state_read_ms: int  # that worker's reads from checkpoint storage
    worker_state_bytes: int  # that worker's bytes
    state_bytes: int  # read by all workers
    local_bytes: int = 0  # of those, from local recovery's copies

    @classmethod
    def of(
        cls,
        checkpoint_id: CheckpointId,
        began_ms: int,
        chosen_ms: int,
        launched_ms: int,
        running_ms: int,
        workers: Sequence[WorkerInitialization],
    ) -> JobInitialization:
        """The summary of an attempt: the job master began choosing the checkpoint at
        ``began_ms``, had chosen it at ``chosen_ms``, launched the workers at ``launched_ms``
        and saw them all running at ``running_ms`` (wall clock); the slowest worker is the
        one that ran last."""
        slowest = max(
            workers,
            key=lambda w: w.started_ms + w.setup_ms + w.metadata_ms + w.initialize_state_ms,
            default=WorkerInitialization(launched_ms),
        )
        return cls(
            checkpoint_id=checkpoint_id,
            total_ms=running_ms - began_ms,
            choose_ms=chosen_ms - began_ms,
            workers_started_ms=max((w.started_ms for w in workers), default=launched_ms)
            - launched_ms,
            metadata_ms=slowest.metadata_ms,
            initialize_state_ms=slowest.initialize_state_ms,
            state_read_ms=slowest.state_read_ms,
            worker_state_bytes=slowest.state_bytes,
            state_bytes=sum(w.state_bytes for w in workers),
            local_bytes=sum(w.local_bytes for w in workers),
        )

    def describe(self) -> str:
        """One line for the log."""
        return (
            f"restored checkpoint {self.checkpoint_id} in {self.total_ms} ms: choosing and "
            f"verifying it {self.choose_ms} ms, the last worker started "
            f"{self.workers_started_ms} ms after the launch, its metadata {self.metadata_ms} "
            f"ms, its state {self.initialize_state_ms} ms (reading "
            f"{self.worker_state_bytes / 1e6:.1f} MB in {self.state_read_ms} ms); "
            f"{self.state_bytes / 1e6:.1f} MB read in all"
            + (f", {self.local_bytes / 1e6:.1f} MB of it locally" if self.local_bytes else "")
        )
