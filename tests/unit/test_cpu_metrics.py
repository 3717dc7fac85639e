"""What a job costs: the workers' CPU clock (process-wide for a worker owning its process,
the task thread's for an in-process worker) and the pure aggregation into cores and CPU per
source record, as REST, Prometheus and the progress line show them."""

from __future__ import annotations

import math
import threading
import time

from prometheus_client.parser import text_string_to_metric_families

from cairn.checkpoint.messages import TaskKey
from cairn.deploy.process_tuning import ProcessOwnership
from cairn.deploy.worker_cpu import PROCESS, TASK_THREAD, CpuClock, WorkerCpu
from cairn.ids import JobId, SubtaskIndex, VertexId
from cairn.observability.cpu import cpu_metric_values, job_cpu, worker_cores
from cairn.observability.metrics import job_metrics
from cairn.observability.progress import cpu_progress
from cairn.observability.prometheus import MetricsFacts, render
from cairn.rest.metric_views import job_metric_values
from cairn.runtime.reports import TaskMetrics

SRC0 = TaskKey(VertexId(0), SubtaskIndex(0))
SRC1 = TaskKey(VertexId(0), SubtaskIndex(1))
SINK = TaskKey(VertexId(1), SubtaskIndex(0))


def _spin_until(clock: CpuClock, reading: float, more_s: float) -> None:
    """Burn CPU on this thread until ``clock`` shows ``more_s`` more than ``reading``."""
    while clock.read().cpu_s < reading + more_s:
        sum(i * i for i in range(2_000))


def test_a_process_clock_counts_every_thread_a_task_thread_clock_only_its_own() -> None:
    process = CpuClock(ProcessOwnership.OWNED)
    thread = CpuClock(ProcessOwnership.SHARED)  # this (the "task") thread
    p0, t0 = process.read(), thread.read()
    assert (p0.scope, t0.scope) == (PROCESS, TASK_THREAD)
    other = threading.Thread(target=_spin_until, args=(process, p0.cpu_s, 0.2))
    other.start()
    other.join()
    p1, t1 = process.read(), thread.read()
    assert p1.cpu_s - p0.cpu_s >= 0.2  # the other thread's work is the process's
    assert t1.cpu_s - t0.cpu_s < 0.1  # but not this thread's: it only waited
    assert p1.elapsed_s > p0.elapsed_s
    _spin_until(thread, t1.cpu_s, 0.05)
    assert thread.read().cpu_s >= t1.cpu_s + 0.05


def test_a_reused_process_counts_only_what_it_used_since_the_worker_started() -> None:
    spent = time.process_time()
    assert spent > 0  # this test process already used CPU before the "worker" started
    reading = CpuClock(ProcessOwnership.OWNED).read()
    assert reading.cpu_s < spent


def test_cores_and_cpu_per_record_over_the_last_interval_and_since_start() -> None:
    # Worker 0 hosts both sources, worker 1 the sink: all the job's CPU per source record.
    before = {0: WorkerCpu(1.0, 2.0), 1: WorkerCpu(0.5, 2.0)}
    now = {0: WorkerCpu(1.8, 3.0), 1: WorkerCpu(0.7, 3.0)}
    tasks = (
        {
            SRC0: TaskMetrics(2_000, 2_000, elapsed_ms=2000.0),
            SRC1: TaskMetrics(2_000, 2_000, elapsed_ms=2000.0),
            SINK: TaskMetrics(3_900, 0, elapsed_ms=2000.0),
        },
        {
            SRC0: TaskMetrics(3_000, 3_000, elapsed_ms=3000.0),
            SRC1: TaskMetrics(3_000, 3_000, elapsed_ms=3000.0),
            SINK: TaskMetrics(5_900, 0, elapsed_ms=3000.0),  # records in: not the sources'
        },
    )
    cpu = job_cpu((before, now), tasks, [SRC0, SRC1])
    assert cpu is not None
    assert math.isclose(cpu.cores, 0.8 + 0.2)
    assert math.isclose(cpu.source_rate, 2_000.0)
    assert cpu.us_per_record is not None and math.isclose(cpu.us_per_record, 500.0)
    assert math.isclose(cpu.cores_since_start, (1.8 + 0.7) / 3.0)
    assert cpu.source_records == 6_000 and math.isclose(cpu.cpu_time_s, 2.5)
    assert cpu.us_per_record_since_start is not None
    assert math.isclose(cpu.us_per_record_since_start, 2.5 / 6_000 * 1e6)
    assert cpu.scope == PROCESS and cpu.workers == 2
    block = cpu.to_dict()
    assert block["cores"] == 1.0 and block["cpu-per-record-us"] == 500.0
    assert block["cpu-time"] == 2500 and block["measured"] == "process"
    assert cpu_progress(cpu) == "cpu 1.00 cores 500us/rec"


