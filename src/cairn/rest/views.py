"""The JSON bodies of the control endpoint, shaped like Flink's REST API (same field names:
``jid``, ``state``, ``start-time``, ``request-id``, ``status.id``, ``operation.location``,
``failure-cause``, ``errors``) so that tools written for Flink's API can read them.

Invariant: pure functions of immutable facts (:class:`JobFacts`, an operation's outcome);
nothing here touches the job, a clock or the network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.ids import JobId, VertexId


@dataclass(frozen=True)
class VertexFacts:
    """A job vertex; ``status``: its own (a BATCH job's stage), None: the job's."""

    id: VertexId
    name: str
    parallelism: int
    max_parallelism: int
    status: str | None = None


def stage_status(job_state: str, finished: frozenset[int], vertex: int, inputs: list[int]) -> str:
    """A BATCH job's stage as Flink shows a vertex: FINISHED once it completed; while the job
    runs, RUNNING once every stage it reads finished (it has started), else CREATED; when
    the job ended otherwise, the job's state.

    >>> [stage_status("RUNNING", frozenset({0}), v, i) for v, i in ((0, []), (1, [0]), (2, [1]))]
    ['FINISHED', 'RUNNING', 'CREATED']
    >>> stage_status("FAILED", frozenset({0}), 1, [0])
    'FAILED'
    """
    if vertex in finished:
        return "FINISHED"
    if job_state != "RUNNING":
        return job_state
    return "RUNNING" if all(i in finished for i in inputs) else "CREATED"


@dataclass(frozen=True)
class JobFacts:
    """What the endpoint reports about a job at one moment (``end_ms``: -1 while running,
    as Flink reports it; ``endpoint``: the URL of the endpoint serving the job when it is not
    the one answering, i.e. a job of another driver; ``cpu``: the job's CPU block,
    ``observability.cpu.JobCpu.to_dict``, ``None`` before its workers reported)."""

    job_id: JobId
    name: str
    state: str  # a JobStatus name: RUNNING, FINISHED, ...
    start_ms: int
    end_ms: int
    now_ms: int
    vertices: tuple[VertexFacts, ...]
    stoppable: bool  # a stop-with-savepoint may be asked now
    endpoint: str | None = None
    cpu: Mapping[str, Any] | None = None

    @property
    def duration_ms(self) -> int:
        return (self.end_ms if self.end_ms >= 0 else self.now_ms) - self.start_ms


STANDBY = "STANDBY"  # not a Flink job status: a driver waiting for its job's leader lease


def shown_state(status: str, ha_role: str | None) -> str:
    """The ``state`` a job's endpoint reports: its status, or ``STANDBY`` while its driver
    stands by for the job's leader lease (high availability; its status is still CREATED).

    >>> shown_state("CREATED", "standby"), shown_state("RUNNING", "leader")
    ('STANDBY', 'RUNNING')
    >>> shown_state("CREATED", None)
    'CREATED'
    """
    return STANDBY if ha_role == "standby" else status


def leadership(role: str, leader: str | None, token: int | None) -> dict[str, Any]:
    """The ``leadership`` block of ``GET /jobs/:jobid`` under high availability (Cairn's):
    this driver's ``role`` (``standby``, ``leader``, ``lost``, ...), the driver it stands by
    for and its own fencing token once it led.

    >>> leadership("standby", "host-a:41230:5f0c1e2a", None)
    {'role': 'standby', 'leader': 'host-a:41230:5f0c1e2a', 'fencing-token': None}
    """
    return {"role": role, "leader": leader, "fencing-token": token}


def errors(*messages: str) -> dict[str, Any]:
    """Flink's error body.

    >>> errors("Job abc not found")
    {'errors': ['Job abc not found']}
    """
    return {"errors": list(messages)}


def _tasks(job: JobFacts) -> dict[str, int]:
    total = sum(v.parallelism for v in job.vertices)
    running = total if job.state == "RUNNING" else 0
    finished = total if job.state == "FINISHED" else 0
    canceled = total if job.state == "CANCELED" else 0
    failed = total if job.state == "FAILED" else 0
    return {
        "total": total,
        "running": running,
        "finished": finished,
        "canceled": canceled,
        "failed": failed,
    }


def job_overview(jobs: Sequence[JobFacts]) -> dict[str, Any]:
    """``GET /jobs/overview`` (a job of another driver also has Cairn's ``endpoint``; a job
    whose workers reported their CPU time has Cairn's ``cpu`` block, as in ``/jobs/:jobid``).

    >>> job = JobFacts("j1", "sums", "RUNNING", 1000, -1, 4000, (VertexFacts(0, "src", 2, 128),),
    ...                True)
    >>> row = job_overview([job])["jobs"][0]
    >>> row["jid"], row["state"], row["duration"], row["end-time"], row["tasks"]["running"]
    ('j1', 'RUNNING', 3000, -1, 2)
    """
    return {
        "jobs": [
            {
                "jid": j.job_id,
                "name": j.name,
                "state": j.state,
                "start-time": j.start_ms,
                "end-time": j.end_ms,
                "duration": j.duration_ms,
                "last-modification": j.now_ms if j.end_ms < 0 else j.end_ms,
                "tasks": _tasks(j),
                **({"endpoint": j.endpoint} if j.endpoint is not None else {}),
                **({"cpu": dict(j.cpu)} if j.cpu is not None else {}),
            }
            for j in jobs
        ]
    }


def jobs_list(jobs: Sequence[JobFacts]) -> dict[str, Any]:
    """``GET /jobs``: ``{"jobs": [{"id": ..., "status": ...}]}``."""
    return {"jobs": [{"id": j.job_id, "status": j.state} for j in jobs]}


def job_details(job: JobFacts, io: Mapping[VertexId, Any] | None = None) -> dict[str, Any]:
    """``GET /jobs/:jobid`` (the fields Cairn knows; vertices in topological order, each with
    Flink's ``metrics`` block from ``io`` by vertex id when given; Cairn's ``cpu`` block once
    the workers reported their CPU time).

    >>> job = JobFacts("j1", "sums", "RUNNING", 1000, -1, 4000, (), True, cpu={"cores": 0.5})
    >>> job_details(job)["cpu"]
    {'cores': 0.5}
    """
    details = {
        "jid": job.job_id,
        "name": job.name,
        "isStoppable": job.stoppable,
        "state": job.state,
        "start-time": job.start_ms,
        "end-time": job.end_ms,
        "duration": job.duration_ms,
        "now": job.now_ms,
        "maxParallelism": max((v.max_parallelism for v in job.vertices), default=-1),
        "vertices": [
            {
                "id": str(v.id),
                "name": v.name,
                "parallelism": v.parallelism,
                "maxParallelism": v.max_parallelism,
                "status": v.status or job.state,
                **({"metrics": io[v.id]} if io is not None and v.id in io else {}),
            }
            for v in job.vertices
        ],
    }
    if job.cpu is not None:
        details["cpu"] = dict(job.cpu)
    return details


def trigger_accepted(request_id: str) -> dict[str, Any]:
    """The answer to ``POST /jobs/:jobid/savepoints`` and ``/stop`` (HTTP 202)."""
    return {"request-id": request_id}


def operation_status(
    done: bool, location: str | None = None, failure: BaseException | None = None
) -> dict[str, Any]:
    """``GET /jobs/:jobid/savepoints/:triggerid``: in progress, or completed with the
    savepoint's ``location`` or a ``failure-cause`` (class and message).

    >>> operation_status(False)
    {'status': {'id': 'IN_PROGRESS'}}
    >>> operation_status(True, "/sp/1")
    {'status': {'id': 'COMPLETED'}, 'operation': {'location': '/sp/1'}}
    >>> operation_status(True, failure=ValueError("no room"))["operation"]["failure-cause"]
    {'class': 'ValueError', 'stack-trace': 'ValueError: no room'}
    """
    if not done:
        return {"status": {"id": "IN_PROGRESS"}}
    if failure is not None:
        name = type(failure).__name__
        cause = {"class": name, "stack-trace": f"{name}: {failure}"}
        return {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}}
    return {"status": {"id": "COMPLETED"}, "operation": {"location": location}}
