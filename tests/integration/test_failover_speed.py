"""Failover takes seconds, not the registration timeout: when a restarted attempt's worker
cannot register with the job master, and while other local processes flood the listeners
with idle connections; the output still equals the golden output, record by record.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from cairn.common.job_status import JobStatus
from cairn.deploy.job_master import JobMaster
from cairn.deploy.job_master_client import JobClient
from cairn.testing.sequence_jobs import read_visible_lines
from tests.connection_flood import Address, ConnectionFlood
from tests.integration.jobs import expected_lines, sequence_job

RECORDS, KEYS = 20_000, 8
QUICK_S = 30.0  # the registration timeout is 180 s


class Timeline:
    """The job master's events with the time they happened, from the job's submission."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.events: list[tuple[float, str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, event: str, payload: Any) -> None:
        with self._lock:
            self.events.append((time.monotonic() - self.start, event, payload))

    def times(self, event: str) -> list[float]:
        with self._lock:
            return [t for t, e, _ in self.events if e == event]

    def payloads(self, event: str) -> list[Any]:
        with self._lock:
            return [p for _, e, p in self.events if e == event]


def _submit(conf: dict[str, str], out: str, name: str, **kwargs: Any) -> tuple[JobClient, Timeline]:
    env = sequence_job(conf, out, records=RECORDS, keys=KEYS, **kwargs)
    timeline = Timeline()
    client = env.execute_async(name)
    client.job_master.listeners.append(timeline)
    return client, timeline


def test_an_attempt_whose_worker_cannot_register_fails_at_once(
    executor_conf: dict[str, str], tmp_path: Any
) -> None:
    out = str(tmp_path / "out")
    conf = {**executor_conf, "cairn.testing.faults": "point=register,attempt=0,subtask=1"}
    client, timeline = _submit(conf, out, "unregistered-worker", rate=None)
    client.get_job_execution_result(timeout=120)
    assert client.get_job_status() is JobStatus.FINISHED
    assert client.job_master.restarts == 1
    (restarted_at,) = timeline.times("restart")
    assert restarted_at < QUICK_S, f"attempt 0 failed only after {restarted_at:.0f} s"
    (error,) = timeline.payloads("restart")
    # On Spark, the stage failure names the worker's exception, not only the failed task.
    assert "worker 1 of attempt 0 could not register with the job master" in str(error)
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)


def _listeners(master: JobMaster) -> list[Address]:
    """The job master's control listener and the data listeners of the current attempt."""
    return [master.control_address, *master.view.worker_data_addresses.values()]


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
def test_a_killed_worker_rejoins_within_seconds_under_a_connection_flood(
    executor_conf: dict[str, str], tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """200 idle connections, reopened as soon as a listener closes them, on the driver's
    control port and the workers' data ports from submission on; a worker is killed
    (SIGKILL on Spark) mid-way; the new attempt's workers register within seconds."""
    caplog.set_level(logging.WARNING, logger="cairn.runtime.network.server")
    out = str(tmp_path / "out")
    faults = "point=processing,attempt=0,records=3000,subtask=1"
    conf = {**executor_conf, "cairn.testing.faults": faults}
    client, timeline = _submit(conf, out, "flooded", rate=5_000)
    master = client.job_master
    with ConnectionFlood(lambda: _listeners(master), count=200, max_seconds=100) as flood:
        flood.wait_started()
        client.get_job_execution_result(timeout=120)
    assert client.get_job_status() is JobStatus.FINISHED
    assert master.restarts == 1
    (restarted_at,) = timeline.times("restart")
    rerunning_at = [t for t, e, p in timeline.events if p is JobStatus.RUNNING and t > restarted_at]
    assert rerunning_at, "the new attempt never ran"
    assert rerunning_at[0] - restarted_at < 20, "the new attempt's workers registered slowly"
    assert flood.opened > 200  # listeners closed idle connections, and the flood came back
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)
    # Thousands of rejections: a few lines per listener and 10 s (one per kind, a summary).
    warnings = [r for r in caplog.records if r.name == "cairn.runtime.network.server"]
    assert len(warnings) < 60, f"{len(warnings)} warning lines"
