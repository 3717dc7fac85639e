"""The lifecycle of a job and its workers: status transitions and typed outcomes.

Invariant: the job master changes a job's ``JobStatus`` only through :func:`transition`,
which allows exactly the moves in ``JOB_STATUS_TRANSITIONS`` and raises
``IllegalJobStatusTransition`` on any other; so a terminal status (FINISHED, CANCELED,
FAILED) never changes again, and a status Cairn never uses is never reached.

>>> transition(JobStatus.RUNNING, JobStatus.RESTARTING)
<JobStatus.RESTARTING: 8>
>>> transition(JobStatus.FINISHED, JobStatus.RUNNING)
Traceback (most recent call last):
...
cairn.deploy.lifecycle.IllegalJobStatusTransition: job status cannot change from FINISHED \
to RUNNING (allowed from FINISHED: none, it is terminal)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cairn.common.job_status import JobStatus

__all__ = [
    "JOB_STATUS_TRANSITIONS",
    "AttemptEnd",
    "AttemptOutcome",
    "IllegalJobStatusTransition",
    "WorkerOutcome",
    "transition",
]

_S = JobStatus

JOB_STATUS_TRANSITIONS: Mapping[JobStatus, frozenset[JobStatus]] = MappingProxyType(
    {
        # Created with the job master; INITIALIZING once it deploys the first attempt. FAILED when
        # it cannot start at all (e.g. no usable checkpoint at the restore path). Under high
        # availability a standby stays CREATED; it ends as the leader ended the job (FINISHED,
        # CANCELED, FAILED), CANCELED if cancelled, SUSPENDED if fenced while taking over.
        _S.CREATED: frozenset({_S.INITIALIZING, _S.FAILED, _S.FINISHED, _S.CANCELED, _S.SUSPENDED}),
        # RUNNING when every worker of the attempt runs; the attempt may also fail (restart or
        # give up) or be cancelled before that. SUSPENDED (from here, RUNNING and RESTARTING):
        # the driver lost its leadership; another driver runs the job.
        _S.INITIALIZING: frozenset(
            {_S.RUNNING, _S.RESTARTING, _S.CANCELED, _S.FAILED, _S.SUSPENDED}
        ),
        # FINISHED when every task finished; failover through RESTARTING.
        _S.RUNNING: frozenset({_S.FINISHED, _S.RESTARTING, _S.CANCELED, _S.FAILED, _S.SUSPENDED}),
        # The new attempt runs again, or fails again before all its workers ran (RESTARTING
        # anew), or the restart strategy gives up, or the client cancels during the delay.
        _S.RESTARTING: frozenset({_S.RUNNING, _S.RESTARTING, _S.CANCELED, _S.FAILED, _S.SUSPENDED}),
    }
)
"""Every status change Cairn's job master makes; any status not listed has none.

Flink's graph, cut down to what Cairn does: Cairn enters INITIALIZING when it deploys the
first attempt (after CREATED, where Flink starts in INITIALIZING), and fails over or cancels
an attempt synchronously, so FAILING and CANCELLING are never observed; RECONCILING does not
exist in Cairn. SUSPENDED, as in Flink, ends a driver that lost its leadership (high
availability): terminal for this driver only."""


class IllegalJobStatusTransition(RuntimeError):
    """A status change that ``JOB_STATUS_TRANSITIONS`` does not allow (a job master bug)."""


def transition(current: JobStatus, new: JobStatus) -> JobStatus:
    """``new`` if the job may go from ``current`` to ``new``; else raise
    ``IllegalJobStatusTransition`` naming the allowed targets."""
    allowed = JOB_STATUS_TRANSITIONS.get(current, frozenset())
    if new not in allowed:
        targets = ", ".join(sorted(s.name for s in allowed)) or "none, it is terminal"
        raise IllegalJobStatusTransition(
            f"job status cannot change from {current.name} to {new.name} "
            f"(allowed from {current.name}: {targets})"
        )
    return new


class AttemptEnd(enum.Enum):
    """How one deployment attempt of a job ended (the job master's view)."""

    FINISHED = "finished"  # every task finished
    CANCELLED = "cancelled"  # the client cancelled the job
    FAILED = "failed"  # a task, a worker or the executor failed: the restart strategy decides
    SUSPENDED = "suspended"  # this driver lost its leadership (high availability)


@dataclass(frozen=True)
class AttemptOutcome:
    """An attempt's end, with the error when it failed (and only then).

    >>> AttemptOutcome(AttemptEnd.FAILED)
    Traceback (most recent call last):
    ...
    ValueError: a failed attempt needs its error (and only a failed one has one)
    """

    end: AttemptEnd
    error: BaseException | None = None

    def __post_init__(self) -> None:
        if (self.end is AttemptEnd.FAILED) != (self.error is not None):
            raise ValueError("a failed attempt needs its error (and only a failed one has one)")

    @classmethod
    def failed(cls, error: BaseException) -> AttemptOutcome:
        return cls(AttemptEnd.FAILED, error)


class WorkerOutcome(enum.Enum):
    """How one worker ended (``WorkerResult.outcome``)."""

    FINISHED = "finished"  # told to shut down after every task finished
    CANCELLED = "cancelled"  # told to shut down because the attempt was cancelled
    FAILED = "failed"  # a task failed; the worker reported it to the job master
    CRASHED = "crashed"  # a simulated crash (fault injection): the worker died on purpose
    MASTER_LOST = "master-lost"  # the job master connection was lost: nobody to report to
