"""The driver's side of a BATCH job: stage tasks from the plan, failures with the user's
traceback, and the restart loop shared by both runners.

Invariant: a failure inside a partition reaches the driver as a ``BatchTaskError`` whose
text carries the stage, the partition and the user's formatted traceback, whether it
crossed a Spark task boundary (as text) or not; restarts follow the job's restart strategy
(``restart-strategy.*``), one budget per job, and rerun only what had not completed.
"""

from __future__ import annotations

import logging
import re
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from cairn.batch.exchange import Out, SortedBlock
from cairn.batch.plan import BatchPlan, StageInput
from cairn.batch.stage import PartitionCounts, StageTask, run_partition
from cairn.common.exceptions import JobExecutionException
from cairn.deploy.restart_policy import RestartPolicy
from cairn.graph.job_graph import JobEdge, JobGraph
from cairn.ids import JobId, VertexId
from cairn.settings import RestartSettings

__all__ = [
    "BatchTaskError",
    "Restarts",
    "guarded_partition",
    "job_failure",
    "stage_tasks",
]

log = logging.getLogger(__name__)

_END = "--- end of remote traceback ---"
_FAILURE = re.compile(r"stage '.*?' \(\d+/\d+\) failed with .*?" + re.escape(_END), re.DOTALL)

T = TypeVar("T")


class BatchTaskError(Exception):
    """A partition of a stage failed; ``str()`` carries the user's traceback."""


def stage_tasks(
    plan: BatchPlan, graph: JobGraph, job_id: JobId, job_parameters: dict[str, str]
) -> dict[VertexId, StageTask]:
    """Each stage's task: its vertex and, per output edge, how the consumer reads it."""

    def consumer_input(edge: JobEdge) -> StageInput:
        consumer = plan.stage(edge.target_vertex)
        return next(i for i in consumer.inputs if i.edge == edge)

    tasks = {}
    for stage in plan.stages:
        outputs = stage.outputs
        tasks[stage.vertex] = StageTask(
            stage=stage,
            vertex=graph.vertex(stage.vertex),
            consumer_inputs={i: consumer_input(e) for i, e in enumerate(outputs)},
            consumer_parallelism={
                i: plan.stage(e.target_vertex).parallelism for i, e in enumerate(outputs)
            },
            job_id=job_id,
            job_parameters=dict(job_parameters),
        )
    return tasks


def guarded_partition(
    task: StageTask,
    partition: int,
    blocks: Iterable[SortedBlock] | None,
    attempt: int,
    counts: PartitionCounts | None = None,
) -> Iterator[Out]:
    """``run_partition`` whose failure is a ``BatchTaskError`` naming the stage and the
    partition, with the user's traceback in its text (it may cross a process boundary)."""
    stage = task.stage
    try:
        yield from run_partition(task, partition, blocks, attempt, counts)
    except Exception as exc:
        formatted = getattr(exc, "formatted_traceback", None) or "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)
        )
        raise BatchTaskError(
            f"stage '{stage.name}' ({partition + 1}/{stage.parallelism}) failed with "
            f"{type(exc).__name__}: {exc}\n--- remote traceback ---\n{formatted}{_END}"
        ) from exc


def job_failure(job_name: str, job_id: JobId, error: BaseException) -> JobExecutionException:
    """The error ``execute()`` raises: the failed stage and the user's traceback, found
    in the error's text also when Spark wrapped it."""
    text = str(error)
    found = _FAILURE.search(text)
    detail = found.group(0) if found else f"{type(error).__name__}: {text}"
    failure = JobExecutionException(f"BATCH job {job_name!r} failed: {detail}", job_id)
    failure.__cause__ = error
    return failure


class Restarts:
    """Runs attempts under the job's restart strategy (``restart-strategy.*``), one budget
    for the whole job; ``attempt`` numbers the attempts, ``restarts`` counts the reruns;
    ``on_restart(attempt, reason)`` hears of each rerun before it starts.

    >>> from cairn.settings import RestartKind
    >>> restarts = Restarts(RestartSettings(RestartKind.FIXED_DELAY, attempts=2, delay_ms=0))
    >>> tries = []
    >>> def flaky(n):
    ...     tries.append(n)
    ...     if n < 2:
    ...         raise OSError("lost a disk")
    ...     return "done"
    >>> restarts.run(flaky), tries, restarts.restarts
    ('done', [0, 1, 2], 2)
    """

    def __init__(
        self,
        restart: RestartSettings,
        cancelled: Callable[[], bool] = lambda: False,
        on_restart: Callable[[int, str], None] | None = None,
    ) -> None:
        self._policy = RestartPolicy(restart)
        self._cancelled = cancelled
        self._on_restart = on_restart
        self.attempt = 0
        self.restarts = 0

    def run(self, attempt: Callable[[int], T]) -> T:
        """``attempt(n)`` until it returns or the strategy gives up (the last error raised)."""
        while True:
            try:
                return attempt(self.attempt)
            except Exception as exc:
                if self._cancelled():
                    raise
                decision = self._policy.on_failure(int(time.time() * 1000))
                if not decision.restart:
                    raise
                log.warning("BATCH attempt %d failed (%s); %s", self.attempt, exc, decision.reason)
                time.sleep(decision.delay_ms / 1000)
                self.attempt += 1
                self.restarts += 1
                if self._on_restart is not None:  # (the attempt now running, why)
                    self._on_restart(self.attempt, f"{exc}; {decision.reason}")
