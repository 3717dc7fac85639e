"""The control endpoint of one running job: an aiohttp server on its own event-loop thread
in the driver, serving Flink's REST paths for this job, and its entry in the job registry.

Invariant: every request is checked before it touches the job: the bearer token (unless
``cairn.rest.token.enabled`` is false; compared in constant time), then the job id in the
path (another id is 404, never this job's data; an ended job's GETs get its final views,
``job_history.py``); commands reach the job only through its
thread-safe ``JobClient``/``JobMaster`` methods, never on the event loop's own state, and
what changes while it runs is read from the job master's immutable ``view`` snapshots;
savepoints and stops are asynchronous operations (``savepoint_operations.py``). The
registry entry exists only while the job runs (removed when it ends; a driver that died
leaves one that readers detect by its pid and delete).

Example, with the URL and token of the job's registry entry (what ``cairn savepoint`` does)::

    curl -H "Authorization: Bearer $TOKEN" $URL/jobs/overview
    curl -X POST -H "Authorization: Bearer $TOKEN" -d '{"target-directory": "/sp/a"}' \
        $URL/jobs/$JOB_ID/savepoints                       # -> {"request-id": "..."}
    curl -H "Authorization: Bearer $TOKEN" $URL/jobs/$JOB_ID/savepoints/$REQUEST_ID
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from aiohttp import web

from cairn.common.job_status import JobStatus
from cairn.ids import CheckpointId, VertexId
from cairn.observability import prometheus
from cairn.observability.cpu import job_cpu
from cairn.observability.doctor.fact_sources import facts_of_master
from cairn.observability.doctor.rules import diagnose
from cairn.rest import graph_views, metric_views, views
from cairn.rest.archive import JobArchive, default_archive_dir
from cairn.rest.https import server_ssl
from cairn.rest.job_history import JobHistory
from cairn.rest.live import LiveFeed, Update
from cairn.rest.registry import JobEntry, JobRegistry, process_start_time
from cairn.rest.savepoint_operations import (
    BadRequest,
    Operations,
    read_body,
    savepoint_request,
    stop_request,
)
from cairn.settings import RestSettings

if TYPE_CHECKING:
    from cairn.deploy.job_master_ports import ServedClient

log = logging.getLogger(__name__)

TOKEN_HEADER = "Authorization"
_MAX_EXCEPTIONS = 32
# The web UI: static files without job data, served without the token (the page reads the
# token from its URL's fragment, which browsers never send, and sends it with every call).
WEB_FILES = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
_WEB_DIR = os.path.join(os.path.dirname(__file__), "web")
LINGER_S = 5.0  # after the job ended, for clients waiting on the final status

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


def _error(status: int, message: str) -> web.Response:
    return _json(views.errors(message), status)


class RestEndpoint:
    """Serves ``client``'s job on ``settings.bind_address:settings.port`` (0: a free port).

    :meth:`start` returns once the server listens and the job is registered; call
    :meth:`close` when the job ended (it unregisters at once and stops serving after
    ``linger_s``, so a client polling a stop-with-savepoint sees the final status).
    """

    def __init__(
        self,
        client: ServedClient,
        settings: RestSettings,
        registry: JobRegistry | None = None,
        linger_s: float = LINGER_S,
    ) -> None:
        self._client = client
        self._master = client.job_master
        self._settings = settings
        self._registry = registry or JobRegistry(settings.registry_dir)
        self._linger_s = linger_s
        self.token: str | None = secrets.token_urlsafe(32) if settings.token else None
        # Savepoints and stops by trigger id; closing waits (up to the linger time) while a
        # client still awaits a stop's outcome or the job's end.
        self._operations = Operations()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"cairn-rest-{self._master.job_id}", daemon=True
        )
        self.url = ""
        self._closed = False
        # Failures of attempts that were restarted (the web UI's exceptions tab), newest last.
        self._exceptions: list[graph_views.ExceptionFacts] = []
        self._live = LiveFeed(self._loop, self._live_update)
        archive_dir = settings.archive_dir or default_archive_dir(self._registry.directory)
        options = self._master.settings.checkpoint.storage_options  # s3.* keys, as checkpoints
        archive = JobArchive(archive_dir, settings.archive_retained, options)
        self._history = JobHistory(self._master.job_id, self._registry, archive)
        self._master.listeners.append(self._on_job_event)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> str:
        """Listen, register the job; returns the endpoint's URL."""
        self._registry.ensure_private_dir()  # before listening: a refusal leaves nothing open
        self._thread.start()
        try:
            port = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=30)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            raise
        host = self._settings.address
        security = self._master.settings.security
        scheme = "https" if security.rest is not None else "http"
        self.url = f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
        master = self._master
        pid = os.getpid()
        self._registry.register(
            JobEntry(
                job_id=master.job_id,
                name=master.settings.job_name,
                endpoint=self.url,
                start_time_ms=master.view.start_ms,
                pid=pid,
                process_start=process_start_time(pid) or 0.0,
                token=self.token,
                truststore=None if security.rest is None else security.rest.truststore,
            )
        )
        self._history.running(self._facts)
        log.info("job %s: control endpoint at %s", master.job_id, self.url)
        return self.url

    def _on_job_event(self, event: str, payload: Any) -> None:
        if event == "status" and payload.is_globally_terminal_state():
            # Listed with this driver's finished jobs and archived from now on (the job
            # master's thread, before the endpoint closes: its final figures are in).
            facts, stats = self._facts(), self._client.get_checkpoint_statistics()
            ended = {"exceptions": self._exceptions_body()}
            if stats is not None:
                ended["checkpoints"] = stats.to_dict()
            self._history.finished(facts, self._details(facts), ended)
        if event in ("status", "checkpoint", "restart"):
            self._live.poke()
        if event == "restart":
            now = int(time.time() * 1000)
            self._exceptions.append(graph_views.ExceptionFacts(now, str(payload)))
            del self._exceptions[:-_MAX_EXCEPTIONS]

    async def _serve(self) -> int:
        middlewares = [self._check_token, self._history.serve_ended]
        app = web.Application(middlewares=middlewares, client_max_size=1 << 20)
        jid = "/jobs/{jobid}"
        app.router.add_get("/", self._root)
        app.router.add_get("/web/{file}", self._static)
        app.router.add_get(jid + "/config", self._config)
        app.router.add_get(jid + "/exceptions", self._job_exceptions)
        app.router.add_get(jid + "/checkpoints/details/{checkpointid}", self._checkpoint_details)
        app.router.add_get("/jobs", self._jobs)
        app.router.add_get("/jobs/overview", self._overview)
        app.router.add_get(jid, self._job)
        app.router.add_patch(jid, self._cancel)
        app.router.add_get(jid + "/checkpoints", self._checkpoints)
        app.router.add_post(jid + "/savepoints", self._trigger_savepoint)
        app.router.add_get(jid + "/savepoints/{triggerid}", self._operation)
        app.router.add_post(jid + "/stop", self._stop)
        app.router.add_get("/metrics", self._prometheus)
        app.router.add_get(jid + "/metrics", self._job_metrics)
        app.router.add_get(jid + "/vertices/{vertexid}/metrics", self._vertex_metrics)
        app.router.add_get(
            jid + "/vertices/{vertexid}/subtasks/metrics", self._aggregated_subtask_metrics
        )
        app.router.add_get(jid + "/vertices/{vertexid}/backpressure", self._backpressure)
        app.router.add_get(jid + "/doctor", self._doctor)
        app.router.add_get(jid + "/events", self._events)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(
            runner,
            self._settings.bind_address,
            self._settings.port,
            ssl_context=server_ssl(self._master.settings.security),
        )
        await site.start()
        self._runner = runner
        return int(runner.addresses[0][1])

    def close(self) -> None:
        """Unregister now; wait (up to the linger time) until the outcome of a stop was
        fetched; stop serving after the linger time (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._registry.unregister(self._master.job_id)
        deadline = time.monotonic() + self._linger_s
        while self._operations.awaited and time.monotonic() < deadline:
            time.sleep(0.05)
        timer = threading.Timer(self._linger_s, self._shutdown)
        timer.daemon = True
        timer.start()

    def _shutdown(self) -> None:
        self._loop.call_soon_threadsafe(self._live.close)
        runner = self._runner
        if runner is not None:
            try:
                asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(timeout=10)
            except Exception:  # the process may be exiting; nothing is left to serve
                log.debug("control endpoint cleanup failed", exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)

    # ------------------------------------------------------------------ checks

    @web.middleware
    async def _check_token(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        public = request.method == "GET" and (
            request.path == "/" or request.path.removeprefix("/web/") in WEB_FILES
        )
        if self.token is not None and not public:
            given = request.headers.get(TOKEN_HEADER, "")
            expected = f"Bearer {self.token}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                return _error(
                    401,
                    "missing or wrong token: send 'Authorization: Bearer <token>' with the "
                    "job's token from the job registry (cairn's CLI does)",
                )
        try:
            return await handler(request)
        except web.HTTPException as e:  # unknown path or method: Flink-shaped body
            return _error(e.status, e.reason)

    def _other_job(self, request: web.Request) -> web.Response | None:
        jobid = request.match_info["jobid"]
        if jobid == self._master.job_id:
            return None
        return _error(
            404, f"Job {jobid} not found: this endpoint serves job {self._master.job_id} only"
        )

    # ------------------------------------------------------------------ views

    def _facts(self) -> views.JobFacts:
        m = self._master
        view = m.view  # one consistent snapshot
        status = view.status
        now_ms = int(time.time() * 1000)
        stoppable = status is JobStatus.RUNNING and m.settings.checkpoint.enabled and not view.ended
        end_ms = -1
        if status.is_terminal_state():  # end_ms is set a moment after the terminal status
            end_ms = view.end_ms if view.end_ms is not None else now_ms
        ha = m.leadership
        cpu = job_cpu(view.cpu_reports, view.metric_reports, m.plan.source_tasks)
        stages = view.stages

        def vertex_status(vertex: VertexId) -> str | None:
            if stages is None:  # STREAMING: every vertex runs while the job does
                return None
            inputs = [int(e.source_vertex) for e in m.graph.inputs_of(vertex)]
            return views.stage_status(status.name, stages.finished, int(vertex), inputs)

        return views.JobFacts(
            job_id=m.job_id,
            name=m.settings.job_name,
            state=views.shown_state(status.name, None if ha is None else ha.role),
            start_ms=view.start_ms,
            end_ms=end_ms,
            now_ms=now_ms,
            vertices=tuple(
                views.VertexFacts(
                    v.id, v.name, v.parallelism, v.max_parallelism, vertex_status(v.id)
                )
                for v in m.graph.vertices
            ),
            stoppable=stoppable,
            cpu=None if cpu is None else cpu.to_dict(),
        )

    async def _root(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/web/index.html")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["file"]
        if name not in WEB_FILES:
            return _error(404, f"no such file: /web/{name}")
        with open(os.path.join(_WEB_DIR, name), "rb") as f:
            body = f.read()
        headers = {
            "Content-Type": f"{WEB_FILES[name]}; charset=utf-8",
            "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data:",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        }
        return web.Response(body=body, headers=headers)

    async def _config(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        m = self._master
        return _json(
            graph_views.job_config(m.job_id, m.settings.job_name, m.settings.configuration)
        )

    async def _job_exceptions(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        return _json(self._exceptions_body())

    def _exceptions_body(self) -> dict[str, Any]:
        view = self._master.view
        error, end_ms = view.error, view.end_ms
        final = None
        if error is not None:
            final = graph_views.ExceptionFacts(end_ms or int(time.time() * 1000), str(error))
        return graph_views.exceptions(list(self._exceptions), final)

    async def _checkpoint_details(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        stats = self._client.get_checkpoint_statistics()
        raw = request.match_info["checkpointid"]
        found = stats.get(CheckpointId(int(raw))) if stats is not None and raw.isdigit() else None
        if found is None:
            return _error(404, f"checkpoint {raw} is not in the statistics' history")
        return _json(found.to_dict(details=True))

    def _plan(self) -> dict[str, Any]:
        m = self._master
        edges = [
            graph_views.EdgeFacts(e.source_vertex, e.target_vertex, e.partition.value)
            for v in m.graph.vertices
            for e in m.graph.outputs_of(v.id)
        ]
        vertices = [(v.id, v.name, v.parallelism) for v in m.graph.vertices]
        return graph_views.plan(m.job_id, m.settings.job_name, vertices, edges)

    async def _jobs(self, request: web.Request) -> web.Response:
        return _json(await self._history.jobs(self._facts()))

    async def _overview(self, request: web.Request) -> web.Response:
        """This job, this driver's others, other drivers' running ones, archived ones."""
        return _json(await self._history.overview(self._facts()))

    def _details(
        self, facts: views.JobFacts, metrics: prometheus.MetricsFacts | None = None
    ) -> dict[str, Any]:
        parallelism = {v.id: v.parallelism for v in facts.vertices}
        metrics = self._metrics_facts() if metrics is None else metrics
        io = metric_views.vertex_io_metrics(metrics, parallelism)
        details = {**views.job_details(facts, io), "plan": self._plan()}
        ha = self._master.leadership
        if ha is not None:
            leader = ha.holder if ha.role in ("leader", "released") else ha.leader
            details["leadership"] = views.leadership(ha.role, leader, ha.token)
        return details

    async def _job(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        facts = self._facts()
        if facts.end_ms >= 0:
            self._operations.end_seen()
        return _json(self._details(facts))

    # ------------------------------------------------------------------ live updates

    def _live_update(self) -> tuple[Update, bool]:
        facts = self._facts()
        metrics = self._metrics_facts()
        stats = self._client.get_checkpoint_statistics()
        pressure = {
            str(v.id): metric_views.backpressure(metrics, v.id, facts.now_ms)
            for v in facts.vertices
        }
        user = {
            str(v.id): metric_views.user_metric_aggregates(metrics, v.id) for v in facts.vertices
        }
        events = [
            ("job", self._details(facts, metrics)),
            ("checkpoints", stats.to_dict() if stats is not None else None),
            ("user-metrics", user),
            ("latency", metric_views.latency_overview(metrics)),
            ("backpressure", pressure),  # the last: the page renders on it
        ]
        return events, self._master.view.status.is_globally_terminal_state()

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Cairn's own path: the job's status, metrics and checkpoints as server-sent events
        (``rest/live.py``), for the web UI."""
        other = self._other_job(request)
        if other is not None:
            return other
        return await self._live.stream(request)

    async def _checkpoints(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        stats = self._client.get_checkpoint_statistics()
        if stats is None:
            return _error(404, f"job {self._master.job_id} has checkpointing disabled")
        return _json(stats.to_dict())

    # ------------------------------------------------------------------ metrics

    def _metrics_facts(self) -> prometheus.MetricsFacts:
        return prometheus.facts_of(self._master)

    async def _prometheus(self, request: web.Request) -> web.Response:
        body = prometheus.render(self._metrics_facts)
        return web.Response(body=body, headers={"Content-Type": prometheus.CONTENT_TYPE})

    async def _job_metrics(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        get = metric_views.requested(request.query.get("get"))
        return web.json_response(metric_views.job_metric_values(self._metrics_facts(), get))

    def _vertex(self, request: web.Request) -> VertexId | web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        raw = request.match_info["vertexid"]
        ids = {v.id for v in self._master.graph.vertices}
        if not raw.isdigit() or int(raw) not in ids:
            known = ", ".join(str(i) for i in sorted(ids))
            return _error(404, f"vertex {raw} not found in job {self._master.job_id} ({known})")
        return VertexId(int(raw))

    async def _vertex_metrics(self, request: web.Request) -> web.Response:
        vertex = self._vertex(request)
        if isinstance(vertex, web.Response):
            return vertex
        get = metric_views.requested(request.query.get("get"))
        facts = self._metrics_facts()
        return web.json_response(metric_views.vertex_metric_values(facts, vertex, get))

    async def _aggregated_subtask_metrics(self, request: web.Request) -> web.Response:
        vertex = self._vertex(request)
        if isinstance(vertex, web.Response):
            return vertex
        get = metric_views.requested(request.query.get("get"))
        agg = metric_views.requested(request.query.get("agg"))
        unknown = sorted(set(agg or ()) - set(metric_views.AGGREGATIONS))
        if unknown:
            allowed = ", ".join(metric_views.AGGREGATIONS)
            return _error(400, f"unknown aggregation(s) {', '.join(unknown)}: use {allowed}")
        facts = self._metrics_facts()
        body = metric_views.aggregated_subtask_metrics(facts, vertex, get, agg)
        return web.json_response(body)

    async def _backpressure(self, request: web.Request) -> web.Response:
        vertex = self._vertex(request)
        if isinstance(vertex, web.Response):
            return vertex
        now_ms = int(time.time() * 1000)
        return _json(metric_views.backpressure(self._metrics_facts(), vertex, now_ms))

    async def _doctor(self, request: web.Request) -> web.Response:
        """Cairn's own path: the doctor's findings on the live statistics."""
        other = self._other_job(request)
        if other is not None:
            return other
        facts = facts_of_master(self._master)
        findings = [f.to_dict() for f in diagnose(facts)]
        return _json({"checkpoints": len(facts.checkpoints), "findings": findings})

    # ------------------------------------------------------------------ commands

    async def _cancel(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        mode = request.query.get("mode", "cancel")
        if mode != "cancel":
            return _error(400, f"mode={mode!r} is not supported; use mode=cancel")
        status = self._master.view.status
        if status.is_globally_terminal_state():
            return _error(409, f"job {self._master.job_id} is {status.name}")
        log.info("job %s: cancel requested through the control endpoint", self._master.job_id)
        self._client.cancel()
        return _json({}, 202)

    async def _trigger_savepoint(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        try:
            asked = savepoint_request(await read_body(request))
        except BadRequest as e:
            return _error(400, str(e))
        future = self._client.trigger_savepoint(asked.target, asked.format_type)
        if asked.cancel_job:
            future.add_done_callback(self._cancel_after)
        return _json(views.trigger_accepted(self._operations.add(future)), 202)

    def _cancel_after(self, savepoint: Future[str]) -> None:
        if savepoint.exception() is None:
            self._client.cancel()

    async def _stop(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        try:
            asked = stop_request(await read_body(request))
        except BadRequest as e:
            return _error(400, str(e))
        stop = self._master.stop_with_savepoint(asked.target, asked.format_type, drain=asked.drain)
        trigger_id = self._operations.add(stop.savepoint, stop=True)
        return _json(views.trigger_accepted(trigger_id), 202)

    async def _operation(self, request: web.Request) -> web.Response:
        other = self._other_job(request)
        if other is not None:
            return other
        trigger_id = request.match_info["triggerid"]
        future = self._operations.get(trigger_id)
        if future is None:
            return _error(404, f"no savepoint or stop operation {trigger_id} for this job")
        if not future.done():
            return _json(views.operation_status(False))
        self._operations.fetched(trigger_id)
        error = future.exception()
        if error is not None:
            return _json(views.operation_status(True, failure=error))
        return _json(views.operation_status(True, future.result()))
