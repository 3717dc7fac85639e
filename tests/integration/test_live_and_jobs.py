"""Live updates and the overview of jobs, over real HTTP on real jobs (in-process executor):
a client reads ``/jobs/:jobid/events`` (server-sent events) while a job runs, to its end;
``/jobs/overview`` of one endpoint lists this driver's finished job (whose final details it
still serves), its running job, and a job of another driver (a ``cairn run`` process found
through the job registry) without that job's token."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.common.job_status import JobStatus
from cairn.deploy.job_master_client import JobClient
from cairn.rest.registry import JobEntry, JobRegistry
from cairn.testing.processes import wait_for
from tests.integration.jobs import sequence_job
from tests.integration.rest_calls import get

SCRIPT = str(Path(__file__).with_name("savepoint_job.py"))
CAIRN = Path(sys.executable).with_name("cairn")
pytestmark = pytest.mark.slow  # jobs of several seconds each


def start(tmp_path: Path, name: str, records: int, rate: int = 5_000) -> JobClient:
    env = sequence_job(
        {"cairn.executor": "inprocess"},
        str(tmp_path / name / "out"),
        records=records,
        keys=10,
        rate=rate,
        checkpoint_dir=str(tmp_path / name / "chk"),
    )
    client = env.execute_async(name)
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    return client


def entry_of(client: JobClient) -> JobEntry:
    entry = JobRegistry().find(client.get_job_id())
    assert entry is not None
    return entry


def read_events(entry: JobEntry, timeout_s: float = 60) -> Iterator[tuple[float, str, Any]]:
    """``(arrival time, event, data)`` of the job's stream, until the server ends it."""
    req = urllib.request.Request(f"{entry.endpoint}/jobs/{entry.job_id}/events")
    req.add_header("Authorization", f"Bearer {entry.token}")
    with urllib.request.urlopen(req, timeout=timeout_s) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        name = None
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                assert name is not None
                yield time.monotonic(), name, json.loads(line.removeprefix("data: "))
                name = None


def test_the_event_stream_follows_a_running_job_to_its_end(
    tmp_path: Path, registry_dir: str
) -> None:
    client = start(tmp_path, "live", records=25_000)  # ~5 s at 5,000 records/s
    try:
        entry = entry_of(client)
        status, _ = get(entry, f"/jobs/{entry.job_id}/events", token="wrong")
        assert status == 401
        status, _ = get(entry, f"/jobs/{'0' * 32}/events")
        assert status == 404
        updates: list[tuple[float, dict[str, Any], Any, dict[str, Any]]] = []
        pending: dict[str, Any] = {}
        for at, name, data in read_events(entry):
            pending[name] = data
            if name == "backpressure":  # the last event of an update
                updates.append((at, pending["job"], pending["checkpoints"], data))
                pending = {}
        client.get_job_execution_result(60)
    finally:
        if not client.get_job_status().is_globally_terminal_state():
            client.cancel()
    # Pushed while the job ran (about once a second, more on checkpoints), ended with it.
    assert len(updates) >= 4
    states = [job["state"] for _, job, _, _ in updates]
    assert states[-1] == "FINISHED" and "RUNNING" in states
    assert all(s == "RUNNING" for s in states[:-1])
    # The records the sink vertex read only grow, and end at every record of the job.
    read = [job["vertices"][1]["metrics"]["read-records"] for _, job, _, _ in updates]
    assert read == sorted(read) and read[-1] == 25_000 and read[0] < 25_000
    final_job, final_checkpoints, final_pressure = updates[-1][1:]
    assert final_job["vertices"][1]["metrics"]["read-bytes"] > 0
    assert final_checkpoints["counts"]["completed"] >= 1
    assert set(final_pressure) == {v["id"] for v in final_job["vertices"]}
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(updates)]
    assert max(gaps) < 3.0, gaps  # no update waits for a poll


def test_the_overview_lists_this_drivers_jobs_and_another_drivers(
    tmp_path: Path, registry_dir: str
) -> None:
    finished = start(tmp_path, "first <i>", records=2_000)
    finished.get_job_execution_result(60)
    other_log = tmp_path / "other.log"
    with open(other_log, "wb") as log:
        other = subprocess.Popen(
            [
                str(CAIRN), "run", "-p", "2", "--executor", "inprocess",
                SCRIPT, str(tmp_path / "other-out"), str(tmp_path / "other-chk"),
                "10000000", "10", "2000",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    running = start(tmp_path, "second", records=10_000_000)
    try:
        entry = entry_of(running)

        def listed_by_the_other_driver() -> list[Any]:
            assert other.poll() is None, other_log.read_text()
            return [e for e in JobRegistry().running_jobs() if e.pid == other.pid]

        others = wait_for(
            listed_by_the_other_driver,
            120,
            0.3,
            lambda: f"the other driver's job in the registry; its log:\n{other_log.read_text()}",
        )
        [other_entry] = others

        def overview_with_the_other_job_running() -> dict[str, Any] | None:
            # A driver registers its endpoint before its job is deployed (INITIALIZING).
            status, overview = get(entry, "/jobs/overview")
            assert status == 200
            states = {row["jid"]: row["state"] for row in overview["jobs"]}
            return overview if states.get(other_entry.job_id) == "RUNNING" else None

        overview = wait_for(overview_with_the_other_job_running, 60, 0.2, "the other job RUNNING")
        rows = {row["jid"]: row for row in overview["jobs"]}
        assert overview["jobs"][0]["jid"] == running.get_job_id()
        assert rows[finished.get_job_id()]["state"] == "FINISHED"
        assert rows[finished.get_job_id()]["name"] == "first <i>"
        assert rows[finished.get_job_id()]["end-time"] >= rows[finished.get_job_id()]["start-time"]
        row = rows[other_entry.job_id]
        assert row["state"] == "RUNNING" and row["name"] == "savepoint-job"
        assert row["endpoint"] == other_entry.endpoint and row["tasks"]["total"] == 4
        assert other_entry.token and other_entry.token not in json.dumps(overview)
        status, jobs = get(entry, "/jobs")
        assert {j["id"] for j in jobs["jobs"]} == set(rows)
        # The finished job's final details are still served here, its figures included.
        status, details = get(entry, f"/jobs/{finished.get_job_id()}")
        assert status == 200 and details["state"] == "FINISHED"
        assert details["vertices"][1]["metrics"]["read-records"] == 2_000
        # The other driver's job is served by its own endpoint only.
        status, _ = get(entry, f"/jobs/{other_entry.job_id}")
        assert status == 404
        status, _ = get(entry, "/jobs/overview", token=None)
        assert status == 401
    finally:
        other.terminate()
        other.wait(30)
        running.cancel()
        running.get_job_execution_result(60)
