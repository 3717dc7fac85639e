"""What savepoint requests may do to the job master's running attempt (``SavepointControl``
of ``savepoint_requests.py``), and the messages the job master posts to its own inbox.

Invariant: everything here runs on the job master's thread and touches only the attempt it
was made for: its workers get control messages of that attempt, and the messages it posts
(``Stopped``, ``FailAttempt``) carry that attempt's number, so a later attempt drops them.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.common.job_status import JobStatus
from cairn.deploy import control_messages as p
from cairn.deploy.control_server import ControlServer, Envelope
from cairn.events import SavepointFormatType
from cairn.ids import AttemptNumber, JobId


@dataclass(frozen=True)
class FailAttempt:
    """Fail the running attempt with ``reason`` (the restart strategy decides what next)."""

    reason: str


@dataclass(frozen=True)
class Stopped:
    """A stop-with-savepoint completed and its sinks were told to commit: the attempt ends
    FINISHED now, its tasks shut down without ending their input (with drain, the final
    watermark already went through before the savepoint's barrier)."""


class AttemptSavepointControl:
    """The ``SavepointControl`` of attempt ``attempt`` of job ``job_id``, whose checkpoints
    ``coordinator`` drives (``checkpointing``: periodic checkpoints are enabled); ``status``
    reads the job's status, ``finishing`` whether its sources have ended (a final checkpoint
    is under way)."""

    def __init__(
        self,
        job_id: JobId,
        coordinator: CheckpointCoordinator,
        checkpointing: bool,
        server: ControlServer,
        attempt: AttemptNumber,
        status: Callable[[], JobStatus],
        finishing: Callable[[], bool],
    ) -> None:
        self._job_id = job_id
        self._coordinator = coordinator
        self._checkpointing = checkpointing
        self._server = server
        self._attempt = attempt
        self._status = status
        self._finishing = finishing

    def refusal(self) -> str | None:
        job, status = self._job_id, self._status()
        if status is not JobStatus.RUNNING:
            return f"job {job} is {status.name}, not RUNNING: no savepoint can be taken"
        if not self._checkpointing:
            return (
                f"job {job} has checkpointing disabled; savepoints need it "
                "(env.enable_checkpointing(...) or execution.checkpointing.interval)"
            )
        if self._finishing():
            return f"job {job} is finishing: its sources have ended"
        return None

    def start(
        self,
        target_dir: str,
        terminate: bool,
        format_type: SavepointFormatType,
        drain: bool = False,
    ) -> Future[CompletedCheckpoint]:
        return self._coordinator.trigger_savepoint(target_dir, terminate, format_type, drain)

    def end_sources(self) -> None:
        """After a stop's savepoint (as in Flink): the tasks shut down without ending their
        input, so (without drain) no final watermark fires event-time timers or windows whose
        output the savepoint does not cover; the sinks already committed it (the completion
        notice went out first, and each worker takes control messages in order)."""
        self._coordinator.stop_periodic()
        self.post(Stopped())

    def resume_sources(self) -> None:
        self._server.broadcast(self._attempt, p.ResumeSources())

    def fail_drained(self, reason: str) -> None:
        """A drained stop's savepoint failed: event time is at its end in every task, so the
        job cannot go on from here; fail the attempt, as Flink fails the tasks of a failed
        stop-with-savepoint (their pre-committed output is never committed)."""
        self.post(FailAttempt(reason))

    def post(self, message: object) -> None:
        """Put ``message`` into the job master's inbox, as of this attempt."""
        self._server.inbox.put(Envelope(self._attempt, -1, message))
