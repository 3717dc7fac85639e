"""Executors: where a job attempt's workers run.

Invariant: an executor starts all workers of an attempt together (Spark barrier mode: one
stage, all tasks at once) and reports — never hides — a worker that died; restarting is the
job master's decision, never the executor's (a barrier result stage is not retried by Spark).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
import uuid
from typing import Any, Protocol

from cairn.deploy.control_messages import WorkerLaunch
from cairn.deploy.process_tuning import ProcessOwnership
from cairn.deploy.worker import run_worker
from cairn.runtime.faults import SimulatedCrash

log = logging.getLogger(__name__)

SLOT_WAIT_S = 60.0  # how long a launch waits for lost executors to be replaced


class Deployment(Protocol):
    """One attempt's workers, as the executor started them."""

    def failure(self) -> BaseException | None:
        """The error that ended a worker, if one did (polled by the job master)."""
        ...

    def cancel(self) -> None:
        """Stop the workers that are still running (best effort; they also stop when the job
        master shuts them down or disconnects them)."""
        ...

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for every worker to end; whether they all did."""
        ...


class Executor(Protocol):
    """The seam between the job master and where workers run (Spark, threads, a test fake).

    The workers of a launch connect back to the job master at ``launch.master_address``
    and speak ``deploy.control_messages``; the executor only starts them and reports their death.
    """

    @property
    def control_host(self) -> str:
        """The address the job master's control endpoint listens on (workers reach it)."""
        ...

    def slots(self) -> int:
        """How many workers can run at once."""
        ...

    def launch(self, launch: WorkerLaunch) -> Deployment:
        """Start all ``launch.num_workers`` workers of one attempt together."""
        ...


class WorkerCrashed(Exception):
    pass


# --------------------------------------------------------------------------- in-process


class _ThreadDeployment:
    def __init__(self, launch: WorkerLaunch) -> None:
        self._error: BaseException | None = None
        self._threads = [
            threading.Thread(
                target=self._run,
                args=(launch, i),
                daemon=True,
                name=f"cairn-worker-{launch.attempt}-{i}",
            )
            for i in range(launch.num_workers)
        ]
        for t in self._threads:
            t.start()

    def _run(self, launch: WorkerLaunch, index: int) -> None:
        try:
            run_worker(launch, index, "127.0.0.1", ProcessOwnership.SHARED)
        except SimulatedCrash as exc:
            self._error = WorkerCrashed(f"worker {index} crashed: {exc}")
        except BaseException as exc:
            log.exception("worker %d died", index)
            self._error = exc

    def failure(self) -> BaseException | None:
        return self._error

    def cancel(self) -> None:
        pass  # workers stop on Shutdown or when the job master disconnects them

    def wait(self, timeout: float) -> bool:
        for t in self._threads:
            t.join(timeout)
        return not any(t.is_alive() for t in self._threads)


class InProcessExecutor:
    """Workers are threads of this process: for unit tests and debugging."""

    control_host = "127.0.0.1"

    def __init__(self, workers: int | None = None) -> None:
        self._workers = workers

    def slots(self) -> int:
        return self._workers or 1 << 16

    def launch(self, launch: WorkerLaunch) -> _ThreadDeployment:
        return _ThreadDeployment(launch)


# --------------------------------------------------------------------------- Spark


def _spark_worker_partition(launch: WorkerLaunch) -> Any:
    def run(_iterator: Any) -> Any:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()
        address = ctx.getTaskInfos()[index].address
        host = address.rsplit(":", 1)[0] if address else "127.0.0.1"
        result = run_worker(launch, index, host, ProcessOwnership.OWNED)
        yield (index, result.outcome.value)

    return run


# How long a deployment waits for the tasks of its ended Spark job to stop (see
# _SparkDeployment._await_tasks_ended); a Cairn worker stops within about 10 s of losing
# its job master (network liveness), so this is a cap, not an expected wait.
TASK_DRAIN_S = 30.0


