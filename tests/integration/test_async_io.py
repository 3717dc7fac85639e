"""Async I/O exactly-once on real Spark: workers are SIGKILLed while requests to a real HTTP
server (slow, failing and never-answering responses included) are in flight; the inputs a
checkpoint stored in flight are issued again after the restore, and the committed output
holds every input's result exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.async_jobs import FAIL_EVERY, HANG, LookupServer, expected_lines, lookup_job
from tests.integration.jobs import checkpointed_env

RECORDS, RATE = 1200, 400.0


@pytest.mark.spark
def test_sigkill_with_requests_in_flight_keeps_exactly_once(spark: Any, tmp_path: Path) -> None:
    marker, out = tmp_path / "fault-marker", str(tmp_path / "out")
    # Each kill lands once a completed checkpoint stored >= 4 inputs in flight and requests
    # are in flight at that moment; the first on subtask 0, the second on subtask 1.
    faults = (
        f"point=async-in-flight,attempt=0,records=4,subtask=0,marker={marker};"
        f"point=async-in-flight,attempt=1,records=4,subtask=1,marker={marker}"
    )
    with LookupServer() as server:
        env = checkpointed_env(
            {"cairn.executor": "spark", "cairn.testing.faults": faults}, interval_ms=300
        )
        lookup_job(env, server.url, out, RECORDS, RATE)
        client = env.execute_async("async lookups")
        client.get_job_execution_result(timeout=180)
        requests, failed = server.requests, server.failed
    assert client.job_master.restarts == 2, "every scheduled kill must have happened"
    landed = marker.read_text().splitlines()
    assert [line.split(" of ")[0] for line in landed] == ["async-in-flight"] * 2, landed
    assert ["#0 (" in landed[0], "#1 (" in landed[1]] == [True, True], landed
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS)
    # The server saw every input, the failures it served were retried, the hanging ones
    # timed out, and inputs in flight at the kills were asked again after the restores.
    assert set(requests) == set(range(RECORDS))
    assert failed >= RECORDS // FAIL_EVERY
    assert all(requests[n] >= 1 for n in HANG)
    assert sum(1 for n, count in requests.items() if count > 1 and n % FAIL_EVERY) > 0
