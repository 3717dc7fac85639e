"""The jobs of this driver process, running and finished, as every control endpoint of the
process lists them in ``/jobs/overview`` (Flink's job manager lists its running jobs and its
archive of finished ones the same way).

Invariant: a running job is listed through its endpoint's own view (read when asked, never
copied); when it ends, its final overview row and ``/jobs/:jobid`` body are kept, immutable,
for the newest ``MAX_FINISHED`` finished jobs (Flink's ``jobstore.max-capacity``) and nothing
else of the job (no state, no statistics history). Safe from any thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cairn.ids import JobId
from cairn.rest.views import JobFacts

__all__ = ["DRIVER_JOBS", "DriverJobs", "FinishedJob"]

MAX_FINISHED = 50


@dataclass(frozen=True)
class FinishedJob:
    facts: JobFacts
    details: dict[str, Any]  # the final GET /jobs/:jobid body


class DriverJobs:
    """What this process's endpoints know of each other's jobs.

    >>> from cairn.rest.views import JobFacts
    >>> jobs = DriverJobs(max_finished=1)
    >>> live = JobFacts("a", "first", "RUNNING", 0, -1, 5, (), True)
    >>> jobs.running("a", lambda: live)
    >>> [f.state for f in jobs.overview()]
    ['RUNNING']
    >>> jobs.finished(FinishedJob(JobFacts("a", "first", "FINISHED", 0, 9, 9, (), False), {}))
    >>> jobs.finished(FinishedJob(JobFacts("b", "second", "FAILED", 1, 8, 8, (), False), {}))
    >>> [(f.job_id, f.state) for f in jobs.overview()], jobs.details("a")
    ([('b', 'FAILED')], None)
    """

    def __init__(self, max_finished: int = MAX_FINISHED) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Callable[[], JobFacts]] = {}
        self._finished: OrderedDict[str, FinishedJob] = OrderedDict()
        self._max_finished = max_finished

    def running(self, job_id: JobId, facts: Callable[[], JobFacts]) -> None:
        """List ``job_id`` through ``facts`` until :meth:`finished`."""
        with self._lock:
            self._running[job_id] = facts

    def finished(self, job: FinishedJob) -> None:
        """Keep ``job``'s final view (the oldest finished ones are forgotten)."""
        with self._lock:
            self._running.pop(job.facts.job_id, None)
            self._finished[job.facts.job_id] = job
            while len(self._finished) > self._max_finished:
                self._finished.popitem(last=False)

    def forget(self, job_id: JobId) -> None:
        with self._lock:
            self._running.pop(job_id, None)

    def overview(self) -> list[JobFacts]:
        """Running jobs (now), then finished ones, newest first."""
        with self._lock:
            live = list(self._running.values())
            done = [j.facts for j in reversed(self._finished.values())]
        return [f() for f in live] + done

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._running) | set(self._finished)

    def details(self, job_id: JobId) -> dict[str, Any] | None:
        """The final ``/jobs/:jobid`` body of a finished job of this process."""
        with self._lock:
            job = self._finished.get(job_id)
        return None if job is None else job.details


DRIVER_JOBS = DriverJobs()  # one per process: every endpoint of this driver shares it
