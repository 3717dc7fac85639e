"""The client of a submitted streaming job (PyFlink's ``JobClient``, the protocol of
``cairn.common.job_client``, over a job master).

Invariant: the client only observes (through the job master's immutable ``view``) and
commands the job master; results of ``execute_and_collect`` are queued here in the order
their checkpoints completed.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

from cairn.checkpoint.stats import CheckpointStatsSnapshot
from cairn.common.exceptions import JobExecutionException
from cairn.common.job_client import JobClient as JobProtocol
from cairn.common.job_execution_result import JobExecutionResult
from cairn.common.job_status import JobStatus
from cairn.deploy.job_master import JobMaster
from cairn.events import SavepointFormatType
from cairn.runtime.reports import CollectedResults

_END = object()


class JobExecutionError(JobExecutionException):
    """The job failed (restart strategy exhausted); the cause carries the remote traceback.

    A ``JobExecutionException`` (the public API's name), so ``except JobExecutionException``
    around ``env.execute()`` catches it. ``restarts``: how many times the job restarted before
    it failed; ``failure_reason``: why it was not restarted again (the restart strategy's
    words).
    """

    restarts: int = 0
    failure_reason: str | None = None


class StreamingJobClient:
    """A ``JobClient`` of a streaming job: :meth:`start` runs ``master`` on its own thread."""

    def __init__(self, master: JobMaster) -> None:
        self._master = master
        self._results: dict[int, queue.Queue[Any]] = {}
        self._results_lock = threading.Lock()
        master.deliver_collected_to(self._on_collect)
        self._thread = threading.Thread(
            target=self._run, name=f"cairn-job-{master.job_id}", daemon=True
        )

    def start(self) -> None:
        """Run the job master on the client's thread (once)."""
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
                if not self._thread.is_alive() and self._master.view.ended:
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
        return self._master.view.status

    def cancel(self) -> None:
        self._master.cancel()

    def trigger_savepoint(
        self,
        savepoint_directory: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        """Take an aligned savepoint of the running job (PyFlink's ``trigger_savepoint``);
        ``.result()`` gives its directory, which can be moved and restored from
        (``execution.savepoint.path``, ``cairn run -s``).

        ``savepoint_directory`` is the savepoint's own new (or empty) directory; None: a new
        ``savepoint-<job>-<random>`` under ``execution.checkpointing.savepoint-dir``.
        ``format_type`` (Flink's ``SavepointFormatType``): ``CANONICAL`` restores into any
        state backend; ``NATIVE`` keeps the backend's own files (RocksDB: only into RocksDB).
        ``.result()`` raises ``SavepointRejectedError`` (job not running, stopping, without
        checkpointing), ``SavepointTargetExistsError`` or ``CheckpointFailedError`` (the
        reason); the job runs on either way.

        Example::

            client = env.execute_async("job")
            path = client.trigger_savepoint("/savepoints/before-upgrade").result(timeout=60)
        """
        return self._master.trigger_savepoint(savepoint_directory, format_type)

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        """Stop the job with a savepoint (PyFlink's ``stop_with_savepoint``): sources emit
        nothing after its barrier, sinks commit it, and the job ends FINISHED; ``.result()``
        gives the savepoint's directory once it has. If the savepoint fails the job runs on.

        ``advance_to_end_of_event_time`` (Flink's ``--drain``): the sources first send the
        final watermark (``MAX_WATERMARK``), so every event-time timer and window fires and
        its output is in the savepoint (and committed) before the job ends. Use it when the
        job is ended for good: a job restored from a drained savepoint has those timers and
        windows already fired. If a drained stop fails, the job restarts from its latest
        checkpoint (its restart strategy permitting), as event time cannot be taken back.

        Example::

            path = client.stop_with_savepoint(False, "/savepoints/v1").result(timeout=120)
            assert client.get_job_status() is JobStatus.FINISHED
            # the last run of a job: every open window fires first
            client.stop_with_savepoint(True, "/savepoints/final").result(timeout=120)
        """
        stop = self._master.stop_with_savepoint(
            savepoint_directory, format_type, drain=advance_to_end_of_event_time
        )
        return stop.finished

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        """Wait for the job to end; raise ``JobExecutionError`` if it failed."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job {self.get_job_id()} still running after {timeout} s")
        m = self._master.view
        if m.status is JobStatus.FAILED:
            error = JobExecutionError(f"Job {m.job_id} failed: {m.error}", m.job_id)
            error.restarts, error.failure_reason = m.restarts, m.failure_reason
            raise error from m.error
        if m.status is JobStatus.SUSPENDED:  # another driver leads the job now
            raise JobExecutionError(f"Job {m.job_id} suspended: {m.error}", m.job_id) from m.error
        runtime = m.running_for_ms(int(time.time() * 1000))
        return JobExecutionResult(m.job_id, runtime, {})

    def collect_iterator(self, transformation_id: int) -> Iterator[Any]:
        q = self._queue(transformation_id)
        while True:
            item = q.get()
            if item is _END:
                # Items delivered just before the end are already in order before _END.
                m = self._master.view
                if m.status is JobStatus.FAILED:
                    message = f"Job {m.job_id} failed: {m.error}"
                    raise JobExecutionError(message, m.job_id) from m.error
                return
            yield item

    # ------------------------------------------------------------------ Cairn extensions

    @property
    def job_master(self) -> JobMaster:
        return self._master

    def get_checkpoint_statistics(self) -> CheckpointStatsSnapshot | None:
        """The job's checkpoint statistics now (Flink's ``/jobs/:id/checkpoints``), or None.

        None only when checkpointing is disabled. The snapshot is immutable: call again for
        newer numbers. It has the counts, the recent history (newest first; each checkpoint
        with status, trigger time, end-to-end duration, state and checkpointed size,
        processed and persisted in-flight bytes, the unaligned flag, the failure reason, and
        per-subtask rows via ``subtask_details()``), the latest completed, failed, savepoint
        and restored checkpoints, and min/avg/p50/p90/p99/max summaries over the completed
        checkpoints (``summary.end_to_end_duration``, ``.state_size``,
        ``.checkpointed_size``, ``.processed_bytes``, ``.persisted_bytes``,
        ``.alignment_duration``, ``.start_delay``, ``.sync_duration``, ``.async_duration``).

        Example::

            client = env.execute_async("job")
            stats = client.get_checkpoint_statistics()
            if stats is not None and stats.latest_completed is not None:
                last = stats.latest_completed
                print(last.checkpoint_id, last.end_to_end_duration_ms, last.persisted_bytes,
                      stats.summary.alignment_duration.p99)
                for sub in last.subtask_details():
                    print(sub.task, sub.metrics.start_delay_ms, sub.metrics.sync_duration_ms)
                print(json.dumps(stats.to_dict()))   # Flink-shaped JSON
        """
        stats = self._master.view.checkpoint_stats
        return None if stats is None else stats.snapshot()

    def worker_pids(self) -> dict[int, int]:
        return dict(self._master.view.worker_pids)

    def wait_for_status(self, status: JobStatus, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._master.view.status is status:
                return True
            time.sleep(0.02)
        return False


def job_master_of(client: JobProtocol) -> JobMaster:
    """The job master behind ``client`` (tools that watch a streaming job run); TypeError
    for a BATCH job's client, which has none."""
    if not isinstance(client, StreamingJobClient):
        raise TypeError(f"{type(client).__name__} has no job master (a BATCH job's?)")
    return client.job_master


# The name tests and tools used before the protocol took it (``cairn.common.job_client``).
JobClient = StreamingJobClient
