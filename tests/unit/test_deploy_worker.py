"""The worker's control-message dispatch, and what a worker does to its process.

Dispatch: each message from the job master against fake tasks that record what was done to
them (sources and non-sources). Process: a worker tunes the interpreter for good only in a
process of its own; an in-process job leaves the driver's interpreter as it found it.
"""

from __future__ import annotations

import gc
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.datastream import StreamExecutionEnvironment
from cairn.deploy import control_messages as p
from cairn.deploy import process_tuning
from cairn.deploy.job_pickling import dumps_job
from cairn.deploy.lifecycle import WorkerOutcome
from cairn.deploy.process_tuning import (
    ProcessOwnership,
    freeze_long_lived_objects,
    switch_interval,
)
from cairn.deploy.worker import RegistrationFailed, Worker, apply_control
from cairn.events import CheckpointBarrier
from cairn.graph.job_graph import build_job_graph
from cairn.ids import CheckpointId
from cairn.runtime.faults import FaultSpec
from cairn.runtime.network import Listener, new_secret
from cairn.runtime.network.errors import ConnectionClosed, FrameRefused

BARRIER = CheckpointBarrier(CheckpointId(7), 1_000)


@dataclass
class FakeTask:
    """Records every call the worker makes on it, in order."""

    name: str
    is_source: bool
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def trigger_source_checkpoint(self, barrier: CheckpointBarrier) -> None:
        self.calls.append(("trigger", barrier.checkpoint_id))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.calls.append(("complete", checkpoint_id))

    def notify_checkpoint_aborted(
        self, checkpoint_id: int, reason: CheckpointFailureReason
    ) -> None:
        self.calls.append(("aborted", checkpoint_id, reason))

    def end_input(self) -> None:
        self.calls.append(("end input",))

    def resume_input(self) -> None:
        self.calls.append(("resume input",))


@pytest.fixture
def tasks() -> list[FakeTask]:
    return [FakeTask("source", True), FakeTask("map", False), FakeTask("source 2", True)]


def _calls(tasks: list[FakeTask]) -> dict[str, list[tuple[Any, ...]]]:
    return {t.name: t.calls for t in tasks}


def test_a_checkpoint_trigger_reaches_the_source_tasks_only(tasks: list[FakeTask]) -> None:
    assert apply_control(p.TriggerCheckpoint(BARRIER), tasks) is None
    assert _calls(tasks) == {"source": [("trigger", 7)], "map": [], "source 2": [("trigger", 7)]}


def test_completion_and_abort_are_told_to_every_task(tasks: list[FakeTask]) -> None:
    assert apply_control(p.NotifyCheckpointComplete(3), tasks) is None
    expired = CheckpointFailureReason.CHECKPOINT_EXPIRED
    assert apply_control(p.NotifyCheckpointAborted(4, expired), tasks) is None
    for task in tasks:
        assert task.calls == [("complete", 3), ("aborted", 4, expired)]


def test_end_sources_ends_the_input_of_the_source_tasks_only(tasks: list[FakeTask]) -> None:
    assert apply_control(p.EndSources(), tasks) is None
    assert _calls(tasks) == {"source": [("end input",)], "map": [], "source 2": [("end input",)]}


def test_resume_sources_resumes_the_source_tasks_only(tasks: list[FakeTask]) -> None:
    assert apply_control(p.ResumeSources(), tasks) is None
    resumed = [("resume input",)]
    assert _calls(tasks) == {"source": resumed, "map": [], "source 2": resumed}


@pytest.mark.parametrize(
    ("cancelled", "outcome"), [(False, WorkerOutcome.FINISHED), (True, WorkerOutcome.CANCELLED)]
)
def test_shutdown_ends_the_worker_without_touching_a_task(
    tasks: list[FakeTask], cancelled: bool, outcome: WorkerOutcome
) -> None:
    assert apply_control(p.Shutdown(cancelled=cancelled), tasks) is outcome
    assert all(not t.calls for t in tasks)


def test_other_messages_are_ignored(tasks: list[FakeTask]) -> None:
    assert apply_control(p.PeerTable({0: ("127.0.0.1", 1)}), tasks) is None
    assert apply_control("not a control message", tasks) is None
    assert all(not t.calls for t in tasks)


def _launch(**changes: Any) -> p.WorkerLaunch:
    env = StreamExecutionEnvironment()
    env.from_collection([1, 2]).map(lambda x: x).print()
    prepared = env.prepare_job()
    s = prepared.settings
    graph = build_job_graph(
        s.job_name, prepared.sinks, s.parallelism, s.max_parallelism, s.operator_chaining
    )
    launch = p.WorkerLaunch(
        job_id=uuid.uuid4().hex,
        attempt=0,
        num_workers=1,
        master_address=("127.0.0.1", 1),
        secret=b"s" * 32,
        job_payload=dumps_job((s, graph)),
    )
    return replace(launch, **changes)


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker(_launch(), 0, "127.0.0.1", ProcessOwnership.SHARED)
    yield w
    w._async.shutdown()


