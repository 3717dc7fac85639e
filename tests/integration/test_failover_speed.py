"""Failover takes seconds, not the registration timeout: when a restarted attempt's worker
cannot register with the job master, and while other local processes flood the listeners
with idle connections; the output still equals the golden output, record by record.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from cairn.cli.demo_jobs import read_visible_lines
from cairn.common.job_status import JobStatus
from cairn.deploy.job_client import JobClient
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
    if executor_conf["cairn.executor"] == "inprocess":
        assert "worker 1 of attempt 0 could not register with the job master" in str(error)
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)
