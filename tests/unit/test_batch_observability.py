"""A BATCH job is observed as a STREAMING one: while it runs, ``cairn list`` lists it
RUNNING with its control endpoint (the web UI's), the endpoint serves its status and
vertices, and the progress line counts its stages; when it ended, its final record counts
per operator are in the monitor, the progress line and the job archive (``cairn list -a``).
In process (no Spark); a file gates the job so the checks while it runs see it running."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.cli.main import main
from cairn.common.job_status import JobStatus
from cairn.ids import JobId
from cairn.observability.progress import ProgressReporter
from cairn.rest.client import JobEndpoint
from cairn.rest.registry import JobRegistry
from tests.unit.batch_jobs import environment

RECORDS = 100


def _gated(gate: str) -> Any:
    def wait_for_gate(x: int) -> tuple[int, int]:
        deadline = time.monotonic() + 60
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
        return x % 7, 1

    return wait_for_gate


def _wait_for(condition: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_batch_job_has_progress_endpoint_listing_and_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = str(tmp_path / "go")
    archive = str(tmp_path / "archive")
    env = environment("BATCH", **{"jobmanager.archive.fs.dir": archive})
    env.set_parallelism(1)
    (
        env.from_collection(list(range(RECORDS)))
        .map(_gated(gate))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .print()
    )
    client = env.execute_async("observed batch")
    job_id = JobId(client.get_job_id())
    monitor: Any = client.job_master
    try:
        _wait_for(lambda: JobRegistry().find(job_id) is not None)
        capsys.readouterr()
        assert main(["list"]) == 0
        listed = capsys.readouterr().out
        assert f"{job_id} : observed batch (RUNNING)" in listed, listed
        details = JobEndpoint.find(job_id).request("GET", f"/jobs/{job_id}")
        assert details["state"] == "RUNNING"
        vertices = [(v["name"], v["status"]) for v in details["vertices"]]
        assert vertices == [
            ("Collection Source -> Map", "RUNNING"),
            ("Reduce -> Print to Std. Out", "CREATED"),
        ]
        line = ProgressReporter(monitor, io.StringIO()).line()
        assert "RUNNING" in line and "stages 0/2 done" in line, line
    finally:
        Path(gate).touch()
    client.get_job_execution_result(timeout=60)

    view = monitor.view
    assert client.get_job_status() is JobStatus.FINISHED and view.ended
    assert view.stages is not None and view.stages.finished == {0, 1}
    by_vertex: dict[int, tuple[int, int]] = {}
    for key, metrics in view.metrics.items():
        records_in, records_out = by_vertex.get(int(key.vertex_id), (0, 0))
        by_vertex[int(key.vertex_id)] = (
            records_in + metrics.records_in,
            records_out + metrics.records_out,
        )
    assert by_vertex == {0: (0, RECORDS), 1: (RECORDS, 0)}
    line = ProgressReporter(monitor, io.StringIO()).line()
    assert "FINISHED" in line and "source out 100" in line and "processed in 100" in line
    assert "stages 2/2 done" in line, line

    capsys.readouterr()
    assert main(["list", "--all", "--archive-dir", archive]) == 0
    listed = capsys.readouterr().out
    assert f"{job_id} : observed batch (FINISHED)" in listed, listed
    assert "records in/out: Collection Source -> Map 0/100, Reduce -> Print to Std. Out 100/0" in (
        listed
    )


def test_a_batch_job_refuses_a_stop_with_savepoint_through_its_port() -> None:
    env = environment("BATCH")
    env.from_collection([1, 2, 3]).print()
    client = env.execute_async("no savepoints")
    client.get_job_execution_result(timeout=60)
    stop = client.job_master.stop_with_savepoint()
    with pytest.raises(RuntimeError, match="a BATCH job takes no savepoints"):
        stop.savepoint.result(timeout=1)
