"""The job master driven through whole jobs by a fake executor: deploy, running, failures,
restarts per the restart strategy, the end (finished, failed, cancelled).

The fake executor implements the ``Executor`` seam with scripted workers: threads that speak
the real control protocol to the job master over its authenticated control endpoint
(register, wait for the peer table, report running, then act out their script once the job
master reports the attempt running, so every run takes the same path). No Spark, no tasks,
no records; each job takes a few tens of milliseconds.
"""

from __future__ import annotations

import enum
import itertools
import os
import pickle
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.errors import FallbackRefusedError
from cairn.checkpoint.messages import TaskAcknowledgement
from cairn.checkpoint.protocol import TriggerNow
from cairn.checkpoint.storage import CheckpointStorage
from cairn.common.job_status import JobStatus
from cairn.common.serialization import Encoder
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.file_system import FileSink
from cairn.deploy import control_messages as p
from cairn.deploy.attempt_errors import TaskFailure, WorkerLost
from cairn.deploy.execution_plan import ExecutionPlan
from cairn.deploy.executors import WorkerCrashed
from cairn.deploy.job_master import JobMaster
from cairn.deploy.lifecycle import JOB_STATUS_TRANSITIONS
from cairn.graph.job_graph import JobGraph, build_job_graph
from cairn.runtime.network.frames import FrameKind
from cairn.runtime.network.framing import ConnectionClosed, FramedConnection
from cairn.runtime.network.server import connect
from cairn.settings import CheckpointSettings, JobSettings, RestartKind, RestartSettings

S = JobStatus
WORKERS = 2


class Act(enum.Enum):
    """What the workers of one attempt do once the job master told them their peers."""

    FINISH = "every task finishes"
    FAIL_TASK = "worker 0 reports a failed task"
    RESTORE_FAILS = "worker 0 reports that the restored state failed its CRC check"
    DIE = "worker 1 drops its connection (its process died)"
    CRASH = "the executor reports a dead worker before any registered"
    VANISH = "the workers end before they register, and the executor reports no error"
    RUN = "run until told to shut down"


@dataclass
class FakeWorker:
    """One scripted worker: a thread on the real control protocol."""

    launch: p.WorkerLaunch
    index: int
    plan: ExecutionPlan
    act: Act
    attempt_running: threading.Event
    received: list[Any] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"fake-w{self.index}")
        self.thread.start()

    def _run(self) -> None:
        attempt = self.launch.attempt
        if self.act is Act.VANISH:
            return
        hello = p.RegisterWorker(attempt, self.index, ("127.0.0.1", 0), os.getpid(), "fake")
        conn = connect(self.launch.master_address, self.launch.secret, pickle.dumps(hello))
        try:
            assert isinstance(self._recv(conn), p.PeerTable)
            self._send(conn, p.WorkerRunning(attempt, self.index))
            assert self.attempt_running.wait(10), "the job master never reported running"
            if self.act is Act.DIE and self.index == 1:
                return
            if self.act is Act.FAIL_TASK and self.index == 0:
                task = self.plan.tasks_of(0)[0]
                self._send(conn, p.TaskFailed(attempt, task, "ValueError", "bad record", "tb"))
            if self.act is Act.RESTORE_FAILS and self.index == 0:
                message = "state file 'keyed-1': key group 7 failed its CRC-32 check"
                failed = p.TaskFailed(attempt, None, "CorruptStateError", message, "tb", True)
                self._send(conn, failed)
            if self.act is Act.FINISH:
                for task in self.plan.tasks_of(self.index):
                    self._send(conn, p.TaskFinished(attempt, task))
            while not isinstance(self._recv(conn), p.Shutdown):
                pass
        except ConnectionClosed:
            pass  # the job master disconnected the attempt
        finally:
            conn.close()

    def _recv(self, conn: FramedConnection) -> Any:
        _kind, _channel, payload = conn.recv()
        message = pickle.loads(payload)
        self.received.append(message)
        return message

    @staticmethod
    def _send(conn: FramedConnection, message: Any) -> None:
        conn.send(FrameKind.CONTROL, 0, pickle.dumps(message, protocol=5))


class FakeDeployment:
    def __init__(self, failure: BaseException | None = None) -> None:
        self.workers: list[FakeWorker] = []
        self.running = threading.Event()  # set by the test when the job master says so
        self._failure = failure
        self.cancelled = False

    def failure(self) -> BaseException | None:
        return self._failure

    def cancel(self) -> None:
        self.cancelled = True

    def wait(self, timeout: float) -> bool:
        for worker in self.workers:
            assert worker.thread is not None
            worker.thread.join(timeout)
        return not any(w.thread is not None and w.thread.is_alive() for w in self.workers)


