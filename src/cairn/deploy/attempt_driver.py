"""One attempt of a job, on the job master's thread: drive its deployed workers until the
attempt ends, then tear it down.

Invariants: :meth:`AttemptDriver.drive` returns exactly one ``AttemptOutcome``; messages of
other attempts never touch this one (results a completed checkpoint released are still
delivered, as they stay valid across failover); the attempt fails as soon as its workers all
ended while some never registered (not after ``REGISTRATION_TIMEOUT_S``, which bounds
workers that hang instead); the sources are told to end only once the final checkpoint
(taken after every source was exhausted) completed; :meth:`AttemptDriver.teardown` returns
only once every worker connection of the attempt is gone, so the next attempt never meets
this one's workers. The driver reaches the job master only through its ``AttemptHost``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.messages import TaskAcknowledgement, TaskDecline, TaskKey
from cairn.deploy import control_messages as p
from cairn.deploy.attempt_control import AttemptSavepointControl, FailAttempt, Stopped
from cairn.deploy.attempt_errors import TaskFailure, WorkerLost
from cairn.deploy.control_server import ConnectionLost, ControlServer, Envelope
from cairn.deploy.execution_plan import ExecutionPlan
from cairn.deploy.executors import Deployment
from cairn.deploy.high_availability import LostLeadership
from cairn.deploy.job_master_ports import AttemptHost
from cairn.deploy.lifecycle import AttemptEnd, AttemptOutcome
from cairn.deploy.output_forwarding import print_forwarded
from cairn.deploy.savepoint_requests import SavepointRequests
from cairn.ids import AttemptNumber, CheckpointId

__all__ = ["REGISTRATION_TIMEOUT_S", "AttemptDriver", "AttemptState", "drain_stale"]

log = logging.getLogger(__name__)

REGISTRATION_TIMEOUT_S = 180.0
TICK_S = 0.02

FINISHED = AttemptOutcome(AttemptEnd.FINISHED)
CANCELLED = AttemptOutcome(AttemptEnd.CANCELLED)
SUSPENDED = AttemptOutcome(AttemptEnd.SUSPENDED)


@dataclass
class AttemptState:
    """What the job master knows of one attempt's workers and tasks."""

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