class _SparkDeployment:
    def __init__(self, spark: Any, launch: WorkerLaunch) -> None:
        self._sc = spark.sparkContext
        self._group = f"cairn-{launch.job_id}-{launch.attempt}-{uuid.uuid4().hex[:6]}"
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._cancelled = False
        self._thread = threading.Thread(
            target=self._run,
            args=(launch,),
            daemon=True,
            name=f"cairn-spark-stage-{launch.attempt}",
        )
        self._thread.start()

    def _run(self, launch: WorkerLaunch) -> None:
        sc = self._sc
        try:
            sc.setJobGroup(
                self._group,
                f"Cairn job {launch.job_id} attempt {launch.attempt}",
                interruptOnCancel=True,
            )
            n = launch.num_workers
            rdd = (
                sc.parallelize(range(n), n).barrier().mapPartitions(_spark_worker_partition(launch))
            )
            rdd.collect()
        except BaseException as exc:
            if not self._cancelled:
                self._error = WorkerCrashed(f"Spark stage failed: {_short(exc)}")
        finally:
            try:
                self._await_tasks_ended(TASK_DRAIN_S)
            finally:
                self._done.set()

    def _await_tasks_ended(self, timeout_s: float) -> None:
        """Return once no task of this deployment's Spark jobs runs (or after ``timeout_s``).

        A failed or cancelled job ends for ``collect`` at once, while its other tasks are
        only marked killed (a barrier stage's failure does not interrupt them): their Python
        workers run on until they notice. A next attempt launched meanwhile would meet
        them -- measured in CI: a Kafka sink's producer of the old attempt, still starting,
        fenced the new attempt's producer of the same transactional id. So a deployment is
        done only when Spark counts no active task of its job group. A SparkContext stopped
        meanwhile (the job's process ending) runs no task any more.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                active = self._active_tasks()
            except Exception:  # py4j: the context (or its JVM) is gone
                log.debug("no Spark status for %s: its context stopped", self._group)
                return
            if active == 0:
                return
            if time.monotonic() >= deadline:
                log.warning(
                    "%d task(s) of %s still run %.0f s after their Spark job ended",
                    active,
                    self._group,
                    timeout_s,
                )
                return
            time.sleep(0.02)

    def _active_tasks(self) -> int:
        tracker = self._sc.statusTracker()
        active = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                active += stage.numActiveTasks if stage is not None else 0
        return active

    def failure(self) -> BaseException | None:
        return self._error

    def cancel(self) -> None:
        self._cancelled = True
        try:
            self._sc.cancelJobGroup(self._group)
        except Exception:
            log.debug("cancelJobGroup failed", exc_info=True)

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)


# The last line of a Python traceback: "package.module.Error: message" (no JVM class).
_PYTHON_ERROR = re.compile(r"^(?!org\.|java\.|scala\.)[A-Za-z_][\w.]*: \S")


def _short(exc: BaseException) -> str:
    """What made a Spark stage fail, in one line: the Python worker's own exception when
    the text carries its traceback (Spark's first line only says a barrier task failed)."""
    text = str(exc)
    python = [line for line in text.splitlines() if _PYTHON_ERROR.match(line)]
    if python:
        return python[-1].strip()[:500]
    for line in text.splitlines():
        if "Exception" in line or "Error" in line:
            return line.strip()[:500]
    return text[:500]


class SparkExecutor:
    """Workers are long-running tasks of a Spark barrier stage."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        conf = spark.sparkContext.getConf()
        self.control_host = conf.get("spark.driver.host", "127.0.0.1")

    def slots(self) -> int:
        from cairn.deploy.spark_session import available_slots

        return int(available_slots(self.spark))

    def launch(self, launch: WorkerLaunch) -> _SparkDeployment:
        self.await_slots(launch.num_workers, SLOT_WAIT_S)
        # Local mode: Spark copies a worker's stdout to its JVM's stderr; forward it to ours.
        local = str(self.spark.sparkContext.master).startswith("local")
        return _SparkDeployment(self.spark, dataclasses.replace(launch, forward_output=local))

    def await_slots(self, wanted: int, timeout: float) -> int:
        """Wait up to ``timeout`` s for ``wanted`` task slots; return the slots offered.

        Spark re-checks a barrier stage that does not fit only every 15 s
        (``spark.scheduler.barrier.maxConcurrentTasksCheck.interval``), while a cluster
        manager registers new executors, or replaces a lost one, within a few seconds.
        """
        deadline = time.monotonic() + timeout
        slots = self.slots()
        while slots < wanted and time.monotonic() < deadline:
            time.sleep(0.2)
            slots = self.slots()
        if slots < wanted:
            log.warning(
                "Spark offers %d task slots after %.0f s; %d wanted", slots, timeout, wanted
            )
        return slots
