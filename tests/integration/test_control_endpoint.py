"""The control endpoint of a real job (in-process executor) over real HTTP, and the job
registry with real processes: tokens, other jobs' ids, bad requests, savepoint and cancel
operations in Flink's shapes; stale entries of dead drivers."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.common.job_status import JobStatus
from cairn.deploy.job_master_client import JobClient
from cairn.rest.client import JobControlError, JobEndpoint
from cairn.rest.registry import JobEntry, JobRegistry, process_start_time
from cairn.testing.processes import holds_for, wait_for
from tests.integration.jobs import sequence_job
from tests.integration.rest_calls import http


@pytest.fixture
def job(tmp_path: Path, registry_dir: str) -> Iterator[JobClient]:
    env = sequence_job(
        {"cairn.executor": "inprocess"},
        str(tmp_path / "out"),
        records=10_000_000,
        keys=10,
        rate=5_000,
        checkpoint_dir=str(tmp_path / "chk"),
    )
    client = env.execute_async("rest-test")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    yield client
    if not client.get_job_status().is_globally_terminal_state():
        client.cancel()
    client.get_job_execution_result(60)


def test_the_registry_lists_the_job_with_its_endpoint_and_token(job: JobClient) -> None:
    entry = JobRegistry().find(job.get_job_id())
    assert entry is not None and entry.pid == os.getpid() and entry.token
    assert entry.endpoint.startswith("http://127.0.0.1:") and entry.name == "rest-test"
    mode = os.stat(os.path.join(JobRegistry().directory, job.get_job_id() + ".json")).st_mode
    assert mode & 0o777 == 0o600 and os.stat(JobRegistry().directory).st_mode & 0o777 == 0o700


def test_views_are_shaped_like_flinks(job: JobClient) -> None:
    entry = JobRegistry().find(job.get_job_id())
    assert entry is not None
    jid = job.get_job_id()
    status, overview = http("GET", entry.endpoint + "/jobs/overview", entry.token)
    assert status == 200
    row = overview["jobs"][0]  # this endpoint's job first (then other jobs it knows of)
    assert row["jid"] == jid and row["state"] == "RUNNING" and row["end-time"] == -1
    assert row["tasks"]["total"] == 4  # source and check+sink, parallelism 2
    assert "endpoint" not in row  # served here
    status, details = http("GET", f"{entry.endpoint}/jobs/{jid}", entry.token)
    assert status == 200 and details["isStoppable"] and len(details["vertices"]) == 2
    # Flink's IOMetricsInfo per vertex: the hash edge crosses workers, so bytes are counted.

    def bytes_read_by_the_check() -> tuple[Any, Any] | None:
        _, details = http("GET", f"{entry.endpoint}/jobs/{jid}", entry.token)
        source, check = (v["metrics"] for v in details["vertices"])
        return (source, check) if check["read-bytes"] > 0 else None

    source, check = wait_for(bytes_read_by_the_check, 30, 0.2, "bytes read by the check")
    assert source["write-bytes"] > 0 and source["write-records"] > 0
    assert check["read-bytes"] > 0 and check["read-records"] > 0
    assert check["write-bytes"] == 0  # its chain ends in the sink: nothing goes on a channel
    assert source["read-bytes-complete"] and check["write-records-complete"]

    def a_completed_checkpoint() -> tuple[int, Any] | None:
        status, checkpoints = http("GET", f"{entry.endpoint}/jobs/{jid}/checkpoints", entry.token)
        return (status, checkpoints) if checkpoints["counts"]["completed"] > 0 else None

    status, checkpoints = wait_for(a_completed_checkpoint, 30, 0.2, "a completed checkpoint")
    assert status == 200 and checkpoints["counts"]["completed"] > 0


def test_wrong_token_other_jobs_id_and_bad_input_are_refused_and_the_job_runs_on(
    job: JobClient, tmp_path: Path
) -> None:
    entry = JobRegistry().find(job.get_job_id())
    assert entry is not None
    jid, url = job.get_job_id(), entry.endpoint
    for token in (None, "wrong", entry.token + "x"):
        status, body = http("PATCH", f"{url}/jobs/{jid}?mode=cancel", token)
        assert status == 401 and "wrong token" in body["errors"][0]
    status, body = http("GET", f"{url}/jobs/{'0' * 32}", entry.token)
    assert status == 404 and body["errors"][0].startswith(f"Job {'0' * 32} not found")
    status, body = http("POST", f"{url}/jobs/{'0' * 32}/savepoints", entry.token, {})
    assert status == 404
    status, body = http("POST", f"{url}/jobs/{jid}/savepoints", entry.token, b"{not json")
    assert status == 400 and "not JSON" in body["errors"][0]
    status, body = http("POST", f"{url}/jobs/{jid}/stop", entry.token, {"drain": "yes"})
    assert status == 400 and "drain must be true or false" in body["errors"][0]
    for path in ("savepoints", "stop"):
        status, body = http("POST", f"{url}/jobs/{jid}/{path}", entry.token, {"formatType": "zip"})
        assert status == 400 and "formatType must be CANONICAL or NATIVE" in body["errors"][0]
    status, body = http("GET", f"{url}/jobs/{jid}/savepoints/nope", entry.token)
    assert status == 404
    status, body = http("GET", f"{url}/no/such/path", entry.token)
    assert status == 404 and body["errors"]
    holds_for(lambda: job.get_job_status() is JobStatus.RUNNING, 0.5, 0.1, "the job runs on")


def test_savepoint_operation_and_its_failure_in_flinks_shape(
    job: JobClient, tmp_path: Path
) -> None:
    endpoint = JobEndpoint.find(job.get_job_id())
    jid = job.get_job_id()
    target = str(tmp_path / "sp")
    trigger = endpoint.request("POST", f"/jobs/{jid}/savepoints", {"target-directory": target})
    assert set(trigger) == {"request-id"}
    assert endpoint.wait_for_operation(trigger["request-id"], 60) == target
    native = str(tmp_path / "native")  # Flink's formatType (the heap's native is canonical)
    trigger = endpoint.request(
        "POST", f"/jobs/{jid}/savepoints", {"target-directory": native, "formatType": "NATIVE"}
    )
    assert endpoint.wait_for_operation(trigger["request-id"], 60) == native
    again = endpoint.request("POST", f"/jobs/{jid}/savepoints", {"target-directory": target})
    with pytest.raises(JobControlError, match="already contains a savepoint"):
        endpoint.wait_for_operation(again["request-id"], 60)
    answer = endpoint.request("GET", f"/jobs/{jid}/savepoints/{again['request-id']}")
    cause = answer["operation"]["failure-cause"]
    assert answer["status"]["id"] == "COMPLETED"
    assert cause["class"] == "SavepointTargetExistsError"
    assert job.get_job_status() is JobStatus.RUNNING


def test_stop_with_drain_is_accepted_and_ends_the_job_finished(
    job: JobClient, tmp_path: Path
) -> None:
    """Flink's ``POST /jobs/:jobid/stop`` with ``"drain": true``: the final watermark, then the
    savepoint; the operation gives its path and the job ends FINISHED."""
    endpoint = JobEndpoint.find(job.get_job_id())
    jid, target = job.get_job_id(), str(tmp_path / "drained")
    trigger = endpoint.request(
        "POST", f"/jobs/{jid}/stop", {"targetDirectory": target, "drain": True}
    )
    assert endpoint.wait_for_operation(trigger["request-id"], 120) == target
    assert (tmp_path / "drained" / "_metadata").exists()
    assert job.wait_for_status(JobStatus.FINISHED, 60)


def test_cancel_through_the_endpoint_ends_the_job_and_its_registry_entry(job: JobClient) -> None:
    endpoint = JobEndpoint.find(job.get_job_id())
    assert endpoint.request("PATCH", f"/jobs/{job.get_job_id()}?mode=cancel") == {}
    assert job.wait_for_status(JobStatus.CANCELED, 60)
    # The entry goes when the status listeners hear of the end, just after the status is set.
    wait_for(
        lambda: JobRegistry().find(job.get_job_id()) is None,
        10,
        0.01,
        "the end of the job's registry entry (it outlived the job by 10 s)",
    )
    with pytest.raises(JobControlError, match="no running job"):
        JobEndpoint.find(job.get_job_id())


def test_entries_of_dead_drivers_are_stale_and_removed(registry_dir: str) -> None:
    registry = JobRegistry()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = process_start_time(child.pid)
        assert started is not None
        registry.register(JobEntry("alive", "a", "http://127.0.0.1:1", 1, child.pid, started))
        reused = JobEntry("reused", "r", "http://127.0.0.1:1", 2, child.pid, started - 100)
        registry.register(reused)  # same pid, another process start: the pid was reused
        assert [e.job_id for e in registry.running_jobs()] == ["alive"]
        assert not os.path.exists(os.path.join(registry_dir, "reused.json"))
    finally:
        child.kill()
        child.wait()
    assert registry.running_jobs() == []
    assert os.listdir(registry_dir) == []


def test_a_registry_others_may_enter_is_refused(registry_dir: str) -> None:
    os.makedirs(registry_dir, mode=0o700)
    os.chmod(registry_dir, 0o777)
    with pytest.raises(Exception, match="accessible to group or others"):
        JobRegistry().running_jobs()


def test_a_port_in_use_fails_the_submission_with_one_clear_line(
    tmp_path: Path, registry_dir: str
) -> None:
    import socket

    from cairn.common.exceptions import JobSubmissionError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = sequence_job(
            {"cairn.executor": "inprocess", "rest.port": str(port)},
            str(tmp_path / "out"),
            records=10,
            keys=1,
        )
        with pytest.raises(JobSubmissionError, match=rf"on 127\.0\.0\.1:{port} \(rest\."):
            env.execute_async("port-taken")
    assert JobRegistry().running_jobs() == []


def test_without_a_token_the_endpoint_answers_anyone(tmp_path: Path, registry_dir: str) -> None:
    conf = {"cairn.executor": "inprocess", "cairn.rest.token.enabled": "false"}
    env = sequence_job(
        conf,
        str(tmp_path / "out"),
        records=10_000_000,
        keys=10,
        rate=5_000,
        checkpoint_dir=str(tmp_path / "chk"),
    )
    client = env.execute_async("open")
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 60)
        entry = JobRegistry().find(client.get_job_id())
        assert entry is not None and entry.token is None
        status, body = http("GET", f"{entry.endpoint}/jobs/{client.get_job_id()}", None)
        assert status == 200 and body["jid"] == client.get_job_id()
    finally:
        client.cancel()
        client.get_job_execution_result(60)


def test_a_job_without_endpoint_is_not_listed(tmp_path: Path, registry_dir: str) -> None:
    conf = {"cairn.executor": "inprocess", "cairn.rest.enabled": "false"}
    env = sequence_job(conf, str(tmp_path / "out"), records=1_000, keys=10, rate=None)
    client = env.execute_async("no-endpoint")
    assert JobRegistry().running_jobs() == []
    client.get_job_execution_result(60)


def test_cli_savepoint_type_native_keeps_rocksdb_files_canonical_by_default(
    tmp_path: Path, registry_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from cairn.checkpoint.handles import KeyedStateHandle, RocksDBKeyedStateHandle
    from cairn.checkpoint.storage import load_checkpoint
    from cairn.cli.main import main

    conf = {
        "cairn.executor": "inprocess",
        "state.backend.type": "rocksdb",
        "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
    }
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")
    env = sequence_job(conf, out, records=10_000_000, keys=10, rate=5_000, checkpoint_dir=chk)
    client = env.execute_async("rest-rocksdb")
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 60)
        jid = client.get_job_id()
        kinds = {}
        for name, extra in (("canonical", []), ("native", ["-t", "native"])):
            target = tmp_path / name
            assert main(["savepoint", jid, str(target), *extra]) == 0
            assert f"Savepoint completed. Path: {target}" in capsys.readouterr().out
            op = load_checkpoint(str(target)).metadata.operators["sequence-check"]
            kinds[name] = {type(h) for s in op.subtasks.values() for h in s.keyed}
        assert kinds == {"canonical": {KeyedStateHandle}, "native": {RocksDBKeyedStateHandle}}
        with pytest.raises(SystemExit):
            main(["savepoint", jid, str(tmp_path / "zip"), "--type", "zip"])
        assert client.get_job_status() is JobStatus.RUNNING
    finally:
        client.cancel()
        client.get_job_execution_result(60)


def test_web_ui_files_need_no_token_but_everything_else_does(job: JobClient) -> None:
    entry = JobRegistry().find(job.get_job_id())
    assert entry is not None
    jid, url = job.get_job_id(), entry.endpoint
    for name, kind in (("index.html", "text/html"), ("app.js", "text/javascript")):
        with urllib.request.urlopen(f"{url}/web/{name}", timeout=10) as response:
            assert response.status == 200 and response.headers["Content-Type"].startswith(kind)
            assert "default-src 'self'" in response.headers["Content-Security-Policy"]
            assert jid.encode() not in response.read()  # no job data in the static files
    for path in ("/web/..%2Fendpoint.py", "/web/secret.json", f"/jobs/{jid}/config", "/metrics"):
        status, _ = http("GET", url + path, None)
        assert status == 401, path
    status, _ = http("GET", f"{url}/web/nope.js", entry.token)
    assert status == 404
    status, config = http("GET", f"{url}/jobs/{jid}/config", entry.token)
    assert status == 200 and config["jid"] == jid
    status, plan = http("GET", f"{url}/jobs/{jid}", entry.token)
    [_, consumer] = plan["plan"]["nodes"]
    assert consumer["inputs"][0]["ship_strategy"] == "HASH"
    status, exceptions = http("GET", f"{url}/jobs/{jid}/exceptions", entry.token)
    assert status == 200 and exceptions["root-exception"] is None
