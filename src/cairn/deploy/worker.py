"""A worker: one long-running process (a Spark barrier task) or thread hosting subtasks.

Invariants: every task of a worker runs on the worker's single task thread (no locks on the
record path), which also moves the data connections' frames (its event loop: it waits on
its sockets, timers and a wake-up signal, and reads, writes and processes without handing a
batch to another thread); the worker stops when the job master says so or when the job
master connection is lost, so an orphaned worker never keeps writing; a worker tunes the
interpreter for good only in a process of its own (``process_tuning``).
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import cloudpickle

from cairn.checkpoint import local_files
from cairn.checkpoint.errors import CorruptCheckpointError
from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.handles import StateFileWriter
from cairn.checkpoint.local_recovery import LocalRecoveryStore, local_recovery_root
from cairn.checkpoint.messages import TaskAcknowledgement
from cairn.checkpoint.read_timing import ReadTiming
from cairn.checkpoint.storage import CheckpointStorage
from cairn.deploy import control_messages as p
from cairn.deploy.execution_plan import ExecutionPlan
from cairn.deploy.failure_facts import facts_of
from cairn.deploy.lifecycle import WorkerOutcome
from cairn.deploy.output_forwarding import forwarding_stdout
from cairn.deploy.process_tuning import (
    ProcessOwnership,
    freeze_long_lived_objects,
    switch_interval,
)
from cairn.deploy.task_builder import TaskBuilder, read_restores
from cairn.deploy.task_builder import now_ms as _now_ms  # the operators' clock, for timers
from cairn.deploy.worker_cpu import CpuClock
from cairn.events import CheckpointBarrier
from cairn.graph.job_graph import JobGraph
from cairn.ids import AttemptNumber, CheckpointId
from cairn.runtime.channels import ConnectionSender, InputChannel, frame_receiver
from cairn.runtime.faults import FaultInjector, SimulatedCrash
from cairn.runtime.linger import plan_wait
from cairn.runtime.network.errors import ConnectionClosed, FrameRefused
from cairn.runtime.network.event_loop import EventLoop
from cairn.runtime.network.frames import FrameKind
from cairn.runtime.network.framing import FramedConnection
from cairn.runtime.network.loop_connection import LoopConnection
from cairn.runtime.network.server import Listener, connect
from cairn.runtime.network.tls import InternalTls
from cairn.runtime.task import StreamTask
from cairn.settings import JobSettings
from cairn.state.api import KeyedStateBackend
from cairn.state.errors import CorruptStateError
from cairn.state.factory import clean_local_state

log = logging.getLogger(__name__)

METRICS_INTERVAL_S = 1.0
PEER_TABLE_TIMEOUT_S = 120.0
# Restored state that fails its checks (CRC, decoding, a missing or short file).
_CORRUPT_STATE = (CorruptStateError, CorruptCheckpointError)


@dataclass(frozen=True)
class WorkerResult:
    worker_index: int
    attempt: AttemptNumber
    outcome: WorkerOutcome


class _MasterLost(Exception):
    pass


class RegistrationFailed(RuntimeError):
    """The worker failed before it registered with the job master, so no report could reach
    it: the worker's executor task fails instead (the Spark barrier stage ends at once)."""


class ControlledTask(Protocol):
    """What a control message may do to a task (``runtime.task.StreamTask`` is one)."""

    is_source: bool

    def trigger_source_checkpoint(self, barrier: CheckpointBarrier) -> None: ...

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None: ...

    def notify_checkpoint_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason
    ) -> None: ...

    def end_input(self) -> None: ...

    def resume_input(self) -> None: ...


def apply_control(message: Any, tasks: Sequence[ControlledTask]) -> WorkerOutcome | None:
    """Apply one control message from the job master to a worker's tasks, in order.

    Checkpoint triggers and end of input go to the source tasks only, completion and abort
    notifications to every task; ``Shutdown`` touches no task and returns the outcome the
    worker ends with (every other message returns ``None``; unknown ones are ignored).

    >>> apply_control(p.Shutdown(cancelled=True), [])
    <WorkerOutcome.CANCELLED: 'cancelled'>
    """
    if isinstance(message, p.TriggerCheckpoint):
        for task in tasks:
            if task.is_source:
                task.trigger_source_checkpoint(message.barrier)
    elif isinstance(message, p.NotifyCheckpointComplete):
        for task in tasks:
            task.notify_checkpoint_complete(message.checkpoint_id)
    elif isinstance(message, p.NotifyCheckpointAborted):
        for task in tasks:
            task.notify_checkpoint_aborted(message.checkpoint_id, message.reason)
    elif isinstance(message, p.EndSources):
        for task in tasks:
            if task.is_source:
                task.end_input()
    elif isinstance(message, p.ResumeSources):
        for task in tasks:
            if task.is_source:
                task.resume_input()
    elif isinstance(message, p.Shutdown):
        return WorkerOutcome.CANCELLED if message.cancelled else WorkerOutcome.FINISHED
    return None


