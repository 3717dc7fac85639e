"""Finished jobs outlive their driver: a job runs to its end in another Python process (the
in-process executor, no Spark), which then exits; this process's control endpoint lists it
from the job archive in ``/jobs/overview`` and serves its final views (record counts, the
checkpoints, the failure), and ``cairn list --all`` (README's line, a subprocess) shows it
with its final state, end time and counts. A corrupt archive beside it is skipped."""

from __future__ import annotations

import logging
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cairn.common.exceptions import ConfigurationError
from cairn.common.job_status import JobStatus
from cairn.rest.archive import JobArchive, default_archive_dir
from cairn.rest.registry import JobEntry, JobRegistry
from tests.integration._elsewhere_job import RECORDS, run_elsewhere
from tests.integration._readme import cairn_argv, readme_line, subprocess_env
from tests.integration.jobs import sequence_job
from tests.integration.rest_calls import get

pytestmark = pytest.mark.usefixtures("registry_dir")

LIST_ALL = "cairn list --all"


@contextmanager
def serving(tmp_path: Path) -> Iterator[JobEntry]:
    """A running job of this process: its endpoint's registry entry."""
    env = sequence_job(
        {"cairn.executor": "inprocess"},
        str(tmp_path / "here"),
        records=10_000_000,
        keys=10,
        rate=2_000,
    )
    client = env.execute_async("here")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    entry = JobRegistry().find(client.get_job_id())
    assert entry is not None
    try:
        yield entry
    finally:
        client.cancel()
        client.get_job_execution_result(60)


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[JobEntry]:
    with serving(tmp_path) as entry:
        yield entry


