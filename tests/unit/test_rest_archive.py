"""The job archive (``cairn.rest.archive``) on real files, and the precedence of the jobs an
endpoint lists (``cairn.rest.job_history``): whole files only (a reader racing the writer
never sees a partial one), private modes, retention across two writers, bad files skipped
with a warning naming them, a failed write reported but never raised, and an archived job
listed only when no live source knows it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from cairn.rest.archive import ArchivedJob, JobArchive, decode, default_archive_dir, encode
from cairn.rest.driver_jobs import DRIVER_JOBS, FinishedJob
from cairn.rest.job_history import JobHistory
from cairn.rest.registry import JobEntry, JobRegistry, process_start_time
from cairn.rest.views import JobFacts, VertexFacts


def job(jid: str, end_ms: int, state: str = "FINISHED", pad: int = 0) -> ArchivedJob:
    row = {"jid": jid, "name": f"job {jid}", "state": state, "start-time": 1, "end-time": end_ms}
    details = {"jid": jid, "state": state, "vertices": [], "pad": "x" * pad}
    return ArchivedJob.of(row, details, {"checkpoints": {"counts": {"completed": 3}}})


def test_an_archive_is_one_private_file_in_flinks_layout(tmp_path: Path) -> None:
    archive = JobArchive(str(tmp_path / "a" / "archive"))
    archive.write(job("j1", 10))
    assert os.listdir(tmp_path / "a" / "archive") == ["j1.1.json"]  # no temporary file left
    path = tmp_path / "a" / "archive" / "j1.1.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a" / "archive").stat().st_mode) == 0o700
    raw = json.loads(path.read_text())
    paths = [entry["path"] for entry in raw["archive"]]
    assert paths == ["/jobs/overview", "/jobs/j1", "/jobs/j1/checkpoints"]
    assert json.loads(raw["archive"][0]["json"])["jobs"][0]["state"] == "FINISHED"
    # Another reader (another process) sees it, bodies by path.
    other = JobArchive(str(tmp_path / "a" / "archive"))
    found = other.get("j1")
    assert found is not None and found.body("/jobs/j1/checkpoints") == {"counts": {"completed": 3}}
    assert [j.job_id for j in other.jobs()] == ["j1"]


def test_an_archive_appears_only_whole_by_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers list ``*.json`` only; the writer fills a temporary file and renames it, so
    whenever ``<id>.<start>.json`` exists it is complete (watched at every rename)."""
    directory = tmp_path / "archive"
    renames: list[str] = []
    real_replace = os.replace

    def watched(src: str, dst: str) -> None:
        assert not os.path.basename(src).endswith(".json")  # not listed while written
        assert not os.path.exists(dst)
        name = os.path.basename(dst)
        decode(name.split(".")[0], Path(src).read_bytes())  # whole before renamed
        real_replace(src, dst)
        renames.append(name)

    monkeypatch.setattr(os, "replace", watched)
    writer = JobArchive(str(directory), retained=-1)
    for i in range(3):
        writer.write(job(f"j{i}", i, pad=1_000_000))
    assert renames == ["j0.1.json", "j1.1.json", "j2.1.json"]
    assert sorted(os.listdir(directory)) == renames  # no temporary file left


def test_each_run_of_a_job_keeps_its_own_archive(tmp_path: Path) -> None:
    """A job keeps its id across reruns: a rerun's archive never replaces the run before
    it; the job's path serves its latest run, the listing every run; an archive in the
    former ``<id>.json`` layout is still read."""
    (tmp_path / "j.json").write_bytes(encode(job("j", 5)))  # written before runs had names
    archive = JobArchive(str(tmp_path), retained=-1)
    for start, state in [(10, "FAILED"), (20, "FINISHED")]:
        row = {"jid": "j", "state": state, "start-time": start, "end-time": start + 5}
        archive.write(ArchivedJob.of(row, {"jid": "j", "state": state}))
    assert sorted(os.listdir(tmp_path)) == ["j.10.json", "j.20.json", "j.json"]
    assert [(a.state, a.end_ms) for a in archive.jobs()] == [
        ("FINISHED", 25),
        ("FAILED", 15),
        ("FINISHED", 5),
    ]
    latest = JobArchive(str(tmp_path)).get("j")  # a new reader: listed on demand
    assert latest is not None and latest.body("/jobs/j") == {"jid": "j", "state": "FINISHED"}