class Worker:
    """``process``: whether the worker's process is its own (a Spark task: tune it, and die
    hard on a simulated crash) or the driver's (the in-process executor)."""

    def __init__(
        self, launch: p.WorkerLaunch, worker_index: int, host: str, process: ProcessOwnership
    ) -> None:
        self.launch = launch
        self.index = worker_index
        self.host = host
        self.process = process
        self.attempt = launch.attempt
        self.job_id = launch.job_id
        settings, graph = cloudpickle.loads(launch.job_payload)
        self.settings: JobSettings = settings
        self.graph: JobGraph = graph
        self.plan = ExecutionPlan(graph, launch.num_workers)
        hard_kill = process is ProcessOwnership.OWNED
        self.faults = FaultInjector(tuple(launch.faults), launch.attempt, hard_kill)
        self._events = EventLoop()  # the task thread's: data connections, timers, wake-ups
        self._control: deque[Any] = deque()
        self._stop = False
        self._outcome = WorkerOutcome.FINISHED
        self._master_lost = False
        self._tls = InternalTls()  # the job's internal TLS contexts, built in run()
        self._failure: BaseException | None = None
        self._built = False  # every task built and its state restored
        self._started_ms, self._started = int(time.time() * 1000), time.perf_counter()
        self._cpu = CpuClock(process)  # on the worker's own thread: see CpuClock
        self._initialization: p.WorkerInitialization | None = None
        self._async = ThreadPoolExecutor(
            max_workers=2, thread_name_prefix=f"snapshot-w{worker_index}"
        )
        cp = settings.checkpoint
        self._storage = CheckpointStorage(
            cp.storage_url, launch.job_id, cp.storage_options, cp.signing_key
        )
        self._local = local_recovery_store(settings, self._storage.job_dir, worker_index)
        self._senders: dict[int, ConnectionSender] = {}
        self._inbound: list[LoopConnection] = []
        self.tasks: list[StreamTask] = []
        self._keyed_backends: list[KeyedStateBackend] = []
        self._master: FramedConnection | None = None
        self._master_lock = threading.Lock()
        # Input channels of this worker's tasks exist before any peer can connect.
        self._inputs: dict[int, InputChannel] = {}
        self._channel_source_worker: dict[int, int] = {}
        for task in self.plan.tasks_of(worker_index):
            for spec in self.plan.input_channels(task):
                self._inputs[spec.channel_id] = InputChannel(spec.channel_id)
                self._channel_source_worker[spec.channel_id] = self.plan.worker_of(spec.source)

    # ------------------------------------------------------------------ services for tasks

    def send_to_master(self, message: Any) -> None:
        if self._local is not None and isinstance(message, TaskAcknowledgement):
            self._local.acknowledged(message.checkpoint_id, message.states.values())
        conn = self._master
        if conn is None:
            return
        try:
            conn.send(FrameKind.CONTROL, 0, pickle.dumps(message, protocol=5))
        except (ConnectionClosed, OSError):
            self._master_lost = True
            self.wake()

    def _send_output(self, text: str) -> None:
        self.send_to_master(p.WorkerOutput(self.attempt, self.index, text))

    def submit_async(self, fn: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                fn()
            except SimulatedCrash as crash:
                self._failure = crash
                self._stop = True
                self.wake()

        self._async.submit(guarded)

    def state_writer(self, checkpoint_id: CheckpointId) -> StateFileWriter:
        writer = self._storage.writer(checkpoint_id)
        return writer if self._local is None else self._local.writer(writer)

    def control_pending(self) -> bool:
        """A control message (e.g. a checkpoint trigger) waits for the task thread."""
        return bool(self._control)

    def wake(self) -> None:
        self._events.wake()

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> WorkerResult:
        # The task thread holds the GIL while it processes; a short switch interval lets the
        # network, control and snapshot threads in promptly (barriers, acks, async uploads).
        with switch_interval(self.process, self.settings.switch_interval_ms / 1000):
            return self._run()

    def _run(self) -> WorkerResult:
        # Each worker reads the TLS files on its own host (they are not shipped in the task).
        self._tls = InternalTls.of(self.settings.security.internal)
        listener = Listener(
            self.host, self.launch.secret, self._on_data_connection, tls=self._tls.server
        )
        try:
            self._connect_master(listener.address)
            forward = self.launch.forward_output and self.process is ProcessOwnership.OWNED
            with forwarding_stdout(forward, self._send_output):
                peers = self._await_peer_table()
                self._connect_peers(peers)
                self._build_tasks()
                # Everything so far (plan, operators, restored state) lives as long as the
                # worker.
                freeze_long_lived_objects(self.process)
                self.send_to_master(p.WorkerRunning(self.attempt, self.index, self._initialization))
                self._loop()
        except SimulatedCrash:
            self._outcome = WorkerOutcome.CRASHED
            self._abort_connections()
            raise
        except _MasterLost:
            self._outcome = WorkerOutcome.MASTER_LOST
        except Exception as exc:
            self._outcome = WorkerOutcome.FAILED
            if self._master is None:
                host, port = self.launch.master_address
                raise RegistrationFailed(
                    f"worker {self.index} of attempt {self.attempt} could not register with "
                    f"the job master at {host}:{port}: {type(exc).__name__}: {exc}"
                ) from exc
            self._report_failure(None, exc)
        finally:
            listener.close()
            self._shutdown()
        return WorkerResult(self.index, self.attempt, self._outcome)

    def _connect_master(self, data_address: tuple[str, int]) -> None:
        if self.faults.active:
            self.faults.check("register", "worker", self.index)
        hello = pickle.dumps(
            p.RegisterWorker(
                self.attempt, self.index, data_address, os.getpid(), socket.gethostname()
            ),
            protocol=5,
        )
        conn = connect(self.launch.master_address, self.launch.secret, hello, tls=self._tls.client)
        conn.max_frame_size = self.settings.network.max_frame_size
        self._master = conn
        threading.Thread(
            target=self._control_loop, args=(conn,), name=f"control-w{self.index}", daemon=True
        ).start()

    def _control_loop(self, conn: FramedConnection) -> None:
        try:
            while True:
                _kind, _ch, payload = conn.recv()
                self._control.append(pickle.loads(payload))
                self._events.wake()
        except (ConnectionClosed, OSError):
            self._master_lost = True
            self._events.wake()

    def _await_peer_table(self) -> dict[int, tuple[str, int]]:
        deadline = time.monotonic() + PEER_TABLE_TIMEOUT_S
        while time.monotonic() < deadline:
            while self._control:
                msg = self._control.popleft()
                if isinstance(msg, p.PeerTable):
                    return dict(msg.data_addresses)
                if isinstance(msg, p.Shutdown):
                    raise _MasterLost("shut down before start")
            if self._master_lost:
                raise _MasterLost("job master connection lost during start-up")
            self._events.poll(0.1)
        raise TimeoutError(f"no peer table from the job master within {PEER_TABLE_TIMEOUT_S:.0f} s")

    def _connect_peers(self, peers: dict[int, tuple[str, int]]) -> None:
        for peer in sorted(self.plan.peers_receiving_from(self.index)):
            hello = pickle.dumps(("data", self.attempt, self.index), protocol=5)
            # A peer's listener was bound before it registered (the table lists only
            # registered workers): a refused connection means that peer is gone, and the
            # attempt is failing; do not spend seconds on retries (a busy listener is
            # still retried for up to busy_timeout).
            conn = connect(peers[peer], self.launch.secret, hello, retries=1, tls=self._tls.client)
            conn.max_frame_size = self.settings.network.max_frame_size
            outgoing = LoopConnection.adopt(conn)
            sender = ConnectionSender(outgoing, self._events.flush, f"w{self.index}->w{peer}")
            self._events.register(outgoing, sender.on_frames, self._on_network_error)
            self._senders[peer] = sender

    def _on_data_connection(self, conn: FramedConnection, hello: bytes) -> None:
        """A peer's data connection (on the listener's thread): handed to the task thread."""
        kind, attempt, peer = pickle.loads(hello)
        if kind != "data" or attempt != self.attempt:
            conn.close()
            return
        conn.max_frame_size = self.settings.network.max_frame_size
        self._events.call_soon(lambda: self._adopt_inbound(conn, peer))

    def _adopt_inbound(self, conn: FramedConnection, peer: int) -> None:
        if self._stop:
            conn.close()
            return
        incoming = LoopConnection.adopt(conn)
        for ch_id, src_worker in self._channel_source_worker.items():
            if src_worker == peer:
                self._inputs[ch_id].attach_remote(incoming, self._events.flush)
        self._inbound.append(incoming)
        self._events.register(incoming, frame_receiver(self._inputs), self._on_network_error)

    def _on_network_error(self, exc: BaseException) -> None:
        if isinstance(exc, FrameRefused):  # a live peer broke the protocol: fail the attempt
            self._failure, self._stop = exc, True
            self.wake()
        elif not self._stop:
            log.info("worker %d: data connection lost: %s", self.index, exc)
            # A peer died; the job master will cancel this attempt. Keep running until then.

    # ------------------------------------------------------------------ task construction

    def _build_tasks(self) -> None:
        clean_local_state(self.settings.state, self.job_id, self.attempt, ending=False)
        began = time.perf_counter()
        timing = ReadTiming()
        restores = read_restores(self._storage, self.launch.restore, timing, self._local)
        read = time.perf_counter()
        builder = TaskBuilder(
            self, self.index, self.settings, self.graph, self.plan, self._inputs, self._senders
        )
        builder.build(restores, self.tasks, self._keyed_backends)
        self._built = True
        local = self._local.last_reader if self._local is not None else None
        self._initialization = p.WorkerInitialization(
            self._started_ms,
            setup_ms=_ms(began - self._started),
            metadata_ms=_ms(read - began),
            initialize_state_ms=_ms(time.perf_counter() - read),
            state_read_ms=_ms(timing.busy_s),
            state_bytes=timing.bytes,
            local_bytes=local.local_bytes if local is not None else 0,
        )
        if self.launch.restore is not None:
            log.info("worker %d: %s", self.index, self._initialization)
            if local is not None:
                log.info(
                    "worker %d: local recovery read %d bytes locally, %d from the storage",
                    self.index,
                    local.local_bytes,
                    local.remote_bytes,
                )

    # ------------------------------------------------------------------ the task loop

    def _loop(self) -> None:
        tasks = self.tasks
        events = self._events
        perf_counter = time.perf_counter
        next_metrics = time.monotonic() + METRICS_INTERVAL_S
        # Flink: -1 = flush only full buffers; 0 = flush after every record (here: batch).
        timeout_ms = self.settings.buffer_timeout_ms
        flush_when_idle = timeout_ms >= 0
        flush_interval = timeout_ms / 1000.0 if timeout_ms >= 0 else float("inf")
        next_flush = time.monotonic() + flush_interval
        linger_s = self.settings.buffer_linger_ms / 1000.0
        worked = False  # since the last sleep: the next one lingers (``runtime.linger``)
        current: StreamTask | None = None
        try:
            while not self._stop:
                if self._control:
                    self._handle_control()
                    if self._stop:
                        break
                if self._master_lost:
                    raise _MasterLost("job master connection lost")
                did = False
                for task in tasks:
                    current = task
                    t0 = perf_counter()
                    if task.run_once():
                        did = True
                        task.busy_s += perf_counter() - t0
                now_ms = _now_ms()
                for task in tasks:
                    current = task
                    t0 = perf_counter()
                    if task.fire_timers(now_ms):
                        did = True
                        task.busy_s += perf_counter() - t0
                current = None
                mono = time.monotonic()
                if mono >= next_metrics:
                    self._send_metrics()
                    next_metrics = mono + METRICS_INTERVAL_S
                if did:
                    worked = True
                    # Frames that came meanwhile, or input left: another turn at once (a
                    # buffer that timed out goes first).
                    if events.poll(0.0) or self._input_left():
                        if mono >= next_flush:
                            for task in tasks:
                                task.flush_ready()
                            next_flush = mono + flush_interval
                        continue
                # Drained: partly filled batches go (a local one is input for a task here).
                if flush_when_idle or mono >= next_flush:
                    flushed = False
                    for task in tasks:
                        if task.flush_ready():
                            flushed = True
                    next_flush = mono + flush_interval
                    if flushed and self._input_left():
                        continue
                # Sleep until the next deadline; after work, input waits for it (linger).
                wait = plan_wait(worked, self._idle_timeout(now_ms), linger_s)
                events.poll(wait.seconds, wait.wake_on_input)
                worked = False
        except (SimulatedCrash, _MasterLost):
            raise
        except Exception as exc:
            self._outcome = WorkerOutcome.FAILED
            self._report_failure(current, exc)
            return
        if self._failure is not None:
            raise self._failure

    def _input_left(self) -> bool:
        for task in self.tasks:
            if task.has_input():
                return True
        return False

    def _idle_timeout(self, now_ms: int) -> float:
        """How long the idle task thread may sleep: until the next timer, alignment deadline
        or rate-limited source batch, 50 ms at most (new input and control messages wake
        it earlier)."""
        timeout = 0.05
        mono = time.monotonic()
        for task in self.tasks:
            t = task.next_timer_ms()
            if t is not None:
                timeout = min(timeout, max(t - now_ms, 0) / 1000.0)
            ready = task.source_ready_at
            if ready is not None:
                timeout = min(timeout, max(ready - mono, 0.0))
        return timeout

    def _handle_control(self) -> None:
        while self._control:
            message = self._control.popleft()
            outcome = apply_control(message, self.tasks)
            if self._local is not None and isinstance(message, p.NotifyCheckpointComplete):
                self._local.completed(message.checkpoint_id)
            if outcome is not None:  # Shutdown: later messages are for nobody
                self._outcome = outcome
                self._stop = True
                return

    def _send_metrics(self) -> None:
        tasks = {t.key: t.metrics() for t in self.tasks}
        self.send_to_master(p.MetricsReport(self.attempt, self.index, tasks, self._cpu.read()))

    def _report_failure(self, task: StreamTask | None, exc: BaseException) -> None:
        tb = getattr(exc, "formatted_traceback", None) or "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)
        )
        log.error("worker %d: task %s failed: %s", self.index, task.name if task else "-", exc)
        # Corrupt restored state: only while the tasks are built (restore), not found later.
        corrupt = isinstance(exc, _CORRUPT_STATE) and not self._built
        key = task.key if task else None
        facts = facts_of(exc)  # before the traceback's frames are gone
        self.send_to_master(
            p.TaskFailed(self.attempt, key, type(exc).__name__, str(exc), tb, corrupt, facts)
        )

    def _abort_connections(self) -> None:
        for conn in self._inbound:
            conn.close()
        for sender in self._senders.values():
            sender.close()
        if self._master is not None:
            self._master.close()

    def _shutdown(self) -> None:
        self._stop = True
        for task in self.tasks:
            task.close()
        # Queued snapshot uploads are dropped, a running one is awaited: nothing may write
        # into a checkpoint directory after this worker ended (the job master removes the
        # directories of aborted checkpoints once every worker is gone).
        finished = self._outcome is WorkerOutcome.FINISHED
        self._async.shutdown(wait=True, cancel_futures=not finished)
        for backend in self._keyed_backends:  # after the uploads: they read RocksDB's files
            try:
                backend.dispose()
            except Exception:
                log.warning("disposing a keyed state backend failed", exc_info=True)
        clean_local_state(self.settings.state, self.job_id, self.attempt, ending=True)
        if self._local is not None and finished:
            self._local.discard()  # a failed or cancelled attempt's copies serve the next one
        self._abort_connections()
        self._events.close()


def local_recovery_store(
    settings: JobSettings, job_dir: str, worker_index: int
) -> LocalRecoveryStore | None:
    """The worker's local copies (``state.backend.local-recovery``), else ``None``."""
    state = settings.state
    if not state.local_recovery:
        return None
    root = state.local_recovery_dir or local_recovery_root()
    if state.local_recovery_dir is None:
        local_files.ensure_private_root(root)
    return LocalRecoveryStore(root, job_dir, worker_index)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def run_worker(
    launch: p.WorkerLaunch, worker_index: int, host: str, process: ProcessOwnership
) -> WorkerResult:
    """Entry point used by both executors."""
    return Worker(launch, worker_index, host, process).run()
