"""The composition root: a prepared job → plan → executor → job master thread → client.

Invariant: everything that can be rejected is rejected here, before any worker starts: the
plan is translated and serialized on the driver, so a bad job never reaches Spark. This is
the one module that sees every layer (deploy and observability); the API reaches it only
through deferred or type-only imports (the layers contract's one declared exception).
"""

from __future__ import annotations

import logging
import secrets
import weakref
from collections.abc import Sequence
from typing import Any

from cairn.checkpoint.job_identity import identity_of
from cairn.checkpoint.storage import default_storage_url
from cairn.checkpoint.storage_access import check_storage_access
from cairn.common.exceptions import JobSubmissionError
from cairn.common.job_client import JobClient
from cairn.deploy.executors import Executor, InProcessExecutor, SparkExecutor
from cairn.deploy.high_availability import leadership_for
from cairn.deploy.job_master import JobMaster
from cairn.deploy.job_master_client import StreamingJobClient
from cairn.deploy.job_master_ports import ObservedJob, ServedClient
from cairn.deploy.job_pickling import dumps_job
from cairn.deploy.job_runs import RunPlan, plan_run
from cairn.graph.job_graph import JobGraph, build_job_graph
from cairn.graph.transformations import SinkTransformation
from cairn.runtime.faults import parse_faults
from cairn.settings import ExecutorKind, JobSettings

__all__ = ["JobClient", "running_jobs", "submit_job"]

# Clients of the jobs this process submitted; a job leaves when its master ended.
_submitted: weakref.WeakSet[StreamingJobClient] = weakref.WeakSet()


def running_jobs() -> list[StreamingJobClient]:
    """The clients of this process's jobs that have not ended, oldest first (e.g. for what
    the CLI prints on Ctrl-C)."""
    alive = [c for c in _submitted if not c.job_master.view.ended]
    return sorted(alive, key=lambda c: c.job_master.view.start_ms)


log = logging.getLogger(__name__)

REGISTRATION_WAIT_S = 30.0  # for the executors of a new cluster session to register


def choose_executor(settings: JobSettings, graph: JobGraph) -> tuple[Executor, int]:
    """The executor of ``settings.deploy`` and how many workers it runs: ``cairn.workers``
    (default: the widest operator's parallelism), never more than the widest operator
    needs, nor more than the task slots Spark offers."""
    deploy = settings.deploy
    max_parallelism = max(v.parallelism for v in graph.vertices)
    wanted = deploy.workers if deploy.workers is not None else max_parallelism
    if deploy.executor is ExecutorKind.INPROCESS:
        return InProcessExecutor(wanted), max(1, min(wanted, max_parallelism))
    from cairn.deploy.spark_session import get_or_create_spark

    spark = get_or_create_spark(deploy.spark_master, max_parallelism, dict(deploy.spark_conf))
    executor = SparkExecutor(spark)
    slots = executor.slots()
    if slots < wanted and not (spark.sparkContext.master or "").startswith("local"):
        # A cluster session that has just started has no executors registered yet.
        slots = executor.await_slots(min(wanted, max_parallelism), REGISTRATION_WAIT_S)
    workers = max(1, min(wanted, max_parallelism, slots))
    if workers < wanted:
        log.warning(
            "Spark offers %d task slots; running %d workers for parallelism %d",
            slots,
            workers,
            max_parallelism,
        )
    return executor, workers


def _serve_control_endpoint(client: ServedClient, settings: JobSettings) -> None:
    """Start the job's control endpoint and register it; it closes when the job ends."""
    from cairn.rest.endpoint import RestEndpoint

    endpoint = RestEndpoint(client, settings.rest)
    try:
        endpoint.start()
    except OSError as e:
        rest = settings.rest
        raise JobSubmissionError(
            f"cannot serve the job's control endpoint on {rest.bind_address}:{rest.port} "
            f"(rest.bind-address, rest.port): {e}"
        ) from e

    def on_event(event: str, payload: Any) -> None:
        if event == "status" and payload.is_globally_terminal_state():
            endpoint.close()

    client.job_master.listeners.append(on_event)