class AttemptDriver:
    """Drives attempt ``state.attempt``: its workers' messages arrive in ``server``'s inbox;
    ``coordinator`` takes its checkpoints (periodic ones only with ``checkpointing``);
    ``savepoints`` are started through ``savepoint_control``; ``cancelled`` ends it."""

    def __init__(
        self,
        host: AttemptHost,
        state: AttemptState,
        server: ControlServer,
        coordinator: CheckpointCoordinator,
        plan: ExecutionPlan,
        checkpointing: bool,
        cancelled: threading.Event,
        savepoints: SavepointRequests,
        savepoint_control: AttemptSavepointControl,
    ) -> None:
        self._host = host
        self.state = state
        self._server = server
        self._coordinator = coordinator
        self._plan = plan
        self._checkpointing = checkpointing
        self._cancelled = cancelled
        self._savepoints = savepoints
        self._savepoint_control = savepoint_control

    def drive(self, deployment: Deployment) -> AttemptOutcome:
        """Until the attempt ends: hand out the peer table once every worker registered,
        tick the coordinator once every worker runs, apply the workers' messages."""
        state, host = self.state, self._host
        inbox = self._server.inbox
        deadline = time.monotonic() + REGISTRATION_TIMEOUT_S
        peers_sent = False
        while True:
            if self._cancelled.is_set():
                return CANCELLED
            self._savepoints.run(self._savepoint_control)
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
                    collect_late(host, env)
                    continue
                outcome = self._on_message(env)
                if outcome is not None:
                    return outcome
                if not peers_sent and len(state.registered) == state.num_workers:
                    table = {i: r.data_address for i, r in state.registered.items()}
                    self._server.broadcast(state.attempt, p.PeerTable(table))
                    peers_sent = True
            if len(state.running) == state.num_workers:
                host.all_workers_running(state.attempt, state.launched_ms, state.initializations)
                if self._checkpointing:
                    self._coordinator.tick()
                    self._maybe_finish_sources()

    def teardown(self, deployment: Deployment, cancelled: bool) -> None:
        """Shut the attempt's workers down (cancelled: abort pending checkpoints first) and
        wait until every connection of the attempt is gone."""
        state, server = self.state, self._server
        if cancelled:
            self._coordinator.abort_all_pending("job failover or cancellation")
        server.broadcast(state.attempt, p.Shutdown(cancelled=cancelled))
        if cancelled:
            deployment.cancel()
        deployment.wait(60.0)
        server.disconnect_attempt(state.attempt)
        # Wait until every worker connection of the attempt is gone before redeploying.
        deadline = time.monotonic() + 30.0
        while server.connected(state.attempt) and time.monotonic() < deadline:
            time.sleep(0.05)
        drain_stale(self._host, server)

    def _on_message(self, env: Envelope) -> AttemptOutcome | None:
        msg, state, host = env.message, self.state, self._host
        coordinator = self._coordinator
        if isinstance(msg, p.RegisterWorker):
            state.registered[env.worker_index] = msg
            host.worker_registered(env.worker_index, msg.pid, msg.data_address)
            where = f"{msg.host} ({msg.data_address[0]}), pid {msg.pid}"
            log.info("attempt %d: worker %d runs on %s", msg.attempt, msg.worker_index, where)
        elif isinstance(msg, p.WorkerRunning):
            state.running.add(env.worker_index)
            if msg.initialization is not None:
                state.initializations[env.worker_index] = msg.initialization
        elif isinstance(msg, TaskAcknowledgement):
            coordinator.receive_ack(msg)
            host.checkpoint_acknowledged()
            self._maybe_finish_sources()
        elif isinstance(msg, TaskDecline):
            coordinator.receive_decline(msg)
        elif isinstance(msg, p.MetricsReport):
            cpu = None if msg.cpu is None else (msg.worker_index, msg.cpu)
            host.record_metrics(msg.tasks, cpu)
        elif isinstance(msg, p.CollectedResults):
            host.deliver_collected(msg)
        elif isinstance(msg, p.WorkerOutput):
            print_forwarded(msg.text)
        elif isinstance(msg, p.SourceExhausted):
            state.exhausted.add(msg.task)
            if (
                len(state.exhausted) == len(self._plan.source_tasks)
                and state.final_checkpoint_from is None
                and self._checkpointing
            ):
                state.final_checkpoint_from = coordinator.next_checkpoint_id
                log.info("all sources exhausted; taking the final checkpoint")
        elif isinstance(msg, p.TaskFinished):
            if msg.metrics is not None:
                host.record_metrics({msg.task: msg.metrics})
            state.finished.add(msg.task)
            if len(state.finished) == len(self._plan.all_tasks):
                return FINISHED
        elif isinstance(msg, p.TaskFailed):
            return AttemptOutcome.failed(TaskFailure(msg))
        elif isinstance(msg, ConnectionLost):
            if len(state.finished) < len(self._plan.all_tasks):
                registered = state.registered.get(env.worker_index)
                pid = registered.pid if registered is not None else None
                return AttemptOutcome.failed(
                    WorkerLost(
                        f"lost the connection to worker {env.worker_index} (attempt "
                        f"{env.attempt}, pid {pid}): the worker process died or was killed"
                    )
                )
        elif isinstance(msg, FailAttempt):
            return AttemptOutcome.failed(RuntimeError(msg.reason))
        elif isinstance(msg, LostLeadership):
            return SUSPENDED
        elif isinstance(msg, Stopped):
            return FINISHED
        return None

    def _maybe_finish_sources(self) -> None:
        state, coordinator = self.state, self._coordinator
        start = state.final_checkpoint_from
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


def drain_stale(host: AttemptHost, server: ControlServer) -> None:
    """Empty the inbox of messages of attempts that ended, keeping their released results."""
    try:
        while True:
            collect_late(host, server.inbox.get_nowait())
    except queue.Empty:
        return


def collect_late(host: AttemptHost, env: Envelope) -> None:
    """A message of an attempt that is not the current one: results released by a checkpoint
    that completed stay valid across failover; a worker's printed output is shown."""
    if isinstance(env.message, p.CollectedResults):
        host.deliver_collected(env.message)
    elif isinstance(env.message, p.WorkerOutput):
        print_forwarded(env.message.text)


def _never_registered(state: AttemptState) -> WorkerLost:
    missing = sorted(set(range(state.num_workers)) - set(state.registered))
    return WorkerLost(
        f"the workers of attempt {state.attempt} ended, but only {len(state.registered)} of "
        f"{state.num_workers} had registered with the job master (never: workers "
        f"{', '.join(map(str, missing))})"
    )
