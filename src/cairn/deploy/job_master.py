"""The job master: runs a job's attempts one after another, fails over, and publishes what
other threads may see of the job.

Invariants: exactly one attempt is live at a time — a new attempt is deployed only after the
previous one was torn down (``attempt_driver.py``: shut down, its workers disconnected);
after each attempt the job master gathers the facts, asks ``after_attempt.py`` what to do
and does it, so every restart restores from the latest completed (and verified) checkpoint
that no worker failed to restore (``restore_choice.py``), an attempt whose workers found its
restored state corrupt is not counted against the restart strategy, and the restart delay
counts from the failed attempt's end; the job's status changes only along
``lifecycle.JOB_STATUS_TRANSITIONS``, and a terminal status is set only after the checkpoint
coordinator applied its retention policy; everything that touches the coordinator runs on
the job master's thread (savepoint requests from other threads are started there,
``savepoint_requests.py``); other threads read the job only through its immutable ``view``
(``job_view.py``), and helpers reach the job master only through its ports
(``job_master_ports.py``); under high availability no attempt is deployed unless this driver
leads (``job_master_leadership.py``), and one that lost its leadership ends SUSPENDED.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.errors import CheckpointError, RestoreReadError
from cairn.checkpoint.ha.fence import LeadershipLost
from cairn.checkpoint.ha.leader import Leadership
from cairn.checkpoint.messages import TaskKey
from cairn.checkpoint.protocol import FallbackRule
from cairn.checkpoint.storage import CheckpointStorage
from cairn.common.job_status import JobStatus
from cairn.deploy import control_messages as p
from cairn.deploy.after_attempt import (
    AfterAttemptFacts,
    Cancel,
    DelayCancelled,
    Fail,
    Finish,
    NoSafeRestore,
    Restart,
    Step,
    StorageUnreadable,
    Suspend,
    decide_after_attempt,
)
from cairn.deploy.attempt_control import AttemptSavepointControl, FailAttempt
from cairn.deploy.attempt_driver import SUSPENDED, AttemptDriver, AttemptState
from cairn.deploy.committing_sinks import committing_sinks
from cairn.deploy.control_server import ControlServer, Envelope
from cairn.deploy.coordinator_gateway import CoordinatorGatewayOf
from cairn.deploy.execution_plan import ExecutionPlan
from cairn.deploy.executors import Executor
from cairn.deploy.initialization import JobInitialization
from cairn.deploy.job_master_leadership import lead
from cairn.deploy.job_master_ports import Listener
from cairn.deploy.job_view import CpuReports, JobView, MetricReports, shifted
from cairn.deploy.lifecycle import AttemptEnd, AttemptOutcome, transition
from cairn.deploy.restart_policy import RestartPolicy
from cairn.deploy.restore_choice import RestoreChoice
from cairn.deploy.savepoint_requests import SavepointRequests, StopWithSavepoint
from cairn.deploy.worker_cpu import WorkerCpu
from cairn.events import SavepointFormatType
from cairn.graph.job_graph import JobGraph
from cairn.ids import AttemptNumber, CheckpointId, JobId
from cairn.runtime.faults import driver_fault_hook, with_driver_pid
from cairn.settings import JobSettings

log = logging.getLogger(__name__)

_NO_REPORTS: MetricReports = (MappingProxyType({}), MappingProxyType({}))
_NO_CPU_REPORTS: CpuReports = (MappingProxyType({}), MappingProxyType({}))


class JobMaster:
    """Runs one job on the driver: ``run()`` (on the client's thread) returns when it ended.

    ``listeners`` are called as ``listener(event, payload)`` on the job master's thread:
    ``("status", JobStatus)`` on every status change, ``("running", attempt)`` when every
    worker of an attempt runs, ``("checkpoint", checkpoint_id)`` when a checkpoint completed,
    ``("restart", error)`` when a failed attempt is restarted.
    """

    def __init__(
        self,
        job_id: JobId,
        settings: JobSettings,
        graph: JobGraph,
        job_payload: bytes,
        executor: Executor,
        num_workers: int,
        secret: bytes,
        faults: tuple[Any, ...] = (),
        on_collect: Callable[[p.CollectedResults], None] | None = None,
        resume_from: Sequence[str] = (),
        first_attempt: int = 0,
        leadership: Leadership | None = None,
    ) -> None:
        self.job_id = job_id
        self.settings = settings
        self.graph = graph
        self.payload = job_payload
        self.executor = executor
        self.num_workers = num_workers
        self.secret = secret
        # Attempts of this run number from first_attempt (above an earlier run's of the job
        # id); a fault names its attempt relative to it; kill=driver faults name this pid.
        self._first_attempt = AttemptNumber(first_attempt)
        self.faults = with_driver_pid(faults, first_attempt)
        self.plan = ExecutionPlan(graph, num_workers)
        self._restore: p.RestoreInfo | None = None  # what the current attempt restores
        self._ended_at = 0.0  # time.monotonic() when the last attempt's outcome was known
        self._on_collect = on_collect
        self._seen_collect: set[tuple[int, int, int, int]] = set()
        self._cancel = threading.Event()
        self._server = ControlServer(
            executor.control_host,
            secret,
            settings.network.max_frame_size,
            settings.security.internal,
        )
        self._restart = RestartPolicy(settings.restart)
        cp = settings.checkpoint
        self.storage = CheckpointStorage(cp.storage_url, job_id, cp.storage_options, cp.signing_key)
        # The coordinator exists with or without periodic checkpoints: it finds restore
        # points and applies the retention policy; only triggering depends on this flag.
        self._checkpointing = cp.enabled
        self.leadership = leadership  # high availability: None without
        self.on_leading: Callable[[], None] = lambda: None  # launch's: plan the run now
        self.coordinator = self._make_coordinator()
        self.restores = RestoreChoice(job_id, settings, graph, self.coordinator, resume_from)
        self._state: AttemptState | None = None  # None until the first attempt is deployed
        # Everything other threads read of the job, swapped whole (``job_view.py``); the
        # first attempt is first_attempt.
        self._view = JobView(
            job_id,
            attempt=AttemptNumber(first_attempt - 1),
            start_ms=int(time.time() * 1000),
            checkpoint_stats=self.coordinator.stats if cp.enabled else None,
        )
        self.listeners: list[Listener] = []
        self._savepoints = SavepointRequests(job_id, cp.savepoint_dir)

    # ------------------------------------------------------------------ public API

    @property
    def view(self) -> JobView:
        """The job as of now, for any thread: an immutable snapshot (read it once)."""
        return self._view

    @property
    def control_address(self) -> tuple[str, int]:
        """Where the job master listens for its workers (fixed for its life)."""
        return self._server.address

    @property
    def status(self) -> JobStatus:
        """The job's status; it changes only along ``lifecycle.JOB_STATUS_TRANSITIONS``."""
        return self._view.status

    # One field of ``view`` each; a reader wanting several reads ``view`` once instead.

    @property
    def attempt(self) -> AttemptNumber:
        return self._view.attempt

    @property
    def restarts(self) -> int:
        return self._view.restarts

    @property
    def error(self) -> BaseException | None:
        return self._view.error

    @property
    def start_ms(self) -> int:
        return self._view.start_ms

    @property
    def end_ms(self) -> int | None:
        return self._view.end_ms

    @property
    def worker_pids(self) -> Mapping[int, int]:
        return self._view.worker_pids

    @property
    def metrics(self) -> Mapping[TaskKey, p.TaskMetrics]:
        return self._view.metrics

    @property
    def last_initialization(self) -> JobInitialization | None:
        """Where the last restore's time went (None until an attempt restored and ran)."""
        return self._view.last_initialization

    def deliver_collected_to(self, on_collect: Callable[[p.CollectedResults], None]) -> None:
        """Hand ``execute_and_collect``'s results to ``on_collect`` (before ``run``)."""
        self._on_collect = on_collect

    def cancel(self) -> None:
        self._cancel.set()

    def trigger_savepoint(
        self,
        target_dir: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    ) -> Future[str]:
        """Take an aligned savepoint while the job runs on; the future gives its directory.

        Thread-safe (started on the job master's thread). ``target_dir`` is the savepoint's
        own new (or empty) directory; None: a new one under
        ``execution.checkpointing.savepoint-dir``. See :mod:`cairn.deploy.savepoint_requests`.
        """
        return self._savepoints.trigger(target_dir, format_type)

    def stop_with_savepoint(
        self,
        target_dir: str | None = None,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
        drain: bool = False,
    ) -> StopWithSavepoint:
        """Stop with a savepoint: sources emit nothing after its barrier, sinks commit it,
        the sources end and the job ends FINISHED; if it fails, the job runs on. ``drain``:
        the sources first send the final watermark (every event-time timer fires before the
        savepoint); if a drained stop fails, the attempt fails (and restarts)."""
        return self._savepoints.stop(target_dir, format_type, drain)

    def run(self) -> None:
        try:
            if lead(self):  # high availability: stand by until this driver leads
                self._run()
        except LeadershipLost as exc:  # before the first attempt
            self._end(JobStatus.SUSPENDED, exc)
        except CheckpointError as exc:  # e.g. nothing usable to restore from: say what
            # INFO: execute() raises it with the same text (cairn run prints that line).
            log.info("job %s cannot start: %s", self.job_id, exc)
            self._crashed(exc)
        except BaseException as exc:  # never leave a client waiting forever
            log.exception("job master crashed")
            self._crashed(exc)
        finally:
            self._publish(end_ms=int(time.time() * 1000))
            self._server.close()
            self._savepoints.close(self.status)

    # ------------------------------------------------------------------ status

    def _publish(self, **changes: Any) -> None:
        """Swap in a new view with ``changes`` (only on the job master's thread)."""
        self._view = replace(self._view, **changes)

    def _set_status(self, status: JobStatus) -> None:
        self._publish(status=transition(self._view.status, status))
        log.debug("job %s is %s", self.job_id, status.name)
        self.emit("status", status)

    def _end(self, status: JobStatus, error: BaseException | None = None) -> None:
        """Apply the retention policy for the terminal ``status``, then enter it: whoever sees
        the job ended sees its checkpoint directories as the policy left them."""
        self._publish(error=error)
        self.coordinator.shutdown(status)
        if self.leadership is not None:  # record how the run ended, hand the lease over
            suspended = status is JobStatus.SUSPENDED
            self.leadership.finish(None if suspended else status.name)
        self._set_status(status)

    def adopt_run(
        self,
        resume_from: Sequence[str],
        first_attempt: int,
        first_id: int,
        inherited_from: int | None = None,
    ) -> None:
        """How this run starts (``deploy/job_runs.py``), before its first attempt: given to
        ``__init__`` too, except under high availability, where it is known once leading.
        ``inherited_from``: the first checkpoint id of the lost run it resumes."""
        self._first_attempt = AttemptNumber(first_attempt)
        self._publish(attempt=AttemptNumber(first_attempt - 1))
        self.restores.resume_from = tuple(resume_from)
        coordinator = self.coordinator
        if inherited_from is not None:
            coordinator.inherit_run(CheckpointId(inherited_from))
        coordinator.set_next_checkpoint_id(
            CheckpointId(max(first_id, coordinator.next_checkpoint_id))
        )

    def _crashed(self, exc: BaseException) -> None:
        if self.status.is_globally_terminal_state():  # the job had ended: keep its status
            log.error("job %s (%s) failed after it ended: %s", self.job_id, self.status.name, exc)
            return
        self._publish(error=exc)
        self._set_status(JobStatus.FAILED)

    # ------------------------------------------------------------------ main loop

    def _make_coordinator(self) -> CheckpointCoordinator:
        cp = self.settings.checkpoint
        expected = list(self.plan.all_tasks)
        sources = list(self.plan.source_tasks)
        parallelism = {
            node.uid: (node.parallelism, node.max_parallelism)
            for v in self.graph.vertices
            for node in v.operators
        }
        return CheckpointCoordinator(
            job_id=self.job_id,
            settings=cp,
            storage=self.storage,
            gateway=CoordinatorGatewayOf(self),  # as its AttemptPort
            expected_tasks=expected,
            source_tasks=sources,
            operator_parallelism=parallelism,
            fallback=FallbackRule(
                committing_sinks(self.graph), self.settings.allow_fallback_past_committed
            ),
            properties=self.settings.checkpoint_properties(),
            before_publish=driver_fault_hook(self.faults),
            fence=self.leadership,
        )

    def _run(self) -> None:
        restore = self.restores.initial()
        if self.leadership is not None and restore is not None:  # a next leader resumes it
            self.leadership.checkpoint_completed(restore.checkpoint_id, restore.checkpoint_dir)
        self._note_latest_checkpoint()
        self._set_status(JobStatus.INITIALIZING)
        step = self._next_attempt(restore)
        while True:  # gather the facts, decide (``after_attempt.py``), act
            facts = AfterAttemptFacts(restored=self._restore, now_ms=_now_ms())
            decision = decide_after_attempt(step, facts, self._restart)
            if not isinstance(decision, Restart):
                self._end_with(decision)
                return
            step = self._restart_after(decision)

    def _next_attempt(
        self, restore: p.RestoreInfo | None, unreadable: RestoreReadError | None = None
    ) -> Step:
        """Deploy the next attempt and return how it ended; deploy nothing if this driver
        lost its leadership meanwhile, or if the storage failed choosing ``restore``."""
        self._publish(attempt=AttemptNumber(self.attempt + 1))
        self._restore = None
        if self.leadership is not None and not self.leadership.holds():
            return SUSPENDED  # lost while restarting: deploy nothing
        if unreadable is not None:  # a failed attempt for the restart strategy
            return StorageUnreadable(unreadable)
        return self._run_attempt(self.attempt, restore)

    def _end_with(self, decision: Finish | Cancel | Suspend | Fail) -> None:
        if isinstance(decision, Finish):
            self._end(JobStatus.FINISHED)
        elif isinstance(decision, Cancel):
            self._end(JobStatus.CANCELED)
        elif isinstance(decision, Suspend):
            self._end(JobStatus.SUSPENDED, LeadershipLost(f"job {self.job_id}: leadership lost"))
        else:
            log.error("job %s failed, not restarting: %s", self.job_id, decision.reason)
            self._publish(failure_reason=decision.reason)
            self._end(JobStatus.FAILED, decision.cause)

    def _restart_after(self, decision: Restart) -> Step:
        """Enter RESTARTING, wait out the delay, choose the restore point, deploy."""
        self._set_status(JobStatus.RESTARTING)
        self._publish(restarts=self.restarts + 1)
        log.warning(
            "job %s: attempt %d failed (%s); %s, restarting in %d ms",
            self.job_id,
            self.attempt,
            _first_line(decision.cause),
            decision.reason,
            decision.delay_ms,
        )
        self.emit("restart", decision.cause)
        # The delay overlaps the teardown, as Flink's backoff overlaps the cancellation.
        delay_s = decision.delay_ms / 1000.0 - (time.monotonic() - self._ended_at)
        if self._cancel.wait(max(0.0, delay_s)):
            return DelayCancelled()
        if decision.discard is not None:
            discard = decision.discard
            reason = _first_line(decision.cause)
            self.coordinator.mark_unusable(discard.checkpoint_dir, discard.checkpoint_id, reason)
        try:
            restore = self.restores.latest(explicit=None)
        except CheckpointError as exc:  # nothing (safe) to restore from: the decision says
            return NoSafeRestore(exc)
        except Exception as exc:  # the storage is unreachable: wait, as for an attempt
            unreadable = RestoreReadError(
                f"could not choose the checkpoint to restore: {_first_line(exc)}"
            )
            unreadable.__cause__ = exc
            log.warning("job %s: %s", self.job_id, unreadable)
            return self._next_attempt(None, unreadable)
        return self._next_attempt(restore)

    # ------------------------------------------------------------------ AttemptHost

    def all_workers_running(
        self,
        attempt: AttemptNumber,
        launched_ms: int,
        initializations: Mapping[int, p.WorkerInitialization],
    ) -> None:
        if self.status is JobStatus.RUNNING:
            return
        if self._restore is not None:  # log where the restore's time went
            workers = [initializations[i] for i in sorted(initializations)]
            initialization = self.restores.initialization(
                self._restore, attempt, launched_ms, workers
            )
            self._publish(last_initialization=initialization)
        self._set_status(JobStatus.RUNNING)
        self.emit("running", attempt)

    def worker_registered(self, worker_index: int, pid: int, data_address: tuple[str, int]) -> None:
        view = self._view
        pids = {**view.worker_pids, worker_index: pid}
        addresses = {**view.worker_data_addresses, worker_index: data_address}
        self._publish(
            worker_pids=MappingProxyType(pids), worker_data_addresses=MappingProxyType(addresses)
        )

    def checkpoint_acknowledged(self) -> None:
        self._note_latest_checkpoint()

    def record_metrics(
        self, reports: Mapping[TaskKey, p.TaskMetrics], cpu: tuple[int, WorkerCpu] | None = None
    ) -> None:
        # New maps, never mutated: readers on other threads keep a consistent pair.
        view = self._view
        metric_reports = shifted(view.metric_reports, reports)
        if cpu is None:
            self._publish(metric_reports=metric_reports)
            return
        cpu_reports = shifted(view.cpu_reports, {cpu[0]: cpu[1]})
        self._publish(metric_reports=metric_reports, cpu_reports=cpu_reports)

    # ------------------------------------------------------------------ one attempt

    def _run_attempt(self, attempt: AttemptNumber, restore: p.RestoreInfo | None) -> AttemptOutcome:
        state = AttemptState(attempt, self.num_workers)
        self._state = state
        self._restore = restore
        # Pids of the previous attempt's (dead) workers must not pass for the new ones.
        self._publish(
            metric_reports=_NO_REPORTS,
            cpu_reports=_NO_CPU_REPORTS,
            worker_pids=MappingProxyType({}),
            worker_data_addresses=MappingProxyType({}),
        )
        launch = p.WorkerLaunch(
            job_id=self.job_id,
            attempt=attempt,
            num_workers=self.num_workers,
            master_address=self._server.address,
            secret=self.secret,
            job_payload=self.payload,
            restore=restore,
            faults=self.faults,
        )
        if restore is not None:
            log.info(
                "attempt %d restores from checkpoint %d (%s)",
                attempt,
                restore.checkpoint_id,
                restore.checkpoint_dir,
            )
        if attempt > self._first_attempt and self._checkpointing:
            self.coordinator.start_periodic()  # stopped if the last attempt ended its sources
        savepoint_control = AttemptSavepointControl(
            self.job_id,
            self.coordinator,
            self._checkpointing,
            self._server,
            attempt,
            lambda: self.status,
            lambda: state.final_checkpoint_from is not None,
        )
        driver = AttemptDriver(
            self,  # as its AttemptHost
            state,
            self._server,
            self.coordinator,
            self.plan,
            self._checkpointing,
            self._cancel,
            self._savepoints,
            savepoint_control,
        )
        state.launched_ms = _now_ms()
        self._server.admit_from(attempt)
        deployment = self.executor.launch(launch)
        try:
            outcome = driver.drive(deployment)
        except BaseException as exc:
            outcome = AttemptOutcome.failed(exc)
        self._ended_at = time.monotonic()  # the restart delay counts from here (as Flink's)
        driver.teardown(deployment, cancelled=outcome.end is not AttemptEnd.FINISHED)
        return outcome

    def _note_latest_checkpoint(self) -> None:
        latest = self.coordinator.latest_completed_id()
        if latest != self._view.latest_checkpoint_id:
            self._publish(latest_checkpoint_id=latest)

    def deliver_collected(self, results: p.CollectedResults) -> None:
        if results.dedup_key is not None:
            key = (results.transformation_id, *results.dedup_key)
            if key in self._seen_collect:
                return
            self._seen_collect.add(key)
        if self._on_collect is not None:
            self._on_collect(results)

    # ------------------------------------------------------------------ AttemptPort

    def emit(self, event: str, payload: Any) -> None:
        for listener in list(self.listeners):
            try:
                listener(event, payload)
            except Exception:
                log.debug("listener failed", exc_info=True)

    def leads(self) -> bool:
        return self.leadership is None or self.leadership.holds()

    def broadcast_to_current(self, message: object) -> None:
        state = self._state
        if state is not None:
            self._server.broadcast(state.attempt, message)

    def fail_current(self, reason: str) -> None:
        state = self._state
        if state is not None:
            self._server.inbox.put(Envelope(state.attempt, -1, FailAttempt(reason)))

    # ------------------------------------------------------------------ LeadershipPort

    @property
    def cancelled(self) -> threading.Event:
        return self._cancel

    def current_worker_pids(self) -> Mapping[int, int]:
        return self.worker_pids

    def add_listener(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def end_unled(self, status: JobStatus, error: BaseException | None) -> None:
        self._publish(error=error)
        self._set_status(status)

    def take_over(self, restore_path: str | None, first_id: int) -> None:
        self.restores.ha_restore = restore_path
        coordinator = self.coordinator
        coordinator.set_next_checkpoint_id(
            CheckpointId(max(first_id, coordinator.next_checkpoint_id))
        )

    def start_leading(self, decided: bool) -> None:
        self.on_leading()
        if decided:  # the HA pointer, not the run-status record, says where to resume
            self.restores.resume_from = ()

    def post(self, message: object) -> None:
        state = self._state
        attempt = state.attempt if state is not None else self.attempt
        self._server.inbox.put(Envelope(attempt, -1, message))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _first_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]
