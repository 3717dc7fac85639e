"""The client of a submitted job (PyFlink's ``JobClient``).

Invariant: the client only observes and commands the job master; results of
``execute_and_collect`` are queued here in the order their checkpoints completed.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

from cairn.common.exceptions import JobExecutionException
from cairn.common.job_execution_result import JobExecutionResult
from cairn.common.job_status import JobStatus
from cairn.deploy.job_master import JobMaster
from cairn.deploy.protocol import CollectedResults
from cairn.ids import JobId

_END = object()


class JobExecutionError(JobExecutionException):
    """The job failed (restart strategy exhausted); the cause carries the remote traceback.

    A ``JobExecutionException`` (the public API's name), so ``except JobExecutionException``
    around ``env.execute()`` catches it.
    """


class JobClient:
    def __init__(self, master: JobMaster) -> None:
        self._master = master
        self._results: dict[int, queue.Queue[Any]] = {}
        self._results_lock = threading.Lock()
        master._on_collect = self._on_collect
        self._thread = threading.Thread(target=self._run, name=f"cairn-job-{master.job_id}",
                                        daemon=True)

    def _start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._master.run()
        finally:
            with self._results_lock:
                for q in self._results.values():
                    q.put(_END)

    def _queue(self, transformation_id: int) -> queue.Queue[Any]:
        with self._results_lock:
            q = self._results.get(transformation_id)
            if q is None:
                q = self._results[transformation_id] = queue.Queue()
                if not self._thread.is_alive() and self._master.end_ms is not None:
                    q.put(_END)
            return q

    def _on_collect(self, msg: CollectedResults) -> None:
        q = self._queue(msg.transformation_id)
        for r in msg.records:
            q.put(r)

    # ------------------------------------------------------------------ PyFlink API

    def get_job_id(self) -> str:
        return self._master.job_id

    def get_job_status(self) -> JobStatus:
        return self._master.status

    def cancel(self) -> None:
        self._master.cancel()

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        """Wait for the job to end; raise ``JobExecutionError`` if it failed."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job {self.get_job_id()} still running after {timeout} s")
        m = self._master
        if m.status is JobStatus.FAILED:
            raise JobExecutionError(f"Job {m.job_id} failed: {m.error}", m.job_id) from m.error
        runtime = (m.end_ms or int(time.time() * 1000)) - m.start_ms
        return JobExecutionResult(JobId(m.job_id), runtime, {})

    def collect_iterator(self, transformation_id: int) -> Iterator[Any]:
        q = self._queue(transformation_id)
        while True:
            item = q.get()
            if item is _END:
                # Items delivered just before the end are already in order before _END.
                m = self._master
                if m.status is JobStatus.FAILED:
                    message = f"Job {m.job_id} failed: {m.error}"
                    raise JobExecutionError(message, m.job_id) from m.error
                return
            yield item

    # ------------------------------------------------------------------ Cairn extensions

    @property
    def job_master(self) -> JobMaster:
        return self._master

    def get_checkpoint_statistics(self) -> Any:
        coordinator = self._master.coordinator
        return coordinator.stats if coordinator is not None else None

    def worker_pids(self) -> dict[int, int]:
        return dict(self._master.worker_pids)

    def wait_for_status(self, status: JobStatus, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._master.status is status:
                return True
            time.sleep(0.02)
        return False