def _serve_prometheus(master: ObservedJob, settings: JobSettings) -> None:
    """Start the Prometheus reporter (``metrics.reporters: prom``); it stops when the job ends."""
    from cairn.observability.prometheus import PrometheusReporter, facts_of

    m = settings.metrics
    reporter = PrometheusReporter(lambda: facts_of(master), m.host, m.port)
    try:
        reporter.start()
    except OSError as e:
        raise JobSubmissionError(
            f"cannot serve Prometheus metrics on {m.host}:{m.port} "
            f"(metrics.reporter.prom.host, metrics.reporter.prom.port): {e}"
        ) from e

    def on_event(event: str, payload: Any) -> None:
        if event == "status" and payload.is_globally_terminal_state():
            reporter.close()

    master.listeners.append(on_event)


def _observe(client: ServedClient, settings: JobSettings) -> None:
    """Attach the job's observers, as configured: the Prometheus reporter, the control
    endpoint (with the web UI and the job's entry in ``cairn list``), the progress line."""
    master = client.job_master
    if settings.metrics.prometheus:
        _serve_prometheus(master, settings)
    if settings.rest.enabled:
        _serve_control_endpoint(client, settings)
    if settings.deploy.progress:
        from cairn.observability.progress import ProgressReporter

        ProgressReporter(master).start()


def submit_job(settings: JobSettings, sinks: Sequence[SinkTransformation]) -> JobClient:
    if settings.batch:
        from cairn.batch.client import submit_batch_job

        batch = submit_batch_job(settings, sinks)
        _observe(batch, settings)  # a BATCH job is observed as a STREAMING one
        batch.start()
        return batch
    graph = build_job_graph(
        settings.job_name,
        sinks,
        settings.parallelism,
        settings.max_parallelism,
        settings.operator_chaining,
    )
    if settings.checkpoint.enabled:
        # Before Spark starts: a missing bucket or wrong key is a submission error.
        check_storage_access(settings.checkpoint.storage_url, settings.checkpoint.storage_options)
    storage_url = settings.checkpoint.storage_url or default_storage_url()
    identity = identity_of(settings.cluster_id, settings.job_name, storage_url)
    # Before Spark starts: unusable HA storage is a submission error. A standby starts
    # Spark too, so that it takes over without that delay.
    leadership = leadership_for(settings, identity.job_id)
    running_here = {c.job_master.job_id for c in running_jobs()}
    # Before Spark starts: a run refused (its earlier run's driver still runs) costs nothing.
    # Under high availability the run is planned once this driver leads: a standby must not
    # touch the job directory its leader works in.
    run = plan_run(settings, running_here) if leadership is None else RunPlan(identity.job_id)
    payload = dumps_job((settings, graph))
    executor, workers = choose_executor(settings, graph)
    faults: tuple[Any, ...] = parse_faults(settings.deploy.testing_faults)
    master = JobMaster(
        job_id=run.job_id,
        settings=settings,
        graph=graph,
        job_payload=payload,
        executor=executor,
        num_workers=workers,
        secret=secrets.token_bytes(32),
        faults=faults,
        resume_from=run.resume_from,
        first_attempt=run.first_attempt,
        leadership=leadership,
    )

    def start_run(run: RunPlan) -> None:
        master.adopt_run(
            run.resume_from, run.first_attempt, run.first_checkpoint_id, run.inherited_from
        )
        storage_options = settings.checkpoint.storage_options
        run.started(storage_options)
        master.listeners.append(run.on_event(storage_options))

    if leadership is None:
        start_run(run)
    else:
        master.on_leading = lambda: start_run(plan_run(settings, running_here, leading=True))
    log.info(
        "submitting job %r (%s) with %d workers:\n%s",
        settings.job_name,
        master.job_id,
        workers,
        graph.describe(),
    )
    client = StreamingJobClient(master)
    _observe(client, settings)
    client.start()
    _submitted.add(client)
    return client
