"""What a job costs: the cores its workers use and the CPU time per record its sources read.

Invariant: pure functions of the workers' cumulative CPU readings (``deploy/worker_cpu.py``)
and the subtasks' cumulative counters, each the latest report and the one before (as the
job master keeps them); nothing here reads a clock or the job. A worker's CPU reading and its
tasks' counters travel in one report, so "the last interval" is the same window for both.

- ``cores``: CPU seconds per wall second, summed over the workers, over each worker's last
  reporting interval (about a second); ``cores_since_start``: the same since the workers
  of the current attempt started.
- CPU per record: the workers' CPU time divided by the records the sources read (the source
  subtasks' ``numRecordsIn``, Flink's count of a source's records), so every record that
  enters the job counts once whatever the chains after the sources filter or fan out; in
  microseconds, ``None`` when the sources read nothing in the window.
- ``scope``: what was measured, ``process`` (Spark workers: each worker's whole process) or
  ``task-thread`` (in-process workers: their task threads only, a lower bound); ``mixed``
  never happens within one attempt but is said rather than hidden.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.messages import TaskKey
from cairn.deploy.worker_cpu import WorkerCpu
from cairn.observability.metrics import subtask_metrics
from cairn.runtime.reports import TaskMetrics

__all__ = ["CPU_METRICS", "JobCpu", "cpu_metric_values", "job_cpu", "worker_cores"]

# The job-level ids of /jobs/:jobid/metrics and cairn_jobmanager_job_<id> (Cairn's own).
CPU_METRICS = ("cpuCores", "cpuTime", "cpuTimePerRecordUs")


@dataclass(frozen=True)
class JobCpu:
    """A job's CPU figures at one moment (see the module's docstring); ``cpu_time_s`` and
    ``source_records`` are totals since the current attempt's workers started."""

    cores: float
    cores_since_start: float
    cpu_time_s: float
    source_records: int
    source_rate: float
    us_per_record: float | None
    us_per_record_since_start: float | None
    scope: str
    workers: int

    def to_dict(self) -> dict[str, Any]:
        """The ``cpu`` block of ``/jobs/:jobid`` and ``/jobs/overview`` rows (Cairn's own).

        >>> cpu = job_cpu(({}, {0: WorkerCpu(2.0, 4.0)}), ({}, {}), ())
        >>> cpu.to_dict()["cores"], cpu.to_dict()["cpu-time"], cpu.to_dict()["cpu-per-record-us"]
        (0.5, 2000, None)
        """
        return {
            "cores": round(self.cores, 3),
            "cores-since-start": round(self.cores_since_start, 3),
            "cpu-time": round(self.cpu_time_s * 1000),
            "source-records": self.source_records,
            "source-records-per-second": round(self.source_rate, 1),
            "cpu-per-record-us": _rounded(self.us_per_record),
            "cpu-per-record-us-since-start": _rounded(self.us_per_record_since_start),
            "measured": self.scope,
            "workers": self.workers,
        }


def _rounded(us: float | None) -> float | None:
    return None if us is None else round(us, 2)


def worker_cores(current: WorkerCpu, previous: WorkerCpu | None = None) -> float:
    """A worker's CPU seconds per wall second between two readings (``None``, or a reading
    of an earlier worker: since it started).

    >>> worker_cores(WorkerCpu(3.0, 4.0), WorkerCpu(1.5, 2.0))
    0.75
    >>> worker_cores(WorkerCpu(1.0, 4.0)), worker_cores(WorkerCpu(0.0, 0.0))
    (0.25, 0.0)
    """
    if previous is None or previous.elapsed_s >= current.elapsed_s:
        previous = WorkerCpu(0.0, 0.0, current.scope)
    window = current.elapsed_s - previous.elapsed_s
    return max(current.cpu_s - previous.cpu_s, 0.0) / window if window > 0 else 0.0


def job_cpu(
    cpu: tuple[Mapping[int, WorkerCpu], Mapping[int, WorkerCpu]],
    tasks: tuple[Mapping[TaskKey, TaskMetrics], Mapping[TaskKey, TaskMetrics]],
    sources: Collection[TaskKey],
) -> JobCpu | None:
    """The job's CPU figures from each worker's (previous, latest) CPU reading and each
    subtask's (previous, latest) counters; ``sources``: the source subtasks. ``None`` until
    a worker reported its CPU time.

    Two workers, a second apart: 0.5 + 1.0 cores while the sources read 5000 records/s.

    >>> from cairn.ids import SubtaskIndex, VertexId
    >>> src = TaskKey(VertexId(0), SubtaskIndex(0))
    >>> before = {0: WorkerCpu(1.0, 2.0), 1: WorkerCpu(2.0, 2.0)}
    >>> now = {0: WorkerCpu(1.5, 3.0), 1: WorkerCpu(3.0, 3.0)}
    >>> counts = ({src: TaskMetrics(10_000, 0, elapsed_ms=2000.0)},
    ...           {src: TaskMetrics(15_000, 0, elapsed_ms=3000.0)})
    >>> c = job_cpu((before, now), counts, [src])
    >>> c.cores, c.source_rate, c.us_per_record, c.us_per_record_since_start
    (1.5, 5000.0, 300.0, 300.0)
    >>> job_cpu(({}, {}), counts, [src]) is None
    True
    """
    previous, current = cpu
    if not current:
        return None
    cores = sum(worker_cores(c, previous.get(i)) for i, c in current.items())
    since_start = sum(worker_cores(c) for c in current.values())
    cpu_time_s = sum(c.cpu_s for c in current.values())
    before, latest = tasks
    source_keys = [k for k in sources if k in latest]
    records = sum(latest[k].records_in for k in source_keys)
    rate = sum(subtask_metrics(latest[k], before.get(k)).numRecordsInPerSecond for k in source_keys)
    scopes = {c.scope for c in current.values()}
    return JobCpu(
        cores=cores,
        cores_since_start=since_start,
        cpu_time_s=cpu_time_s,
        source_records=records,
        source_rate=rate,
        us_per_record=cores / rate * 1e6 if rate > 0 else None,
        us_per_record_since_start=cpu_time_s / records * 1e6 if records > 0 else None,
        scope=scopes.pop() if len(scopes) == 1 else "mixed",
        workers=len(current),
    )


def cpu_metric_values(cpu: JobCpu | None) -> dict[str, float]:
    """The job-level ids of :data:`CPU_METRICS` that have a value: ``cpuCores`` (last
    interval), ``cpuTime`` (ms since start), ``cpuTimePerRecordUs`` (last interval; left out
    while the sources read nothing).

    >>> cpu_metric_values(job_cpu(({}, {0: WorkerCpu(2.0, 4.0)}), ({}, {}), ()))
    {'cpuCores': 0.5, 'cpuTime': 2000.0}
    >>> cpu_metric_values(None)
    {}
    """
    if cpu is None:
        return {}
    values = {"cpuCores": cpu.cores, "cpuTime": cpu.cpu_time_s * 1000.0}
    if cpu.us_per_record is not None:
        values["cpuTimePerRecordUs"] = cpu.us_per_record
    return values