def test_the_worker_applies_queued_messages_in_order_and_stops_at_shutdown(
    worker: Worker, tasks: list[FakeTask]
) -> None:
    worker.tasks = tasks  # type: ignore[assignment]
    later = p.NotifyCheckpointComplete(9)
    worker._control.extend(
        [p.TriggerCheckpoint(BARRIER), p.NotifyCheckpointComplete(7), p.Shutdown(True), later]
    )
    worker._handle_control()
    assert tasks[0].calls == [("trigger", 7), ("complete", 7)]
    assert tasks[1].calls == [("complete", 7)]
    assert worker._stop and worker._outcome is WorkerOutcome.CANCELLED
    assert list(worker._control) == [later]  # after Shutdown, nothing more is applied


def test_a_refused_frame_fails_the_worker_a_lost_peer_does_not(worker: Worker) -> None:
    worker._on_network_error(ConnectionClosed("peer closed the connection"))
    assert not worker._stop  # a dead peer: the job master cancels the attempt
    refused = FrameRefused("peer 127.0.0.1:5 announced a frame of 2,147,483,648 bytes")
    worker._on_network_error(refused)  # a live peer broke the protocol
    assert worker._stop
    with pytest.raises(FrameRefused) as info:
        worker._loop()
    assert info.value is refused


# ------------------------------------------------------------------ registration


def test_a_worker_that_cannot_register_fails_its_executor_task() -> None:
    """Nobody would hear its report: it raises, so the Spark barrier stage fails at once."""
    fault = FaultSpec("register", attempt=0, subtask=0)
    w = Worker(_launch(faults=(fault,)), 0, "127.0.0.1", ProcessOwnership.SHARED)
    with pytest.raises(RegistrationFailed) as info:
        w.run()
    assert str(info.value) == (
        "worker 0 of attempt 0 could not register with the job master at 127.0.0.1:1: "
        "InjectedFailure: injected failure at register of worker#0 (checkpoint None)"
    )
    assert w._outcome is WorkerOutcome.FAILED


def test_a_worker_the_job_master_rejects_fails_its_executor_task() -> None:
    with Listener("127.0.0.1", new_secret(), lambda conn, hello: conn.close()) as master:
        w = Worker(_launch(master_address=master.address), 0, "127.0.0.1", ProcessOwnership.SHARED)
        start = time.monotonic()
        with pytest.raises(RegistrationFailed, match="AuthenticationError: server rejected"):
            w.run()
        assert time.monotonic() - start < 5


# ------------------------------------------------------------------ process tuning


@pytest.fixture
def interval() -> Iterator[float]:
    """A switch interval that is neither Python's default nor the workers' (put back after)."""
    original = sys.getswitchinterval()
    sys.setswitchinterval(0.007)
    yield sys.getswitchinterval()
    sys.setswitchinterval(original)


def test_shared_processes_get_the_interval_back_when_the_last_worker_ends(
    interval: float,
) -> None:
    with switch_interval(ProcessOwnership.SHARED, 0.001):
        assert sys.getswitchinterval() == 0.001
        with switch_interval(ProcessOwnership.SHARED, 0.002):
            assert sys.getswitchinterval() == 0.002
        assert sys.getswitchinterval() == 0.002  # another worker still runs
    assert sys.getswitchinterval() == interval


def test_shared_processes_get_the_interval_back_when_a_worker_fails(interval: float) -> None:
    with pytest.raises(RuntimeError), switch_interval(ProcessOwnership.SHARED, 0.001):
        raise RuntimeError("task failed")
    assert sys.getswitchinterval() == interval
    assert process_tuning._shared_users == 0


def test_an_owned_process_keeps_its_tuning(
    interval: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    with switch_interval(ProcessOwnership.OWNED, 0.001):
        pass
    assert sys.getswitchinterval() == 0.001
    freezes: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append("freeze"))
    freeze_long_lived_objects(ProcessOwnership.SHARED)
    assert freezes == []
    freeze_long_lived_objects(ProcessOwnership.OWNED)
    assert freezes == ["freeze"]


def test_an_in_process_job_leaves_the_drivers_interpreter_as_it_found_it(
    interval: float, tmp_path: Path
) -> None:
    frozen = gc.get_freeze_count()
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(2)
    env.get_checkpoint_config().set_checkpoint_storage(f"file://{tmp_path}")
    seen = env.from_collection([1, 2, 3]).map(lambda _: sys.getswitchinterval())
    with seen.execute_and_collect() as results:
        during = set(results)
    assert during == {0.001}  # the workers' interval (cairn.worker.switch-interval) while running
    assert sys.getswitchinterval() == interval
    assert gc.get_freeze_count() == frozen