class FakeExecutor:
    """Runs attempt *n* as ``script[n]`` says (the last entry repeats)."""

    control_host = "127.0.0.1"

    def __init__(self, graph: JobGraph, script: Sequence[Act]) -> None:
        self.graph = graph
        self.script = list(script)
        self.launches: list[p.WorkerLaunch] = []
        self.deployments: list[FakeDeployment] = []

    def slots(self) -> int:
        return WORKERS

    def launch(self, launch: p.WorkerLaunch) -> FakeDeployment:
        self.launches.append(launch)
        act = self.script[min(launch.attempt, len(self.script) - 1)]
        plan = ExecutionPlan(self.graph, launch.num_workers)
        if act is Act.CRASH:
            deployment = FakeDeployment(WorkerCrashed("worker 0 crashed: exit code 137"))
        else:
            deployment = FakeDeployment()
            for i in range(launch.num_workers):
                deployment.workers.append(FakeWorker(launch, i, plan, act, deployment.running))
                deployment.workers[-1].start()
        self.deployments.append(deployment)
        return deployment


@dataclass
class Run:
    master: JobMaster
    executor: FakeExecutor
    statuses: list[JobStatus]
    events: list[str]


def _graph_and_settings(
    restart: RestartSettings, committing_sink: bool = False
) -> tuple[JobGraph, JobSettings]:
    env = StreamExecutionEnvironment()
    env.set_parallelism(WORKERS)
    stream = env.from_collection([1, 2, 3]).map(lambda x: x)
    if committing_sink:
        stream.sink_to(FileSink.for_row_format("/unused", Encoder.simple_string_encoder()).build())
    else:
        stream.print()
    prepared = env.prepare_job("fake-executor job")
    s = prepared.settings
    graph = build_job_graph(
        s.job_name, prepared.sinks, s.parallelism, s.max_parallelism, s.operator_chaining
    )
    storage = f"memory://test-deploy-job-master/{uuid.uuid4().hex}"
    settings = JobSettings(
        job_name=s.job_name,
        parallelism=s.parallelism,
        checkpoint=CheckpointSettings(storage_url=storage),
        restart=restart,
    )
    return graph, settings


