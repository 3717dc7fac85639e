"""Savepoint and stop-with-savepoint requests of a running job: accepted on any thread
(the control endpoint's, the user's), decided and started on the job master's thread.

Invariant: every request's future is answered exactly once: with the savepoint's directory,
with the reason it failed (``CheckpointFailedError``, ``SavepointTargetExistsError``), or with
why none could start (``SavepointRejectedError``: not running, checkpointing disabled,
finishing, another stop in progress, no directory, the job ended). A stop ends the sources
only after its savepoint completed (and was announced, so sinks committed it); if it failed,
the sources go on and so does the job, unless it drained: its final watermark already went
out, so the attempt fails (and restarts from its latest checkpoint), as in Flink.
"""

from __future__ import annotations

import logging
import queue
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from cairn.checkpoint.errors import SavepointRejectedError
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.common.job_status import JobStatus
from cairn.events import SavepointFormatType
from cairn.ids import JobId

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StopWithSavepoint:
    """The two moments of a stop-with-savepoint: ``savepoint`` resolves to its directory
    when it completed (and the sources were told to end), ``finished`` when the job then
    ended FINISHED."""

    savepoint: Future[str]
    finished: Future[str]


class SavepointControl(Protocol):
    """What requests may do to the running attempt (the job master's side, its thread)."""

    def refusal(self) -> str | None:
        """Why no savepoint can start now (not running, ...), or None."""
        ...

    def start(
        self,
        target_dir: str,
        terminate: bool,
        format_type: SavepointFormatType,
        drain: bool = False,
    ) -> Future[CompletedCheckpoint]: ...

    def end_sources(self) -> None:
        """A stop's savepoint completed: end the sources (the job then finishes)."""
        ...

    def resume_sources(self) -> None:
        """A stop's savepoint failed: the suspended sources go on."""
        ...

    def fail_drained(self, reason: str) -> None:
        """A drained stop's savepoint failed: the sources sent the final watermark, so the
        job cannot go on as it was; fail the attempt (the restart strategy decides)."""
        ...


_Start = Callable[[SavepointControl], Future[str]]


class SavepointRequests:
    """The request queue of job ``job_id``; ``savepoint_dir`` is the default root of
    savepoints (``execution.checkpointing.savepoint-dir``), if any."""

    def __init__(self, job_id: JobId, savepoint_dir: str | None) -> None:
        self._job_id = job_id
        self._savepoint_dir = savepoint_dir
        self._queue: queue.SimpleQueue[tuple[_Start, Future[str]]] = queue.SimpleQueue()
        self._stopping = False
        self._stopped: tuple[Future[str], str] | None = None  # answered when the job ends
        self._ended: JobStatus | None = None

    # --- any thread ----------------------------------------------------------------------

    def trigger(
        self,
        target_dir: str | None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        return self._submit(
            lambda control: self._start(control, target_dir, None, format_type, False)
        )

    def stop(
        self,
        target_dir: str | None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
        drain: bool = False,
    ) -> StopWithSavepoint:
        """Stop with a savepoint; ``drain``: the sources send the final watermark first."""
        finished: Future[str] = Future()
        savepoint = self._submit(
            lambda control: self._start(control, target_dir, finished, format_type, drain)
        )

        def failed(f: Future[str]) -> None:
            error = f.exception()
            if error is not None:
                finished.set_exception(error)

        savepoint.add_done_callback(failed)
        return StopWithSavepoint(savepoint, finished)

    def _submit(self, start: _Start) -> Future[str]:
        result: Future[str] = Future()
        self._queue.put((start, result))
        if self._ended is not None:  # (also if it ended while this was queued)
            self._reject_queued()
        return result

    # --- the job master's thread ---------------------------------------------------------

    def run(self, control: SavepointControl) -> None:
        """Start (or refuse) every queued request."""
        while True:
            try:
                start, result = self._queue.get_nowait()
            except queue.Empty:
                return
            try:
                _forward(start(control), result)
            except Exception as e:
                result.set_exception(e)

    def close(self, status: JobStatus) -> None:
        """The job ended with ``status``: answer the stop that ended it and refuse the rest."""
        self._ended = status
        if self._stopped is not None:
            (finished, directory), self._stopped = self._stopped, None
            if status is JobStatus.FINISHED:
                finished.set_result(directory)
            else:
                finished.set_exception(
                    SavepointRejectedError(
                        f"job {self._job_id} ended {status.name} after its savepoint at "
                        f"{directory} completed"
                    )
                )
        self._reject_queued()

    def _reject_queued(self) -> None:
        status = self._ended.name if self._ended is not None else "ended"
        while True:
            try:
                _start, result = self._queue.get_nowait()
            except queue.Empty:
                return
            result.set_exception(
                SavepointRejectedError(
                    f"job {self._job_id} is {status}, not RUNNING: no savepoint can be taken"
                )
            )

    def _start(
        self,
        control: SavepointControl,
        target: str | None,
        stop: Future[str] | None,
        format_type: SavepointFormatType,
        drain: bool,
    ) -> Future[str]:
        refusal = control.refusal()
        if refusal is None and self._stopping:
            refusal = f"job {self._job_id} is stopping with a savepoint"
        if refusal is not None:
            raise SavepointRejectedError(refusal)
        directory = target or self._default_dir()
        what = "savepoint" if stop is None else "stop with savepoint"
        log.info(
            "job %s: %s (%s) to %s",
            self._job_id,
            what + (" and drain" if drain else ""),
            format_type.name,
            directory,
        )
        savepoint = control.start(directory, stop is not None, format_type, drain)
        path: Future[str] = Future()
        if stop is None:
            savepoint.add_done_callback(lambda f: _forward_path(f, path))
        else:
            self._stopping = True
            savepoint.add_done_callback(lambda f: self._stop_done(control, f, path, stop, drain))
        return path

    def _default_dir(self) -> str:
        if self._savepoint_dir is None:
            raise SavepointRejectedError(
                "no target directory given and no default one configured "
                "(execution.checkpointing.savepoint-dir, or state.savepoints.dir)"
            )
        name = f"savepoint-{self._job_id[:6]}-{uuid.uuid4().hex[:12]}"
        return f"{self._savepoint_dir.rstrip('/')}/{name}"

    def _stop_done(
        self,
        control: SavepointControl,
        done: Future[CompletedCheckpoint],
        path: Future[str],
        stop: Future[str],
        drain: bool,
    ) -> None:
        error = done.exception()
        if error is not None:
            self._stopping = False
            if drain:
                log.warning("job %s: stop with savepoint and drain failed: %s", self._job_id, error)
                control.fail_drained(
                    f"stop with savepoint and drain failed ({error}); the sources had sent the "
                    "final watermark, so the attempt fails: the job restarts from its latest "
                    "checkpoint if its restart strategy allows"
                )
            else:
                log.warning(
                    "job %s: stop with savepoint failed, the job goes on: %s", self._job_id, error
                )
                control.resume_sources()
            path.set_exception(error)
            return
        directory = done.result().directory
        self._stopped = (stop, directory)
        log.info("job %s: savepoint at %s completed; ending the sources", self._job_id, directory)
        control.end_sources()
        path.set_result(directory)


def _forward(source: Future[str], target: Future[str]) -> None:
    def done(f: Future[str]) -> None:
        error = f.exception()
        if error is not None:
            target.set_exception(error)
        else:
            target.set_result(f.result())

    source.add_done_callback(done)


def _forward_path(source: Future[CompletedCheckpoint], target: Future[str]) -> None:
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result().directory)