def list_all(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cairn_argv(readme_line(LIST_ALL)),
        env=subprocess_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_job_finished_in_another_process_is_listed_from_its_archive(
    tmp_path: Path, registry_dir: str
) -> None:
    jid, state = run_elsewhere(tmp_path, fail_at=-1)
    assert state == "FINISHED"
    listing = list_all(tmp_path)  # no running job: only the archive
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0] == "No running jobs."
    [row] = [i for i, line in enumerate(lines) if f" : {jid} : elsewhere-job (FINISHED)" in line]
    ended = lines[row + 1]
    assert re.match(r"^    ended \d\d\.\d\d\.\d{4} \d\d:\d\d:\d\d; records in/out: ", ended)
    counts = f"Collection Source {RECORDS}/{RECORDS}, Map -> Sink {RECORDS}/{RECORDS}"
    # Then the CPU its workers used, if they ran long enough to report it (about a second).
    assert re.search(f"; records in/out: {counts}(; cpu [0-9.]+ s, .+ us/rec .+)?$", ended), ended

    with serving(tmp_path) as entry:
        status, overview = get(entry, "/jobs/overview")
        assert status == 200
        assert overview["jobs"][0]["jid"] == entry.job_id
        rows = {r["jid"]: r for r in overview["jobs"]}
        archived = rows[jid]
        assert archived["state"] == "FINISHED" and archived["archived"] is True
        assert archived["name"] == "elsewhere-job" and archived["tasks"]["total"] == 3
        assert archived["end-time"] >= archived["start-time"] > 0
        assert "archived" not in rows[entry.job_id]
        status, details = get(entry, f"/jobs/{jid}")
        assert status == 200 and details["state"] == "FINISHED"
        read = [(v["name"], v["metrics"]["read-records"]) for v in details["vertices"]]
        assert read == [("Collection Source", RECORDS), ("Map -> Sink", RECORDS)]
        status, checkpoints = get(entry, f"/jobs/{jid}/checkpoints")
        assert status == 200 and "counts" in checkpoints
        status, jobs = get(entry, "/jobs")
        assert {"id": jid, "status": "FINISHED"} in jobs["jobs"]
        # The archive is behind the token like everything else; commands do not reach it.
        assert get(entry, f"/jobs/{jid}", token=None)[0] == 401
        req = urllib.request.Request(f"{entry.endpoint}/jobs/{jid}?mode=cancel", method="PATCH")
        req.add_header("Authorization", f"Bearer {entry.token}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 404
        # Not archived paths of an archived job are 404 too.
        assert get(entry, f"/jobs/{jid}/doctor")[0] == 404
    # The job of this process, cancelled on leaving, is archived too.
    cancelled = JobArchive(default_archive_dir(registry_dir)).get(entry.job_id)
    assert cancelled is not None and cancelled.state == "CANCELED"


def test_a_failed_job_of_another_process_shows_its_cause(
    tmp_path: Path, registry_dir: str, endpoint: JobEntry
) -> None:
    jid, state = run_elsewhere(tmp_path, fail_at=1_500)
    assert state == "FAILED"
    bad = Path(default_archive_dir(registry_dir)) / ("0" * 32 + ".json")
    bad.write_text('{"archive": [')  # a corrupt archive beside it
    status, overview = get(endpoint, "/jobs/overview")
    assert status == 200
    [row] = [r for r in overview["jobs"] if r["jid"] == jid]
    assert row["state"] == "FAILED" and row["archived"] is True
    assert row["end-time"] >= row["start-time"]
    status, exceptions = get(endpoint, f"/jobs/{jid}/exceptions")
    assert status == 200 and "ValueError: record 1500 is bad" in exceptions["root-exception"]
    assert get(endpoint, f"/jobs/{'0' * 32}")[0] == 404
    listing = list_all(tmp_path)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert re.search(f" : {endpoint.job_id} : here \\(RUNNING\\) .* rec/s .* http", lines[1])
    [at] = [i for i, line in enumerate(lines) if f" : {jid} : elsewhere-failing (FAILED)" in line]
    assert lines[at + 1].startswith("    ended ")
    assert "ValueError: record 1500 is bad" in lines[at + 2] and lines[at + 2].startswith(
        "    cause: "
    )
    assert str(bad) in listing.stderr and "skipping" in listing.stderr


def test_the_configured_archive_url_and_retention_are_used(tmp_path: Path) -> None:
    """``jobmanager.archive.fs.dir`` as an fsspec URL (``memory://``: no local file) and
    ``historyserver.archive.retained-jobs: 1``: the second job's archive replaces the first."""
    url = f"memory://cairn-archive-{tmp_path.name}"
    conf = {
        "cairn.executor": "inprocess",
        "jobmanager.archive.fs.dir": url,
        "historyserver.archive.retained-jobs": "1",
    }
    ids = []
    for name in ("first", "second"):
        env = sequence_job(conf, str(tmp_path / name), records=500, keys=5, rate=None)
        client = env.execute_async(name)
        client.get_job_execution_result(60)
        ids.append(client.get_job_id())
    [kept] = JobArchive(url).jobs()
    assert kept.job_id == ids[1] and kept.state == "FINISHED"
    assert kept.row["name"] == "second"
    assert not (Path(default_archive_dir(JobRegistry().directory))).exists()
    with pytest.raises(ConfigurationError, match="retained-jobs"):
        sequence_job({**conf, "historyserver.archive.retained-jobs": "0"}, "x", records=1, keys=1)


def test_a_job_whose_archive_cannot_be_written_still_finishes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # the archive directory would have to be inside a file
    conf = {"cairn.executor": "inprocess", "jobmanager.archive.fs.dir": str(blocker / "archive")}
    env = sequence_job(conf, str(tmp_path / "out"), records=500, keys=5, rate=None)
    with caplog.at_level(logging.WARNING, logger="cairn.rest.archive"):
        client = env.execute_async("unarchivable")
        client.get_job_execution_result(60)
    assert client.get_job_status() is JobStatus.FINISHED
    [warning] = [r.getMessage() for r in caplog.records if r.name == "cairn.rest.archive"]
    assert f"job {client.get_job_id()}: could not archive it in {blocker}/archive" in warning