def run_job(
    script: Sequence[Act],
    restart: RestartSettings,
    cancel_on: str | None = None,
    prepare: Callable[[JobGraph, JobSettings], JobSettings] | None = None,
    committing_sink: bool = False,
) -> Run:
    """Run a job on the fake executor to its end; ``cancel_on``: cancel it at this event;
    ``prepare`` may change the settings (and write files) first."""
    graph, settings = _graph_and_settings(restart, committing_sink)
    if prepare is not None:
        settings = prepare(graph, settings)
    executor = FakeExecutor(graph, script)
    master = JobMaster(
        job_id=uuid.uuid4().hex,
        settings=settings,
        graph=graph,
        job_payload=b"",
        executor=executor,
        num_workers=WORKERS,
        secret=secrets.token_bytes(32),
    )
    run = Run(master, executor, [master.status], [])

    def listen(event: str, payload: Any) -> None:
        run.events.append(event)
        if event == "status":
            run.statuses.append(payload)
        if event == "running":
            executor.deployments[payload].running.set()
        if event == cancel_on:
            master.cancel()

    master.listeners.append(listen)
    worker = threading.Thread(target=master.run, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the job master did not end"
    return run


FIXED_ONE = RestartSettings(RestartKind.FIXED_DELAY, attempts=1, delay_ms=0)
FIXED_TWO = RestartSettings(RestartKind.FIXED_DELAY, attempts=2, delay_ms=0)
NO_RESTART = RestartSettings(RestartKind.NONE)


def path(names: str) -> list[JobStatus]:
    return [JobStatus[name] for name in names.split()]


def _check_path(statuses: list[JobStatus]) -> None:
    for old, new in itertools.pairwise(statuses):
        assert new in JOB_STATUS_TRANSITIONS[old], (old, new)


def _shutdowns(deployment: FakeDeployment) -> list[p.Shutdown]:
    return [m for w in deployment.workers for m in w.received if isinstance(m, p.Shutdown)]


def test_a_job_whose_tasks_all_finish_is_finished_after_one_attempt() -> None:
    run = run_job([Act.FINISH], FIXED_ONE)
    assert run.statuses == path("CREATED INITIALIZING RUNNING FINISHED")
    _check_path(run.statuses)
    m = run.master
    assert (m.status, m.attempt, m.restarts, m.error) == (S.FINISHED, 0, 0, None)
    assert [launch.attempt for launch in run.executor.launches] == [0]
    assert run.events.count("running") == 1
    (deployment,) = run.executor.deployments
    # Every worker got its peers, then a shutdown that is no cancellation.
    assert all(isinstance(w.received[0], p.PeerTable) for w in deployment.workers)
    assert _shutdowns(deployment) == [p.Shutdown(cancelled=False)] * WORKERS
    assert not deployment.cancelled
    assert m.end_ms is not None


def test_a_failed_task_restarts_the_job_and_the_new_attempt_finishes() -> None:
    run = run_job([Act.FAIL_TASK, Act.FINISH], FIXED_ONE)
    assert run.statuses == path("CREATED INITIALIZING RUNNING RESTARTING RUNNING FINISHED")
    _check_path(run.statuses)
    m = run.master
    assert (m.status, m.attempt, m.restarts, m.error) == (S.FINISHED, 1, 1, None)
    assert [launch.attempt for launch in run.executor.launches] == [0, 1]
    assert run.events.count("restart") == 1
    failed, finished = run.executor.deployments
    assert failed.cancelled and _shutdowns(failed) == [p.Shutdown(cancelled=True)] * WORKERS
    assert not finished.cancelled


def test_the_job_fails_when_the_restart_strategy_is_exhausted() -> None:
    run = run_job([Act.FAIL_TASK], FIXED_ONE)
    assert run.statuses == path("CREATED INITIALIZING RUNNING RESTARTING RUNNING FAILED")
    _check_path(run.statuses)
    m = run.master
    assert (m.status, m.attempt, m.restarts) == (S.FAILED, 1, 1)
    assert isinstance(m.error, TaskFailure)
    assert "ValueError: bad record" in str(m.error)


def test_without_restarts_the_first_failure_fails_the_job() -> None:
    run = run_job([Act.FAIL_TASK, Act.FINISH], NO_RESTART)
    assert run.statuses == path("CREATED INITIALIZING RUNNING FAILED")
    assert (run.master.attempt, run.master.restarts) == (0, 0)
    assert len(run.executor.launches) == 1


def test_a_lost_worker_fails_the_attempt_like_a_failed_task() -> None:
    run = run_job([Act.DIE, Act.FINISH], FIXED_ONE)
    assert run.statuses == path("CREATED INITIALIZING RUNNING RESTARTING RUNNING FINISHED")
    assert run.master.restarts == 1
    run = run_job([Act.DIE], NO_RESTART)
    assert run.master.status is S.FAILED
    assert isinstance(run.master.error, WorkerLost)
    assert "worker 1" in str(run.master.error)


def test_attempts_that_fail_before_running_restart_from_initializing_and_restarting() -> None:
    run = run_job([Act.CRASH, Act.CRASH, Act.FINISH], FIXED_TWO)
    assert run.statuses == path("CREATED INITIALIZING RESTARTING RESTARTING RUNNING FINISHED")
    _check_path(run.statuses)
    assert (run.master.attempt, run.master.restarts) == (2, 2)
    assert run.events.count("running") == 1
    run = run_job([Act.CRASH], FIXED_TWO)
    assert run.statuses[-1] is S.FAILED and run.master.restarts == 2
    assert isinstance(run.master.error, WorkerCrashed)


def test_an_attempt_whose_workers_ended_unregistered_fails_without_waiting() -> None:
    """Not the registration timeout (minutes): the workers are gone, none can register."""
    start = time.monotonic()
    run = run_job([Act.VANISH, Act.FINISH], FIXED_ONE)
    assert time.monotonic() - start < 10
    assert run.statuses == path("CREATED INITIALIZING RESTARTING RUNNING FINISHED")
    assert run.master.restarts == 1
    run = run_job([Act.VANISH], NO_RESTART)
    assert isinstance(run.master.error, WorkerLost)
    assert str(run.master.error) == (
        "the workers of attempt 0 ended, but only 0 of 2 had registered with the job master "
        "(never: workers 0, 1)"
    )


def test_cancelling_a_running_job_shuts_its_workers_down_as_cancelled() -> None:
    run = run_job([Act.RUN], FIXED_ONE, cancel_on="running")
    assert run.statuses == path("CREATED INITIALIZING RUNNING CANCELED")
    assert (run.master.restarts, run.master.error) == (0, None)
    (deployment,) = run.executor.deployments
    assert deployment.cancelled
    assert _shutdowns(deployment) == [p.Shutdown(cancelled=True)] * WORKERS


def test_the_coordinator_exists_before_the_job_runs_and_restores_nothing_by_default() -> None:
    graph, settings = _graph_and_settings(NO_RESTART)
    master = JobMaster(
        job_id="j",
        settings=settings,
        graph=graph,
        job_payload=b"",
        executor=FakeExecutor(graph, [Act.FINISH]),
        num_workers=WORKERS,
        secret=secrets.token_bytes(32),
    )
    try:
        assert master.status is S.CREATED
        assert master.coordinator.latest_completed_id() is None
        assert master.coordinator.expected_tasks == frozenset(master.plan.all_tasks)
    finally:
        master._server.close()


def test_cancelling_during_the_restart_delay_ends_the_job_without_another_attempt() -> None:
    slow = RestartSettings(RestartKind.FIXED_DELAY, attempts=1, delay_ms=60_000)
    run = run_job([Act.FAIL_TASK, Act.FINISH], slow, cancel_on="restart")
    assert run.statuses == path("CREATED INITIALIZING RUNNING RESTARTING CANCELED")
    assert (run.master.attempt, run.master.restarts, run.master.error) == (0, 1, None)
    assert len(run.executor.launches) == 1


# --- a restored checkpoint that the workers cannot read ------------------------------------


class _Quiet:
    """The gateway of a coordinator with no tasks listening (a finished earlier run)."""

    def trigger_sources(self, barrier: Any) -> None: ...
    def notify_complete(self, checkpoint_id: Any) -> None: ...
    def notify_aborted(self, checkpoint_id: Any, reason: Any, message: str) -> None: ...
    def fail_job(self, reason: str) -> None: ...


def _restore_from_an_earlier_run(graph: JobGraph, settings: JobSettings) -> JobSettings:
    """Complete checkpoints 1 and 2 of an earlier run of ``graph``; restore from its job dir."""
    storage = CheckpointStorage(settings.checkpoint.storage_url, "earlier-run")
    plan = ExecutionPlan(graph, WORKERS)
    coordinator = CheckpointCoordinator(
        "earlier-run",
        CheckpointSettings(retained=2),
        storage,
        _Quiet(),
        plan.all_tasks,
        plan.source_tasks,
        {},
    )
    for _ in range(2):
        trigger = coordinator.trigger_checkpoint(force=True)
        assert isinstance(trigger, TriggerNow)
        for task in plan.all_tasks:
            coordinator.receive_ack(TaskAcknowledgement(trigger.checkpoint_id, task))
    return replace(settings, restore_path=storage.job_dir)


def _restored_ids(run: Run) -> list[int | None]:
    return [None if x.restore is None else x.restore.checkpoint_id for x in run.executor.launches]


def test_a_checkpoint_whose_state_fails_in_the_workers_is_not_restored_again() -> None:
    run = run_job([Act.RESTORE_FAILS, Act.FINISH], FIXED_TWO, prepare=_restore_from_an_earlier_run)
    # Attempt 0 restored checkpoint 2, whose state failed its CRC in a worker; attempt 1
    # restores the older checkpoint 1 (the print sink commits nothing) and finishes.
    assert _restored_ids(run) == [2, 1]
    assert run.master.status is S.FINISHED and run.master.restarts == 1


def test_a_restore_the_workers_find_corrupt_is_not_counted_by_the_restart_strategy() -> None:
    # What the job master's own check would have skipped before deploying: the workers'
    # report falls back at once, even with restart strategy "none" (no failure counted).
    run = run_job([Act.RESTORE_FAILS, Act.FINISH], NO_RESTART, prepare=_restore_from_an_earlier_run)
    assert _restored_ids(run) == [2, 1]
    assert run.master.status is S.FINISHED and run.master.restarts == 1
    # Any other failure still is one: strategy "none" fails the job.
    failed = run_job([Act.FAIL_TASK, Act.FINISH], NO_RESTART, prepare=_restore_from_an_earlier_run)
    assert _restored_ids(failed) == [2] and failed.master.status is S.FAILED


def test_with_a_committing_sink_the_fallback_is_refused_and_the_job_fails() -> None:
    run = run_job(
        [Act.RESTORE_FAILS, Act.FINISH],
        FIXED_TWO,
        prepare=_restore_from_an_earlier_run,
        committing_sink=True,
    )
    assert _restored_ids(run) == [2]  # no attempt restores the older checkpoint
    assert run.statuses == path("CREATED INITIALIZING RUNNING RESTARTING FAILED")
    _check_path(run.statuses)
    error = run.master.error
    assert isinstance(error, FallbackRefusedError)
    assert "refusing to fall back past checkpoint 2" in str(error)
    assert "key group 7 failed its CRC-32 check" in str(error)
    assert "cairn.recovery.allow-fallback-past-committed" in str(error)
    # What the opt-in would do instead: restore checkpoint 1 and accept the duplicates.
    allowed = run_job(
        [Act.RESTORE_FAILS, Act.FINISH],
        FIXED_TWO,
        prepare=lambda g, s: replace(
            _restore_from_an_earlier_run(g, s), allow_fallback_past_committed=True
        ),
        committing_sink=True,
    )
    assert _restored_ids(allowed) == [2, 1] and allowed.master.status is S.FINISHED
