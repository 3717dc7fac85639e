"""Why an attempt of a job failed, as the job master reports it.

Invariant: a ``TaskFailure`` carries the remote (user's) traceback in its text, and only a
``TaskFailure`` whose worker could not read its restored state counts as unusable state.
"""

from __future__ import annotations

from cairn.deploy import control_messages as p

__all__ = ["TaskFailure", "WorkerLost", "could_not_restore"]


class TaskFailure(Exception):
    """A task of the job failed; ``str()`` carries the remote (user's) traceback."""

    def __init__(self, failed: p.TaskFailed) -> None:
        where = f"task {failed.task}" if failed.task else "worker"
        super().__init__(
            f"{where} failed with {failed.error_type}: {failed.message}\n"
            f"--- remote traceback ---\n{failed.traceback}"
        )
        self.failed = failed


class WorkerLost(Exception):
    """A worker died or its connection to the job master broke."""


def could_not_restore(error: BaseException) -> bool:
    """The attempt failed because a worker could not read the state it restored."""
    return isinstance(error, TaskFailure) and error.failed.restore_failed
