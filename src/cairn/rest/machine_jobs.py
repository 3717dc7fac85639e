"""The running jobs of other drivers on this machine, for ``/jobs/overview``: the job
registry names them (what ``cairn list`` shows), their own endpoints say how they are.

Invariant: another job's token is used only to ask its own endpoint for ``/jobs/:jobid`` and
never leaves this module (rows carry the job's endpoint URL, never its token); each endpoint
is asked at most once per ``TTL_S`` whatever the number of readers, with a short timeout, and
a job whose endpoint does not answer is listed as ``UNKNOWN`` rather than guessed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from typing import Any

import aiohttp

from cairn.ids import VertexId
from cairn.rest.https import client_ssl
from cairn.rest.registry import JobEntry, JobRegistry
from cairn.rest.views import JobFacts, VertexFacts

__all__ = ["MachineJobs", "facts_of_details"]

TTL_S = 2.0
TIMEOUT_S = 1.0


def facts_of_details(entry: JobEntry, body: dict[str, Any], now_ms: int) -> JobFacts:
    """An overview row from another endpoint's ``/jobs/:jobid`` body.

    >>> e = JobEntry("j2", "other", "http://127.0.0.1:9", 100, 1, 0.0, "secret")
    >>> body = {"state": "RUNNING", "start-time": 100, "end-time": -1, "isStoppable": True,
    ...         "vertices": [{"id": "0", "name": "src", "parallelism": 2, "maxParallelism": 8}]}
    >>> f = facts_of_details(e, body, 600)
    >>> f.state, f.duration_ms, f.vertices[0].parallelism, f.endpoint
    ('RUNNING', 500, 2, 'http://127.0.0.1:9')
    """
    return JobFacts(
        job_id=entry.job_id,
        name=entry.name,
        state=str(body.get("state", "UNKNOWN")),
        start_ms=int(body.get("start-time", entry.start_time_ms)),
        end_ms=int(body.get("end-time", -1)),
        now_ms=now_ms,
        vertices=tuple(
            VertexFacts(
                VertexId(int(v["id"])),
                str(v["name"]),
                int(v["parallelism"]),
                int(v["maxParallelism"]),
            )
            for v in body.get("vertices", [])
        ),
        stoppable=bool(body.get("isStoppable", False)),
        endpoint=entry.endpoint,
        cpu=body["cpu"] if isinstance(body.get("cpu"), dict) else None,
    )


def _unknown(entry: JobEntry, now_ms: int) -> JobFacts:
    return JobFacts(
        entry.job_id, entry.name, "UNKNOWN", entry.start_time_ms, -1, now_ms, (), False,
        endpoint=entry.endpoint,
    )  # fmt: skip


class MachineJobs:
    """Rows of the registry's jobs, cached for ``ttl_s``; use on the endpoint's event loop."""

    def __init__(self, registry: JobRegistry, ttl_s: float = TTL_S) -> None:
        self._registry = registry
        self._ttl_s = ttl_s
        self._rows: list[JobFacts] = []
        self._at = float("-inf")
        self._lock: asyncio.Lock | None = None

    async def rows(self, exclude: Collection[str]) -> list[JobFacts]:
        """The running jobs of the registry except ``exclude`` (this process's own)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # concurrent readers share one round of requests
            if time.monotonic() - self._at >= self._ttl_s:
                entries = self._registry.running_jobs()
                self._rows = await self._ask([e for e in entries if e.job_id not in exclude])
                self._at = time.monotonic()
        return [r for r in self._rows if r.job_id not in exclude]

    async def _ask(self, entries: list[JobEntry]) -> list[JobFacts]:
        if not entries:
            return []
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            return list(await asyncio.gather(*(self._one(session, e) for e in entries)))

    @staticmethod
    async def _one(session: aiohttp.ClientSession, entry: JobEntry) -> JobFacts:
        headers = {"Authorization": f"Bearer {entry.token}"} if entry.token else {}
        now_ms = int(time.time() * 1000)
        try:
            url = f"{entry.endpoint}/jobs/{entry.job_id}"
            context = client_ssl(entry) or True  # True: aiohttp's default checks
            async with session.get(url, headers=headers, ssl=context) as response:
                if response.status != 200:
                    return _unknown(entry, now_ms)
                body = await response.json()
            return facts_of_details(entry, body, now_ms)
        except (
            aiohttp.ClientError,
            asyncio.TimeoutError,
            OSError,
            ValueError,
            KeyError,
            TypeError,
        ):
            return _unknown(entry, now_ms)
