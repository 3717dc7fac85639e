"""What a running job costs, as its users see it: the cores its workers use and the CPU time
per source record in ``/jobs/:jobid``, ``/jobs/overview``, ``/jobs/:jobid/metrics``,
Prometheus, the progress line and ``cairn list``; on the in-process executor (task threads
measured) and on real Spark (each worker's own Python process measured)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cairn.common.job_status import JobStatus
from cairn.deploy.job_master_client import JobClient
from cairn.observability.cpu import job_cpu
from cairn.observability.progress import ProgressReporter
from cairn.rest.registry import JobRegistry
from cairn.testing.processes import wait_for
from tests.integration.jobs import sequence_job
from tests.integration.rest_calls import http, read_url

pytestmark = pytest.mark.usefixtures("registry_dir")


@pytest.fixture
def job(tmp_path: Path) -> Iterator[JobClient]:
    env = sequence_job(
        {"cairn.executor": "inprocess"}, str(tmp_path / "out"), records=10_000_000, keys=10,
        rate=5_000, checkpoint_dir=str(tmp_path / "chk"),
    )  # fmt: skip
    client = env.execute_async("cost-test")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    yield client
    if not client.get_job_status().is_globally_terminal_state():
        client.cancel()
    client.get_job_execution_result(60)


def _costed(url: str, token: str | None) -> dict[str, Any] | None:
    """The ``cpu`` block of ``/jobs/:jobid`` once it has cores and a per-record figure."""
    _, details = http("GET", url, token)
    cpu = details.get("cpu")
    ready = cpu and cpu["cores"] > 0 and cpu["cpu-per-record-us"] is not None
    return cpu if ready else None


def test_a_running_job_shows_its_cores_and_cpu_per_record_everywhere(
    job: JobClient, capsys: pytest.CaptureFixture[str]
) -> None:
    from cairn.cli.main import main

    entry = JobRegistry().find(job.get_job_id())
    assert entry is not None
    jid, url = job.get_job_id(), entry.endpoint
    cpu = wait_for(lambda: _costed(f"{url}/jobs/{jid}", entry.token), 30, 0.2, "the job's cost")
    assert cpu["measured"] == "task-thread" and cpu["workers"] == 2
    assert math.isfinite(cpu["cpu-per-record-us"]) and cpu["cpu-per-record-us"] > 0
    assert cpu["source-records-per-second"] > 0 and cpu["cpu-time"] > 0
    assert cpu["source-records"] > 0 and cpu["cpu-per-record-us-since-start"] > 0
    _, overview = http("GET", f"{url}/jobs/overview", entry.token)
    assert overview["jobs"][0]["cpu"].keys() == cpu.keys()
    ids = "cpuCores,cpuTime,cpuTimePerRecordUs"
    _, values = http("GET", f"{url}/jobs/{jid}/metrics?get={ids}", entry.token)
    assert {v["id"] for v in values} == set(ids.split(",")), values
    assert all(float(v["value"]) > 0 for v in values)
    text = read_url(url + "/metrics", entry.token).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = families["cairn_taskmanager_Status_Python_CPU_Time"].samples
    assert {s.labels["tm_id"] for s in samples} == {"0", "1"}
    assert all(s.labels["scope"] == "task-thread" and s.value > 0 for s in samples)
    assert families["cairn_jobmanager_job_cpuCores"].samples[0].value > 0
    assert re.search(r"\| cpu \d+\.\d\d cores \d+us/rec", ProgressReporter(job.job_master).line())
    assert main(["list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if jid in x]
    assert re.search(r"\(RUNNING\) [\d.]+k? rec/s \d+\.\d\d cores \d+ us/rec http://", line), line


@pytest.mark.spark
def test_spark_workers_report_the_cpu_of_their_own_processes(spark: Any, tmp_path: Path) -> None:
    conf = {"cairn.executor": "spark"}
    env = sequence_job(conf, str(tmp_path / "out"), records=40_000, keys=10, rate=8_000)
    client = env.execute_async("cost-spark")
    jid = client.get_job_id()
    entry = wait_for(lambda: JobRegistry().find(jid), 60, message="the job's endpoint")
    cpu = wait_for(lambda: _costed(f"{entry.endpoint}/jobs/{jid}", entry.token), 90, 0.5, "cost")
    assert cpu["measured"] == "process" and cpu["workers"] == 2
    assert math.isfinite(cpu["cpu-per-record-us"]) and cpu["cpu-per-record-us"] > 0
    client.get_job_execution_result(180)
    master = client.job_master
    view = master.view
    readings = view.cpu_reports[1]
    assert sorted(readings) == [0, 1]
    assert all(r.scope == "process" and r.cpu_s > 0 for r in readings.values()), readings
    final = job_cpu(view.cpu_reports, view.metric_reports, master.plan.source_tasks)
    assert final is not None and final.source_records == 40_000
    assert final.us_per_record_since_start is not None
    assert math.isfinite(final.us_per_record_since_start) and final.us_per_record_since_start > 0
    print(json.dumps(final.to_dict()))  # the figures, for the test log
