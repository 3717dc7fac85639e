"""Job lifecycle states with Flink's names (``pyflink.common.JobStatus``).

Invariant: globally terminal states (FINISHED, CANCELED, FAILED) never change again;
SUSPENDED is terminal only locally (another job master may resume the job).
"""

from __future__ import annotations

import enum

__all__ = ["JobStatus"]


class JobStatus(enum.Enum):
    """The state of a job.

    >>> JobStatus.FINISHED.is_globally_terminal_state(), JobStatus.RUNNING.is_terminal_state()
    (True, False)
    """

    INITIALIZING = 0
    CREATED = 1
    RUNNING = 2
    FAILING = 3
    FAILED = 4
    CANCELLING = 5
    CANCELED = 6
    FINISHED = 7
    RESTARTING = 8
    SUSPENDED = 9
    RECONCILING = 10

    def is_globally_terminal_state(self) -> bool:
        """The job will never run again (finished, cancelled or failed)."""
        return self in (JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED)

    def is_terminal_state(self) -> bool:
        """The job stopped here: globally terminal, or suspended."""
        return self.is_globally_terminal_state() or self is JobStatus.SUSPENDED
