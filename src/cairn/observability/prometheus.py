"""A job's metrics in Prometheus text format (``prometheus_client``), named as Flink's
Prometheus reporter names them with ``cairn`` for ``flink``:
``cairn_taskmanager_job_task_<metric>{job_id, job_name, task_name, subtask_index}``,
``cairn_jobmanager_job_<metric>{job_id, job_name}``, and the metrics user functions register
as ``cairn_taskmanager_job_task_operator_<name>{..., operator_name}`` (the name's dots and
other characters Prometheus refuses become ``_``). Latency histograms are summaries named by
their scope, as Flink's reporter names them:
``cairn_taskmanager_job_latency_source_id_operator_id_operator_subtask_index_latency{job_id,
job_name, source_id, operator_id, operator_subtask_index, quantile}`` and ``..._count``.
The CPU a job's workers use: ``cairn_taskmanager_Status_Python_CPU_Time{job_id, job_name,
tm_id, scope}`` per worker (Flink's ``Status.JVM.CPU.Time`` for a Python worker: nanoseconds
since it started, ``scope`` ``process`` or ``task-thread``), and the job's
``cairn_jobmanager_job_cpuCores``, ``_cpuTime`` (ms), ``_cpuTimePerRecordUs``
(``observability/cpu.py``).

Invariant: a scrape reads one :class:`MetricsFacts` taken at that moment (the job's state is
never held between scrapes); the text is produced by ``prometheus_client`` only.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cairn.checkpoint.messages import TaskKey
from cairn.deploy.worker_cpu import WorkerCpu
from cairn.ids import JobId
from cairn.observability.cpu import CPU_METRICS, JobCpu, cpu_metric_values, job_cpu
from cairn.observability.metrics import (
    JOB_METRICS,
    SUBTASK_METRICS,
    JobMetrics,
    SubtaskMetrics,
    all_subtask_metrics,
    job_metrics,
)

if TYPE_CHECKING:
    from cairn.deploy.job_master_ports import ObservedJob

__all__ = [
    "CONTENT_TYPE",
    "JobCollector",
    "MetricsFacts",
    "PrometheusReporter",
    "facts_of",
    "render",
]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TASK_PREFIX = "cairn_taskmanager_job_task_"
OPERATOR_PREFIX = TASK_PREFIX + "operator_"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
JOB_PREFIX = "cairn_jobmanager_job_"


@dataclass(frozen=True)
class MetricsFacts:
    """The figures of one job at one moment (``vertex_names``: vertex id → name; ``cpu``:
    the job's CPU figures, ``workers_cpu`` each worker's latest CPU reading by index)."""

    job_id: JobId
    job_name: str
    vertex_names: Mapping[int, str]
    subtasks: Mapping[TaskKey, SubtaskMetrics]
    job: JobMetrics
    cpu: JobCpu | None = None
    workers_cpu: Mapping[int, WorkerCpu] = field(default_factory=dict)


def facts_of(master: ObservedJob) -> MetricsFacts:
    """The figures of ``master``'s job now (safe from any thread: one read of its immutable
    ``view``)."""
    view = master.view
    previous, current = view.metric_reports
    stats = None if view.checkpoint_stats is None else view.checkpoint_stats.snapshot()
    return MetricsFacts(
        job_id=master.job_id,
        job_name=master.settings.job_name,
        vertex_names={int(v.id): v.name for v in master.graph.vertices},
        subtasks=all_subtask_metrics(current, previous),
        job=job_metrics(stats, view.restarts),
        cpu=job_cpu(view.cpu_reports, view.metric_reports, master.plan.source_tasks),
        workers_cpu=view.cpu_reports[1],
    )


class JobCollector(Collector):
    """A ``prometheus_client`` collector over ``facts`` (called on every scrape)."""

    def __init__(self, facts: Callable[[], MetricsFacts]) -> None:
        self._facts = facts

    def collect(self) -> Iterator[Metric]:
        f = self._facts()
        for name in SUBTASK_METRICS:
            family = GaugeMetricFamily(
                TASK_PREFIX + name,
                f"Flink's {name} of each subtask",
                labels=["job_id", "job_name", "task_name", "subtask_index"],
            )
            for key in sorted(f.subtasks, key=lambda k: (k.vertex_id, k.subtask_index)):
                task = f.vertex_names.get(int(key.vertex_id), str(key.vertex_id))
                labels = [f.job_id, f.job_name, task, str(key.subtask_index)]
                family.add_metric(labels, f.subtasks[key].value(name))
            yield family
        for name in JOB_METRICS:
            family = GaugeMetricFamily(
                JOB_PREFIX + name, f"Flink's {name} of the job", labels=["job_id", "job_name"]
            )
            family.add_metric([f.job_id, f.job_name], f.job.value(name))
            yield family
        yield from _cpu_families(f)
        yield from _user_families(f)
        yield from _latency_families(f)

    def describe(self) -> Iterator[Metric]:
        return iter(())  # figures are read at scrape time only


def _cpu_families(f: MetricsFacts) -> Iterator[Metric]:
    """Each worker's CPU time (ns, as Flink's ``Status.JVM.CPU.Time``) and the job's CPU
    figures (a job's figure without a value, e.g. per record while the sources read
    nothing, has no sample)."""
    family = GaugeMetricFamily(
        "cairn_taskmanager_Status_Python_CPU_Time",
        "CPU time (ns) a worker used since it started: its process, or its task thread only "
        "(scope task-thread, in-process workers)",
        labels=["job_id", "job_name", "tm_id", "scope"],
    )
    for index in sorted(f.workers_cpu):
        reading = f.workers_cpu[index]
        labels = [f.job_id, f.job_name, str(index), reading.scope]
        family.add_metric(labels, round(reading.cpu_s * 1e9))
    yield family
    values = cpu_metric_values(f.cpu)
    for name in CPU_METRICS:
        job = GaugeMetricFamily(
            JOB_PREFIX + name, f"Cairn's {name} of the job", labels=["job_id", "job_name"]
        )
        if name in values:
            job.add_metric([f.job_id, f.job_name], values[name])
        yield job


def _user_families(f: MetricsFacts) -> Iterator[Metric]:
    """One gauge family per user metric name, a sample per subtask and operator."""
    families: dict[str, GaugeMetricFamily] = {}
    for key in sorted(f.subtasks, key=lambda k: (k.vertex_id, k.subtask_index)):
        task = f.vertex_names.get(int(key.vertex_id), str(key.vertex_id))
        for operator, name, value in f.subtasks[key].user:
            metric = OPERATOR_PREFIX + _UNSAFE.sub("_", name)
            family = families.get(metric)
            if family is None:
                family = families[metric] = GaugeMetricFamily(
                    metric,
                    f"user metric {name} of an operator",
                    labels=["job_id", "job_name", "task_name", "operator_name", "subtask_index"],
                )
            labels = [f.job_id, f.job_name, task, operator, str(key.subtask_index)]
            family.add_metric(labels, value)
    yield from families.values()


def _latency_families(f: MetricsFacts) -> Iterator[Metric]:
    """One summary family per latency scope shape (Flink's reporter: a histogram is a
    summary with quantiles 0.5 ... 0.999 and ``_count``), a series per histogram."""
    families: dict[str, Metric] = {}
    for key in sorted(f.subtasks, key=lambda k: (k.vertex_id, k.subtask_index)):
        for report in f.subtasks[key].latency:
            scope = report.scope.labels()
            name = "cairn_taskmanager_job_latency_" + "_".join(k for k, _ in scope) + "_latency"
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, "Flink's latency histogram", "summary")
            labels = {"job_id": f.job_id, "job_name": f.job_name, **dict(scope)}
            for q, value in report.stats.quantiles().items():
                family.add_sample(name, {**labels, "quantile": str(q)}, value)
            family.add_sample(name + "_count", labels, float(report.stats.count))
    yield from families.values()


def render(facts: Callable[[], MetricsFacts]) -> bytes:
    """The exposition text of one scrape.

    >>> from cairn.observability.metrics import job_metrics
    >>> text = render(lambda: MetricsFacts("j1", "sums", {}, {}, job_metrics(None, 1)))
    >>> 'cairn_jobmanager_job_numRestarts{job_id="j1",job_name="sums"} 1.0' in text.decode()
    True
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(facts))
    return generate_latest(registry)


class PrometheusReporter:
    """Serves ``facts`` on ``host:port`` at ``/metrics`` (Flink's ``metrics.reporter.prom.*``)
    from ``prometheus_client``'s own HTTP server thread; :meth:`close` stops it."""

    def __init__(self, facts: Callable[[], MetricsFacts], host: str, port: int) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(JobCollector(facts))
        self._host = host
        self._port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = port

    def start(self) -> int:
        """Listen; returns the port (``0`` asks for a free one)."""
        server, thread = start_http_server(self._port, self._host, registry=self._registry)
        self._server, self._thread = server, thread
        self.port = int(server.server_address[1])
        log.info("Prometheus metrics at http://%s:%d/metrics", self._host, self.port)
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
