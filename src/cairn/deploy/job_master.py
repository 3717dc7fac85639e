"""The job master: deploys attempts, drives checkpoints, and fails over.

Invariants: exactly one attempt is live at a time — a new attempt is deployed only after the
previous one was cancelled and its workers disconnected; messages of older attempts are
dropped; an attempt fails as soon as its workers all ended while some never registered (not
after ``REGISTRATION_TIMEOUT_S``, which bounds workers that hang instead); every restart
restores from the latest completed (and verified) checkpoint that no worker failed to
restore (``restore_choice.py``), or fails the job when only a fallback that would commit
output a second time is left; an attempt whose workers found its restored state corrupt
is not counted against the restart strategy (the checkpoint is never offered again); the
job's status changes only along ``lifecycle.JOB_STATUS_TRANSITIONS``, and a terminal status
is set only after the checkpoint coordinator applied its retention policy; savepoint
requests from other threads are started on the job master's thread
(``savepoint_requests.py``), like everything else that touches the coordinator; under high
availability no attempt is deployed unless this driver leads (``job_master_leadership.py``),
and one that lost its leadership ends SUSPENDED.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.errors import CheckpointError, RestoreReadError
from cairn.checkpoint.ha.fence import LeadershipLost
from cairn.checkpoint.ha.leader import Leadership
from cairn.checkpoint.messages import TaskAcknowledgement, TaskDecline, TaskKey
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
from cairn.deploy.attempt_control import AttemptSavepointControl, FailAttempt, Stopped
from cairn.deploy.attempt_errors import TaskFailure, WorkerLost
from cairn.deploy.committing_sinks import committing_sinks
from cairn.deploy.control_server import ConnectionLost, ControlServer, Envelope
from cairn.deploy.coordinator_gateway import CoordinatorGatewayOf
from cairn.deploy.execution_plan import ExecutionPlan
from cairn.deploy.executors import Deployment, Executor
from cairn.deploy.high_availability import LostLeadership
from cairn.deploy.initialization import JobInitialization
from cairn.deploy.job_master_leadership import lead
from cairn.deploy.job_master_ports import Listener
from cairn.deploy.job_view import JobView, MetricReports
from cairn.deploy.lifecycle import AttemptEnd, AttemptOutcome, transition
from cairn.deploy.output_forwarding import print_forwarded
from cairn.deploy.restart_policy import RestartPolicy
from cairn.deploy.restore_choice import RestoreChoice
from cairn.deploy.savepoint_requests import SavepointRequests, StopWithSavepoint
from cairn.events import SavepointFormatType
from cairn.graph.job_graph import JobGraph
from cairn.ids import AttemptNumber, CheckpointId, JobId
from cairn.runtime.faults import driver_fault_hook, with_driver_pid
from cairn.settings import JobSettings

log = logging.getLogger(__name__)

REGISTRATION_TIMEOUT_S = 180.0
TICK_S = 0.02


@dataclass
class _AttemptState:
    attempt: AttemptNumber
    num_workers: int
    registered: dict[int, p.RegisterWorker] = field(default_factory=dict)
    running: set[int] = field(default_factory=set)
    exhausted: set[TaskKey] = field(default_factory=set)
    finished: set[TaskKey] = field(default_factory=set)
    final_checkpoint_from: CheckpointId | None = None
    sources_ended: bool = False
    launched_ms: int = 0
    initializations: dict[int, p.WorkerInitialization] = field(default_factory=dict)


_NO_REPORTS: MetricReports = (MappingProxyType({}), MappingProxyType({}))
_FINISHED = AttemptOutcome(AttemptEnd.FINISHED)
_CANCELLED = AttemptOutcome(AttemptEnd.CANCELLED)
_SUSPENDED = AttemptOutcome(AttemptEnd.SUSPENDED)


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
        self._state: _AttemptState | None = None  # None until the first attempt is deployed
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
            log.error("job %s cannot start: %s", self.job_id, exc)
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
            return _SUSPENDED  # lost while restarting: deploy nothing
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
        except CheckpointError as exc:  # nothing (safe) to restore from: say what
            log.error("job %s cannot restart: %s", self.job_id, exc)
            return NoSafeRestore(exc)
        except Exception as exc:  # the storage is unreachable: wait, as for an attempt
            unreadable = RestoreReadError(
                f"could not choose the checkpoint to restore: {_first_line(exc)}"
            )
            unreadable.__cause__ = exc
            log.warning("job %s: %s", self.job_id, unreadable)
            return self._next_attempt(None, unreadable)
        return self._next_attempt(restore)

    def _restored(self, state: _AttemptState) -> None:
        """Every worker of an attempt that restored a checkpoint runs: log where the time
        went (``last_initialization``)."""
        if self._restore is not None:
            workers = [state.initializations[i] for i in sorted(state.initializations)]
            initialization = self.restores.initialization(
                self._restore, state.attempt, state.launched_ms, workers
            )
            self._publish(last_initialization=initialization)

    def _record_metrics(self, reports: Mapping[TaskKey, p.TaskMetrics]) -> None:
        # New maps, never mutated: readers on other threads keep a consistent pair.
        before, latest = self._view.metric_reports
        previous, current = dict(before), dict(latest)
        for key, report in reports.items():
            if key in current:
                previous[key] = current[key]
            current[key] = report
        self._publish(metric_reports=(MappingProxyType(previous), MappingProxyType(current)))

    # ------------------------------------------------------------------ one attempt

    def _run_attempt(self, attempt: AttemptNumber, restore: p.RestoreInfo | None) -> AttemptOutcome:
        state = _AttemptState(attempt, self.num_workers)
        self._state = state
        self._restore = restore
        # Pids of the previous attempt's (dead) workers must not pass for the new ones.
        self._publish(metric_reports=_NO_REPORTS, worker_pids=MappingProxyType({}))
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
        state.launched_ms = _now_ms()
        self._server.admit_from(attempt)
        deployment = self.executor.launch(launch)
        try:
            outcome = self._drive(state, deployment)
        except BaseException as exc:
            outcome = AttemptOutcome.failed(exc)
        self._ended_at = time.monotonic()  # the restart delay counts from here (as Flink's)
        self._teardown(state, deployment, cancelled=outcome.end is not AttemptEnd.FINISHED)
        return outcome

    def _teardown(self, state: _AttemptState, deployment: Deployment, cancelled: bool) -> None:
        if cancelled:
            self.coordinator.abort_all_pending("job failover or cancellation")
        self._server.broadcast(state.attempt, p.Shutdown(cancelled=cancelled))
        if cancelled:
            deployment.cancel()
        deployment.wait(60.0)
        self._server.disconnect_attempt(state.attempt)
        # Wait until every worker connection of the attempt is gone before redeploying.
        deadline = time.monotonic() + 30.0
        while self._server.connected(state.attempt) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._drain_stale()

    def _drain_stale(self) -> None:
        try:
            while True:
                env = self._server.inbox.get_nowait()
                self._maybe_collect_late(env)
        except queue.Empty:
            return

    def _maybe_collect_late(self, env: Envelope) -> None:
        # Results released by a checkpoint that completed stay valid across failover.
        if isinstance(env.message, p.CollectedResults):
            self._deliver_collected(env.message)
        elif isinstance(env.message, p.WorkerOutput):
            print_forwarded(env.message.text)

    def _drive(self, state: _AttemptState, deployment: Deployment) -> AttemptOutcome:
        inbox = self._server.inbox
        deadline = time.monotonic() + REGISTRATION_TIMEOUT_S
        peers_sent = False
        savepoints = AttemptSavepointControl(
            self.job_id,
            self.coordinator,
            self._checkpointing,
            self._server,
            state.attempt,
            lambda: self.status,
            lambda: state.final_checkpoint_from is not None,
        )
        while True:
            if self._cancel.is_set():
                return _CANCELLED
            self._savepoints.run(savepoints)
            failure = deployment.failure()
            if failure is not None:
                return AttemptOutcome.failed(failure)
            if not peers_sent and time.monotonic() > deadline:
                return AttemptOutcome.failed(
                    TimeoutError(
                        f"only {len(state.registered)} of {state.num_workers} workers registered "
                        f"within {REGISTRATION_TIMEOUT_S:.0f} s"
                    )
                )
            try:
                env = inbox.get(timeout=TICK_S)
            except queue.Empty:
                env = None
                # Every worker ended, some never registered, and nothing more is queued: the
                # missing ones cannot register any more; do not wait for the timeout.
                if not peers_sent and deployment.wait(0.0):
                    # The executor's error, if it has one, says why (it may have just come).
                    return AttemptOutcome.failed(deployment.failure() or _never_registered(state))
            if env is not None:
                if env.attempt != state.attempt:
                    self._maybe_collect_late(env)
                    continue
                outcome = self._on_message(state, env)
                if outcome is not None:
                    return outcome
                if not peers_sent and len(state.registered) == state.num_workers:
                    table = {i: r.data_address for i, r in state.registered.items()}
                    self._server.broadcast(state.attempt, p.PeerTable(table))
                    peers_sent = True
            if len(state.running) == state.num_workers:
                if self.status is not JobStatus.RUNNING:
                    self._restored(state)
                    self._set_status(JobStatus.RUNNING)
                    self.emit("running", state.attempt)
                if self._checkpointing:
                    self.coordinator.tick()
                    self._maybe_finish_sources(state)

    def _on_message(self, state: _AttemptState, env: Envelope) -> AttemptOutcome | None:
        msg = env.message
        coordinator = self.coordinator
        if isinstance(msg, p.RegisterWorker):
            state.registered[env.worker_index] = msg
            pids = {**self.worker_pids, env.worker_index: msg.pid}
            self._publish(worker_pids=MappingProxyType(pids))
            where = f"{msg.host} ({msg.data_address[0]}), pid {msg.pid}"
            log.info("attempt %d: worker %d runs on %s", msg.attempt, msg.worker_index, where)
        elif isinstance(msg, p.WorkerRunning):
            state.running.add(env.worker_index)
            if msg.initialization is not None:
                state.initializations[env.worker_index] = msg.initialization
        elif isinstance(msg, TaskAcknowledgement):
            coordinator.receive_ack(msg)
            self._note_latest_checkpoint()
            self._maybe_finish_sources(state)
        elif isinstance(msg, TaskDecline):
            coordinator.receive_decline(msg)
        elif isinstance(msg, p.MetricsReport):
            self._record_metrics(msg.tasks)
        elif isinstance(msg, p.CollectedResults):
            self._deliver_collected(msg)
        elif isinstance(msg, p.WorkerOutput):
            print_forwarded(msg.text)
        elif isinstance(msg, p.SourceExhausted):
            state.exhausted.add(msg.task)
            if (
                len(state.exhausted) == len(self.plan.source_tasks)
                and state.final_checkpoint_from is None
                and self._checkpointing
            ):
                state.final_checkpoint_from = coordinator.next_checkpoint_id
                log.info("all sources exhausted; taking the final checkpoint")
        elif isinstance(msg, p.TaskFinished):
            if msg.metrics is not None:
                self._record_metrics({msg.task: msg.metrics})
            state.finished.add(msg.task)
            if len(state.finished) == len(self.plan.all_tasks):
                return _FINISHED
        elif isinstance(msg, p.TaskFailed):
            return AttemptOutcome.failed(TaskFailure(msg))
        elif isinstance(msg, ConnectionLost):
            if len(state.finished) < len(self.plan.all_tasks):
                return AttemptOutcome.failed(
                    WorkerLost(
                        f"lost the connection to worker {env.worker_index} (attempt "
                        f"{env.attempt}, pid {self.worker_pids.get(env.worker_index)}): the worker "
                        "process died or was killed"
                    )
                )
        elif isinstance(msg, FailAttempt):
            return AttemptOutcome.failed(RuntimeError(msg.reason))
        elif isinstance(msg, LostLeadership):
            return _SUSPENDED
        elif isinstance(msg, Stopped):
            return _FINISHED
        return None

    def _note_latest_checkpoint(self) -> None:
        latest = self.coordinator.latest_completed_id()
        if latest != self._view.latest_checkpoint_id:
            self._publish(latest_checkpoint_id=latest)

    def _maybe_finish_sources(self, state: _AttemptState) -> None:
        start = state.final_checkpoint_from
        coordinator = self.coordinator
        if start is None or state.sources_ended:
            return
        latest = coordinator.latest_completed_id()
        if latest is not None and latest >= start:
            state.sources_ended = True
            # Ended sources send no more barriers: a later checkpoint could never complete.
            coordinator.stop_periodic()
            self._server.broadcast(state.attempt, p.EndSources())
            return
        if not coordinator.has_pending():
            coordinator.trigger_checkpoint(force=True)

    def _deliver_collected(self, msg: p.CollectedResults) -> None:
        if msg.dedup_key is not None:
            key = (msg.transformation_id, *msg.dedup_key)
            if key in self._seen_collect:
                return
            self._seen_collect.add(key)
        if self._on_collect is not None:
            self._on_collect(msg)

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


def _never_registered(state: _AttemptState) -> WorkerLost:
    missing = sorted(set(range(state.num_workers)) - set(state.registered))
    return WorkerLost(
        f"the workers of attempt {state.attempt} ended, but only {len(state.registered)} of "
        f"{state.num_workers} had registered with the job master (never: workers "
        f"{', '.join(map(str, missing))})"
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


def _first_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]
