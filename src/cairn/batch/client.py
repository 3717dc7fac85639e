"""Submitting a BATCH job and its client (the part of PyFlink's ``JobClient`` a batch job has).

Invariant: everything that can be rejected (an unbounded source) is rejected before any
stage runs; the job runs on its own thread, and ``execute_and_collect`` results are handed
out only once the job finished (a batch result is complete or absent, never partial).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from cairn.batch.local import run_in_process
from cairn.batch.monitor import NO_SAVEPOINTS, BatchMonitor
from cairn.batch.plan import BatchPlan, plan_batch
from cairn.batch.tasks import Restarts, job_failure, stage_tasks
from cairn.common.exceptions import JobExecutionException
from cairn.common.job_execution_result import JobExecutionResult
from cairn.common.job_status import JobStatus
from cairn.events import SavepointFormatType
from cairn.graph.job_graph import build_job_graph
from cairn.graph.transformations import SinkTransformation
from cairn.ids import JobId
from cairn.settings import ExecutorKind, JobSettings

__all__ = ["BatchJobClient", "submit_batch_job"]

log = logging.getLogger(__name__)


class BatchJobClient:
    """The client of a BATCH job: status, result, cancel, collected records.

    A ``JobClient`` (``cairn.common.job_client``) without a job master (a BATCH job has
    none): checkpoints and savepoints do not exist in BATCH mode, so ``trigger_savepoint``
    and ``stop_with_savepoint`` raise and ``get_checkpoint_statistics`` returns ``None``.
    """

    def __init__(
        self,
        job_id: JobId,
        job_name: str,
        plan: BatchPlan,
        run: Callable[[], Any],
        monitor: BatchMonitor,
    ) -> None:
        self._job_id = job_id
        self._job_name = job_name
        self.plan = plan
        self._job = run
        self._monitor = monitor
        self._error: JobExecutionException | None = None
        self._collected: dict[int, list[Any]] = {}
        self._cancel_hooks: list[Callable[[], None]] = []
        self.cancel_requested = False
        self.restarts = 0
        self._start_ms = int(time.time() * 1000)
        self._end_ms: int | None = None
        self._thread = threading.Thread(
            target=self._main, name=f"cairn-batch-{job_id}", daemon=True
        )

    def start(self) -> None:
        """Run the job on its own thread (once)."""
        self._monitor.set_status(JobStatus.RUNNING)
        self._thread.start()

    def _main(self) -> None:
        try:
            self._collected = self._job() or {}
            status, error = JobStatus.FINISHED, None
        except BaseException as exc:
            if self.cancel_requested:
                status = JobStatus.CANCELED
                self._error = JobExecutionException(
                    f"BATCH job {self._job_name!r} was cancelled", self._job_id
                )
            else:
                status = JobStatus.FAILED
                self._error = job_failure(self._job_name, self._job_id, exc)
            log.error("%s", self._error)
            error = self._error
        self._end_ms = int(time.time() * 1000)
        self._monitor.set_status(status, error)

    def on_cancel(self, hook: Callable[[], None]) -> None:
        self._cancel_hooks.append(hook)

    def get_job_id(self) -> JobId:
        return self._job_id

    def get_job_status(self) -> JobStatus:
        return self._monitor.view.status

    def cancel(self) -> None:
        """Stop the job (Spark cancels its running tasks)."""
        if self.get_job_status().is_globally_terminal_state():
            return
        self.cancel_requested = True
        for hook in self._cancel_hooks:
            hook()

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        """Wait for the job to end; raise ``JobExecutionException`` if it failed."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job {self._job_id} still running after {timeout} s")
        if self._error is not None:
            raise self._error
        runtime = (self._end_ms or int(time.time() * 1000)) - self._start_ms
        return JobExecutionResult(self._job_id, runtime, {}, self._job_name)

    def collect_iterator(self, transformation_id: int) -> Iterator[Any]:
        """The records of the collect sink ``transformation_id``, once the job finished."""
        self.get_job_execution_result()
        yield from self._collected.get(transformation_id, [])

    def wait_for_status(self, status: JobStatus, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.get_job_status() is status:
                return True
            time.sleep(0.02)
        return False

    def get_checkpoint_statistics(self) -> None:
        return None

    def trigger_savepoint(
        self,
        savepoint_directory: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        raise RuntimeError(NO_SAVEPOINTS)

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        return self.trigger_savepoint()

    @property
    def job_master(self) -> BatchMonitor:
        """What observers read of the job (a BATCH job has no job master: its stages run
        as Spark stages); the same port as a STREAMING job's ``JobMaster``."""
        return self._monitor

    def worker_pids(self) -> dict[int, int]:
        return {}


def submit_batch_job(settings: JobSettings, sinks: Sequence[SinkTransformation]) -> BatchJobClient:
    """Plan the job (rejecting an unbounded source here); the caller starts the client
    (``start()``, the job on its own thread) once its observers listen."""
    graph = build_job_graph(
        settings.job_name,
        sinks,
        settings.parallelism,
        settings.max_parallelism,
        settings.operator_chaining,
    )
    plan = plan_batch(graph)
    job_id = JobId(uuid.uuid4().hex)
    tasks = stage_tasks(plan, graph, job_id, dict(settings.job_parameters))
    log.info("submitting BATCH job %r (%s):\n%s", settings.job_name, job_id, plan.describe())
    monitor = BatchMonitor(
        job_id,
        settings,
        graph,
        {int(s.vertex): s.parallelism for s in plan.stages},
        tuple(int(s.vertex) for s in plan.stages if s.is_source),
    )
    client: BatchJobClient
    restarts = Restarts(settings.restart, lambda: client.cancel_requested, monitor.restarted)

    if settings.deploy.executor is ExecutorKind.INPROCESS:

        def run() -> dict[int, list[Any]]:
            try:
                return run_in_process(
                    plan,
                    tasks,
                    restarts.run,
                    lambda: client.cancel_requested,
                    monitor.partition_counts,
                )
            finally:
                client.restarts = restarts.restarts

    else:
        from cairn.batch.spark import SparkBatchJob
        from cairn.deploy.spark_session import get_or_create_spark

        deploy = settings.deploy
        widest = max(s.parallelism for s in plan.stages)
        spark = get_or_create_spark(deploy.spark_master, widest, dict(deploy.spark_conf))

        def run() -> dict[int, list[Any]]:
            job = SparkBatchJob(spark, plan, tasks, f"cairn-batch-{job_id}")
            client.on_cancel(job.cancel)
            try:
                collected, printed = restarts.run(
                    lambda attempt: job.run(attempt, monitor.partition_counts)
                )
            finally:
                client.restarts = restarts.restarts
                job.release()
            for text in printed:
                sys.stdout.write(text)
            sys.stdout.flush()
            return collected

    client = BatchJobClient(job_id, settings.job_name, plan, run, monitor)
    return client