def test_a_restarted_worker_counts_from_its_own_start() -> None:
    # The previous reading is the earlier worker's (longer elapsed): not a window.
    assert worker_cores(WorkerCpu(0.3, 1.0), WorkerCpu(5.0, 60.0)) == 0.3
    assert worker_cores(WorkerCpu(1.0, 2.0), WorkerCpu(1.0, 2.0)) == 0.5  # no new window


def test_without_source_records_the_per_record_figure_is_absent_not_infinite() -> None:
    now = {0: WorkerCpu(1.0, 2.0, TASK_THREAD)}
    idle = ({SRC0: TaskMetrics(10, 10, elapsed_ms=1000.0)},) * 2
    cpu = job_cpu(({}, now), (idle[0], idle[1]), [SRC0])
    assert cpu is not None and cpu.us_per_record is None
    assert cpu.us_per_record_since_start is not None  # 10 records since start
    assert cpu.to_dict()["cpu-per-record-us"] is None and cpu.scope == TASK_THREAD
    assert set(cpu_metric_values(cpu)) == {"cpuCores", "cpuTime"}
    assert cpu_progress(cpu) == "cpu 0.50 cores -us/rec"
    assert job_cpu(({}, {}), (idle[0], idle[1]), [SRC0]) is None


def test_workers_measured_differently_say_so() -> None:
    now = {0: WorkerCpu(1.0, 2.0, PROCESS), 1: WorkerCpu(1.0, 2.0, TASK_THREAD)}
    cpu = job_cpu(({}, now), ({}, {}), [])
    assert cpu is not None and cpu.scope == "mixed"


def test_rest_ids_and_prometheus_families_of_the_cpu_figures() -> None:
    workers = {0: WorkerCpu(1.5, 3.0), 1: WorkerCpu(0.25, 3.0)}
    tasks = ({}, {SRC0: TaskMetrics(3_500, 3_500, elapsed_ms=3000.0)})
    cpu = job_cpu(({}, workers), tasks, [SRC0])
    facts = MetricsFacts(JobId("j1"), "sums", {}, {}, job_metrics(None, 0), cpu, workers)
    values = {
        m["id"]: float(m["value"])
        for m in job_metric_values(facts, ["cpuCores", "cpuTime", "cpuTimePerRecordUs"])
    }
    assert values["cpuTime"] == 1750.0 and math.isclose(values["cpuCores"], 1.75 / 3, abs_tol=1e-3)
    assert math.isclose(values["cpuTimePerRecordUs"], 500.0, abs_tol=1e-3)
    assert {"id": "cpuCores"} in job_metric_values(facts, None)
    families = {f.name: f for f in text_string_to_metric_families(render(lambda: facts).decode())}
    per_worker = families["cairn_taskmanager_Status_Python_CPU_Time"].samples
    assert {(s.labels["tm_id"], s.labels["scope"], s.value) for s in per_worker} == {
        ("0", "process", 1.5e9),
        ("1", "process", 0.25e9),
    }
    (sample,) = families["cairn_jobmanager_job_cpuTimePerRecordUs"].samples
    assert math.isclose(sample.value, 500.0) and sample.labels["job_name"] == "sums"
