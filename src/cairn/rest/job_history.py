"""Every job one control endpoint lists besides its own, and the final views it serves of
ended ones: this driver's jobs (``driver_jobs``), other drivers' running jobs (the job
registry, ``machine_jobs``) and the job archive (``archive``: ended jobs of any driver).

Invariant: a job is listed once, by the first source that knows it, in this order: the
endpoint's own job, this driver's jobs, other drivers' running jobs, the archive (rows marked
``"archived": true``). An ended job's views are served as they were when it ended (this
driver's memory first, then its archive) and only for GET; archives are read off the event
loop, and writing one never raises.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from cairn.ids import JobId
from cairn.rest import views
from cairn.rest.archive import ArchivedJob, JobArchive
from cairn.rest.driver_jobs import DRIVER_JOBS, FinishedJob
from cairn.rest.machine_jobs import MachineJobs
from cairn.rest.registry import JobRegistry

__all__ = ["JobHistory"]

_JOB_PATH = re.compile(r"^/jobs/([^/]+)(/.*)?$")
Handler = Callable[[web.Request], Any]


class JobHistory:
    """The other jobs as endpoint ``own_job_id`` lists and serves them (its event loop)."""

    def __init__(self, own_job_id: JobId, registry: JobRegistry, archive: JobArchive) -> None:
        self._own = own_job_id
        self._machine = MachineJobs(registry)
        self.archive = archive

    def running(self, facts: Callable[[], views.JobFacts]) -> None:
        DRIVER_JOBS.running(self._own, facts)

    def finished(
        self, facts: views.JobFacts, details: dict[str, Any], more: Mapping[str, Any]
    ) -> None:
        """The job ended: keep its final views in this driver and write its archive (with
        ``more``'s bodies, by path under ``/jobs/:jobid/``)."""
        DRIVER_JOBS.finished(FinishedJob(facts, details))
        row = views.job_overview([facts])["jobs"][0]
        self.archive.archive(ArchivedJob.of(row, details, more))

    async def _rows(self, own: views.JobFacts) -> tuple[list[views.JobFacts], list[Any]]:
        driver = [f for f in DRIVER_JOBS.overview() if f.job_id != self._own]
        machine = await self._machine.rows(DRIVER_JOBS.ids() | {self._own})
        live = [own, *driver, *machine]
        # A run is a job id and a start: earlier runs of a live job are history too.
        known = {(f.job_id, f.start_ms) for f in live}
        archived = await asyncio.to_thread(self.archive.jobs)
        rows = [a.row for a in archived]
        return live, [
            {**r, "archived": True} for r in rows if (r["jid"], r.get("start-time")) not in known
        ]

    async def overview(self, own: views.JobFacts) -> dict[str, Any]:
        """``GET /jobs/overview``: the own job first, then the others by precedence."""
        live, archived = await self._rows(own)
        return {"jobs": views.job_overview(live)["jobs"] + archived}

    async def jobs(self, own: views.JobFacts) -> dict[str, Any]:
        """``GET /jobs``."""
        live, archived = await self._rows(own)
        rows = [{"id": r["jid"], "status": r["state"]} for r in archived]
        return {"jobs": views.jobs_list(live)["jobs"] + rows}

    @web.middleware
    async def serve_ended(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """GET of another job's path: its final body if it ended (else the handler's 404)."""
        match = _JOB_PATH.match(request.path)
        jid = JobId(match.group(1)) if match else None
        if request.method != "GET" or jid is None or jid in (self._own, "overview"):
            return await handler(request)  # type: ignore[no-any-return]
        details = DRIVER_JOBS.details(jid)
        if details is not None and match is not None and match.group(2) is None:
            return web.json_response(details)  # a finished job of this driver, as it ended
        archived = await asyncio.to_thread(self.archive.get, jid)
        body = None if archived is None else archived.body(request.path)
        if body is not None:
            return web.json_response(body)
        return await handler(request)  # type: ignore[no-any-return]
