"""``JobClient`` at PyFlink's import path (``pyflink.common.job_client``): what a submitted job
hands back, as a protocol.

Invariant: this is only the contract; its implementations live above it, one per execution
mode (``cairn.deploy.job_master_client.StreamingJobClient`` over a streaming job master,
``cairn.batch.client.BatchJobClient`` over a BATCH job's stages), and neither inherits from
the other, so the API imports neither a job master nor Spark to name the type.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, Protocol

from cairn.common.job_execution_result import JobExecutionResult
from cairn.common.job_status import JobStatus
from cairn.events import SavepointFormatType

__all__ = ["JobClient"]


class JobClient(Protocol):
    """The client of a submitted job: PyFlink's ``JobClient`` methods and Cairn's extras.

    A BATCH job takes no savepoints (its ``trigger_savepoint`` and ``stop_with_savepoint``
    raise) and has no checkpoint statistics (None). The streaming client also has
    ``job_master``, the running job's driver-side master (for tests and tools).
    """

    def get_job_id(self) -> str:
        """The job's id (a ``JobId``)."""
        ...

    def get_job_status(self) -> JobStatus: ...

    def cancel(self) -> None:
        """Cancel the job; it ends CANCELED (returns at once)."""
        ...

    def trigger_savepoint(
        self,
        savepoint_directory: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        """Take a savepoint while the job runs on; ``.result()`` gives its directory."""
        ...

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        """Stop the job with a savepoint; ``.result()`` gives its directory."""
        ...

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        """Wait for the job to end; raise ``JobExecutionException`` if it failed."""
        ...

    # --- Cairn's extras

    def collect_iterator(self, transformation_id: int) -> Iterator[Any]:
        """The records of the collect sink ``transformation_id`` (``execute_and_collect``)."""
        ...

    def get_checkpoint_statistics(self) -> Any:
        """A ``cairn.checkpoint.stats.CheckpointStatsSnapshot``, or None (checkpointing
        disabled, or a BATCH job); typed loosely as the API layer sits below the
        checkpoint layer."""
        ...

    def worker_pids(self) -> dict[int, int]:
        """The pids of the job's worker processes, by worker index (none for BATCH)."""
        ...

    def wait_for_status(self, status: JobStatus, timeout: float) -> bool:
        """Whether the job reached ``status`` within ``timeout`` seconds."""
        ...
