"""Savepoint and stop requests: refused with the reason, started on the master's thread, a
stop ending the sources only after its savepoint completed, every future answered once; a
failed stop resumes the sources, a failed drained one fails the attempt."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

import pytest

from cairn.checkpoint.errors import CheckpointFailedError, SavepointRejectedError
from cairn.checkpoint.metadata import CheckpointMetadata, CompletedCheckpoint
from cairn.common.job_status import JobStatus
from cairn.deploy.savepoint_requests import SavepointRequests
from cairn.events import SavepointFormatType
from cairn.ids import CheckpointId, JobId


@dataclass
class Attempt:
    """The job master's side, recording what the requests did."""

    refused: str | None = None
    started: list[tuple[str, bool]] = field(default_factory=list)
    savepoints: list[Future[CompletedCheckpoint]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    formats: list[SavepointFormatType] = field(default_factory=list)
    drains: list[bool] = field(default_factory=list)

    def refusal(self) -> str | None:
        return self.refused

    def start(
        self,
        target_dir: str,
        terminate: bool,
        format_type: SavepointFormatType,
        drain: bool = False,
    ) -> Future[CompletedCheckpoint]:
        self.started.append((target_dir, terminate))
        self.formats.append(format_type)
        self.drains.append(drain)
        self.savepoints.append(Future())
        return self.savepoints[-1]

    def end_sources(self) -> None:
        self.calls.append("end sources")

    def resume_sources(self) -> None:
        self.calls.append("resume sources")

    def fail_drained(self, reason: str) -> None:
        self.calls.append(f"fail attempt: {reason}")


def completed(directory: str) -> CompletedCheckpoint:
    metadata = CheckpointMetadata(JobId("job"), CheckpointId(3), 0, 0, 128, is_savepoint=True)
    return CompletedCheckpoint(metadata, directory)


def test_a_savepoint_starts_on_run_and_resolves_to_its_directory() -> None:
    requests, attempt = SavepointRequests("job-1", None), Attempt()
    future = requests.trigger("/sp/a")
    assert attempt.started == [] and not future.done()  # only on the master's thread
    requests.run(attempt)
    assert attempt.started == [("/sp/a", False)]
    attempt.savepoints[0].set_result(completed("/sp/a"))
    assert future.result(timeout=0) == "/sp/a" and attempt.calls == []


def test_refusals_say_why() -> None:
    requests, attempt = SavepointRequests("job-1", None), Attempt(refused="job is RESTARTING")
    refused = requests.trigger("/sp/a")
    requests.run(attempt)
    with pytest.raises(SavepointRejectedError, match="job is RESTARTING"):
        refused.result(timeout=0)
    attempt.refused = None
    no_dir = requests.trigger(None)
    requests.run(attempt)
    with pytest.raises(SavepointRejectedError, match="no target directory given"):
        no_dir.result(timeout=0)
    assert attempt.started == []


def test_the_default_directory_is_new_under_the_configured_root() -> None:
    requests, attempt = SavepointRequests("abcdef123456", "file:///sp/"), Attempt()
    requests.trigger(None)
    requests.trigger(None)
    requests.run(attempt)
    first, second = (d for d, _ in attempt.started)
    assert first.startswith("file:///sp/savepoint-abcdef-") and first != second


def test_a_stop_ends_the_sources_after_its_savepoint_and_finishes_with_the_job() -> None:
    requests, attempt = SavepointRequests("job-1", None), Attempt()
    stop = requests.stop("/sp/stop")
    requests.run(attempt)
    assert attempt.started == [("/sp/stop", True)] and attempt.calls == []
    other = requests.trigger("/sp/b")  # a second request while stopping
    requests.run(attempt)
    with pytest.raises(SavepointRejectedError, match="stopping with a savepoint"):
        other.result(timeout=0)
    attempt.savepoints[0].set_result(completed("/sp/stop"))
    assert attempt.calls == ["end sources"]
    assert stop.savepoint.result(timeout=0) == "/sp/stop" and not stop.finished.done()
    requests.close(JobStatus.FINISHED)
    assert stop.finished.result(timeout=0) == "/sp/stop"


def test_a_failed_stop_resumes_the_sources_and_the_job_goes_on() -> None:
    requests, attempt = SavepointRequests("job-1", None), Attempt()
    stop = requests.stop("/sp/stop")
    requests.run(attempt)
    attempt.savepoints[0].set_exception(CheckpointFailedError(4, "CHECKPOINT_EXPIRED", "slow"))
    assert attempt.calls == ["resume sources"]
    for future in (stop.savepoint, stop.finished):
        with pytest.raises(CheckpointFailedError, match="CHECKPOINT_EXPIRED"):
            future.result(timeout=0)
    again = requests.stop("/sp/again")  # not stopping any more: a new stop may start
    requests.run(attempt)
    assert attempt.started[-1] == ("/sp/again", True) and not again.savepoint.done()


def test_a_drained_stop_asks_for_drain_and_ends_like_any_stop() -> None:
    requests, attempt = SavepointRequests("job-1", None), Attempt()
    requests.trigger("/sp/a")
    stop = requests.stop("/sp/final", drain=True)
    requests.run(attempt)
    assert attempt.started == [("/sp/a", False), ("/sp/final", True)]
    assert attempt.drains == [False, True], "only the stop drains"
    attempt.savepoints[1].set_result(completed("/sp/final"))
    assert attempt.calls == ["end sources"]
    requests.close(JobStatus.FINISHED)
    assert stop.finished.result(timeout=0) == "/sp/final"


def test_a_failed_drained_stop_fails_the_attempt_instead_of_resuming_the_sources() -> None:
    """The final watermark already went out: records read after a resume would all be late,
    so the attempt fails (and restarts from its latest checkpoint), as Flink's tasks do."""
    requests, attempt = SavepointRequests("job-1", None), Attempt()
    stop = requests.stop("/sp/final", drain=True)
    requests.run(attempt)
    attempt.savepoints[0].set_exception(CheckpointFailedError(4, "CHECKPOINT_EXPIRED", "slow"))
    [call] = attempt.calls
    assert call.startswith("fail attempt: stop with savepoint and drain failed")
    assert "CHECKPOINT_EXPIRED" in call and "restarts from its latest checkpoint" in call
    for future in (stop.savepoint, stop.finished):
        with pytest.raises(CheckpointFailedError, match="CHECKPOINT_EXPIRED"):
            future.result(timeout=0)


def test_requests_after_the_end_are_refused_with_the_final_status() -> None:
    requests, attempt = SavepointRequests("job-1", None), Attempt()
    queued = requests.trigger("/sp/a")  # never run: the job ended first
    requests.close(JobStatus.CANCELED)
    late = requests.stop("/sp/b")
    for future in (queued, late.savepoint, late.finished):
        with pytest.raises(SavepointRejectedError, match="is CANCELED, not RUNNING"):
            future.result(timeout=0)
    assert attempt.started == []


def test_the_format_type_is_forwarded_canonical_by_default() -> None:
    attempt, requests = Attempt(), SavepointRequests("job", "/sp")
    requests.trigger("/sp/a")
    requests.trigger("/sp/b", SavepointFormatType.NATIVE)
    requests.run(attempt)
    requests.stop("/sp/c", SavepointFormatType.NATIVE)
    requests.run(attempt)
    assert attempt.formats == [
        SavepointFormatType.CANONICAL,
        SavepointFormatType.NATIVE,
        SavepointFormatType.NATIVE,
    ]