def test_the_writers_keep_the_newest_archives(tmp_path: Path) -> None:
    first = JobArchive(str(tmp_path), retained=3)
    second = JobArchive(str(tmp_path), retained=3)  # another driver, same directory
    for i, writer in enumerate([first, second, first, second, first]):
        writer.write(job(f"j{i}", end_ms=100 + i))
    assert sorted(os.listdir(tmp_path)) == ["j2.1.json", "j3.1.json", "j4.1.json"]
    assert [j.job_id for j in JobArchive(str(tmp_path)).jobs()] == ["j4", "j3", "j2"]
    assert first.get("j0") is None
    with pytest.raises(ValueError, match="retained-jobs"):
        JobArchive(str(tmp_path), retained=0)


def test_unreadable_archives_are_skipped_with_a_warning_naming_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    JobArchive(str(tmp_path)).write(job("good", 5))
    (tmp_path / "cut.json").write_text('{"archive": [{"path": "/jobs/overview", "js')
    (tmp_path / "other.json").write_bytes(encode(job("else", 6)))  # another job's archive
    (tmp_path / "notes.txt").write_text("not an archive")
    (tmp_path / "subdir.json").mkdir()
    reader = JobArchive(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="cairn.rest.archive"):
        assert [j.job_id for j in reader.jobs()] == ["good"]
        assert reader.get("cut") is None and reader.get("../good") is None
    warned = [r.getMessage() for r in caplog.records]
    assert any(str(tmp_path / "cut.json") in m for m in warned), warned
    assert any(str(tmp_path / "other.json") in m and "job else, not other" in m for m in warned)
    assert len(warned) == 2  # once per file, not at every reading
    caplog.clear()
    reader._at = float("-inf")  # the next listing (after the TTL) does not warn again
    assert [j.job_id for j in reader.jobs()] == ["good"] and not caplog.records


def test_a_failed_write_is_a_warning_and_leaves_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if os.getuid() == 0:
        blocked = tmp_path / "file"  # root writes anywhere: a file where the directory goes
        blocked.write_text("")
        directory = blocked / "archive"
    else:
        directory = tmp_path / "archive"
        directory.mkdir(mode=0o500)
    archive = JobArchive(str(directory))
    with caplog.at_level(logging.WARNING, logger="cairn.rest.archive"):
        assert archive.archive(job("j1", 1)) is False
    assert "job j1: could not archive it in" in caplog.text
    assert archive.jobs() == []
    if directory.is_dir():
        assert os.listdir(directory) == []


def facts(jid: str, state: str, end_ms: int = -1) -> JobFacts:
    return JobFacts(jid, f"job {jid}", state, 1, end_ms, 50, (VertexFacts(0, "v", 2, 8),), False)


def test_an_archived_job_is_listed_only_when_nothing_live_knows_it(tmp_path: Path) -> None:
    registry = JobRegistry(str(tmp_path / "registry"))
    archive = JobArchive(default_archive_dir(registry.directory))
    # Another driver's running job (its endpoint does not answer: listed UNKNOWN).
    me = os.getpid()
    registry.register(
        JobEntry("p-machine", "m", "http://127.0.0.1:9", 1, me, process_start_time(me) or 0.0)
    )
    # This driver's finished job, whose archive says otherwise: this driver's view wins.
    DRIVER_JOBS.finished(FinishedJob(facts("p-driver", "CANCELED", 7), {"jid": "p-driver"}))
    for jid in ["p-own", "p-driver", "p-machine", "p-archived"]:
        archive.write(job(jid, 9, state="FAILED"))
    history = JobHistory("p-own", registry, archive)
    own = facts("p-own", "RUNNING")
    overview: dict[str, Any] = asyncio.run(history.overview(own))
    rows = [r for r in overview["jobs"] if r["jid"].startswith("p-")]
    states = [(r["jid"], r["state"], r.get("archived", False)) for r in rows]
    assert states == [
        ("p-own", "RUNNING", False),
        ("p-driver", "CANCELED", False),
        ("p-machine", "UNKNOWN", False),
        ("p-archived", "FAILED", True),
    ]
    jobs = asyncio.run(history.jobs(own))["jobs"]
    assert {"id": "p-archived", "status": "FAILED"} in jobs
    assert len([j for j in jobs if j["id"].startswith("p-")]) == 4
    registry.unregister("p-machine")
