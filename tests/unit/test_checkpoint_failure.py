"""One ``CheckpointFailureReason`` end to end: a real ``StreamTask`` declines, a real
``CheckpointCoordinator`` counts and shows the same member, and its aborts reach the task's
barrier handler with their reason."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

import cairn.checkpoint.failure
import cairn.checkpoint.messages
import cairn.runtime.barriers
from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.handles import StateFileWriter
from cairn.checkpoint.messages import TaskDecline, TaskKey
from cairn.checkpoint.storage import CheckpointStorage
from cairn.clock import ManualClock
from cairn.events import AlignmentMode, CancelCheckpointMarker, CheckpointBarrier
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.input_gate import InputGate
from cairn.runtime.operators.base import OperatorSnapshot, StreamOperator
from cairn.runtime.task import StreamTask
from cairn.settings import CheckpointSettings

from ._task_services import StubServices, run_until_idle

R = CheckpointFailureReason
KEY = TaskKey(VertexId(1), SubtaskIndex(0))
T0 = 1_000_000


def test_there_is_one_reason_type() -> None:
    assert cairn.checkpoint.messages.CheckpointFailureReason is R
    assert cairn.runtime.barriers.CheckpointFailureReason is R
    assert R.EXCEPTION.is_pre_flight and not R.EXCEPTION.counts_as_failure
    assert R.JOB_FAILOVER_REGION.message == "FailoverRegion is cancelling."
    assert all(r.value == r.name and r.message for r in R)


class _Op(StreamOperator):
    """A head operator whose asynchronous snapshot part fails when told to."""

    def __init__(self, fail: bool) -> None:
        super().__init__(OperatorNode("op", "op", 1, "map", None, None, 1, 128, False))
        self.fail = fail
        self.aborted: list[int] = []

    def snapshot_state(
        self, checkpoint_id: int, timestamp_ms: int, options: object = None
    ) -> OperatorSnapshot:
        def write(writer: StateFileWriter) -> None:
            if self.fail:
                raise OSError("disk full")

        return OperatorSnapshot(keyed=write, operator=None)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.aborted.append(checkpoint_id)


@dataclass
class _Job:
    """The driver (coordinator) and one task with ``channels`` inputs, wired as a worker
    wires them: barriers go to the task's inputs, declines to the coordinator, abort
    notifications to the task."""

    coord: CheckpointCoordinator
    task: StreamTask
    op: _Op
    inputs: list[LocalOutputChannel]
    services: StubServices
    clock: ManualClock
    barriers: list[CheckpointBarrier] = field(default_factory=list)

    def trigger(self) -> CheckpointBarrier:
        self.coord.trigger_checkpoint(force=True)
        return self.barriers[-1]

    def run(self) -> None:
        run_until_idle(self.task)
        for message in self.services.sent:
            if isinstance(message, TaskDecline):
                self.coord.receive_decline(message)

    def declines(self) -> list[TaskDecline]:
        return [m for m in self.services.sent if isinstance(m, TaskDecline)]


class _Gateway:
    def __init__(self) -> None:
        self.job: _Job | None = None

    def trigger_sources(self, barrier: CheckpointBarrier) -> None:
        assert self.job is not None
        self.job.barriers.append(barrier)

    def notify_complete(self, checkpoint_id: CheckpointId) -> None:
        pass

    def notify_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason, message: str
    ) -> None:
        assert self.job is not None
        self.job.task.notify_checkpoint_aborted(checkpoint_id, reason)

    def fail_job(self, reason: str) -> None:
        pass


def _job(channels: int = 1, fail: bool = False) -> _Job:
    clock, gateway, op = ManualClock(T0), _Gateway(), _Op(fail)
    storage = CheckpointStorage(f"memory://cairn-failure-{uuid.uuid4().hex}", "job")
    settings = CheckpointSettings(interval_ms=60_000, timeout_ms=1_000, tolerable_failures=9)
    coord = CheckpointCoordinator(
        "job", settings, storage, gateway, [KEY], [KEY], {"op": (1, 128)}, clock
    )
    targets = [InputChannel(i) for i in range(channels)]
    vertex = JobVertex(1, "op", 1, 128, (op.node,), False, True)
    services = StubServices()
    gate = InputGate(targets)
    task = StreamTask(
        KEY, vertex, [op], gate, [], services, AlignmentMode.ALIGNED, True, clock=clock
    )
    outs = [LocalOutputChannel(t, capacity=10) for t in targets]
    job = _Job(coord, task, op, outs, services, clock)
    gateway.job = job
    return job


def _failure(job: _Job, checkpoint_id: int) -> tuple[str | None, str | None]:
    stats = job.coord.stats.get(CheckpointId(checkpoint_id))
    assert stats is not None
    return stats.failure_reason, stats.failure_message


def test_an_exception_in_a_tasks_snapshot_is_the_same_reason_in_the_statistics() -> None:
    job = _job(fail=True)
    barrier = job.trigger()
    job.inputs[0].send_event(barrier)
    job.run()
    (decline,) = job.declines()
    assert decline.reason is R.CHECKPOINT_ASYNC_EXCEPTION
    reason, message = _failure(job, 1)
    assert reason == R.CHECKPOINT_ASYNC_EXCEPTION.name
    assert R(reason) is decline.reason
    assert message is not None and "OSError: disk full" in message
    assert job.coord.pending_checkpoint_ids() == []


def test_a_barrier_handlers_reason_reaches_the_statistics_unchanged() -> None:
    job = _job(channels=2)
    barrier = job.trigger()
    job.inputs[0].send_event(barrier)
    job.inputs[1].send_event(CancelCheckpointMarker(barrier.checkpoint_id))
    job.run()
    assert [d.reason for d in job.declines()] == [R.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER]
    assert _failure(job, 1)[0] == R.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER.name


@pytest.mark.parametrize(
    ("abort", "expected"),
    [
        (lambda job: job.coord.abort_all_pending("failover"), R.JOB_FAILOVER_REGION),
        (lambda job: (job.clock.advance(1_000), job.coord.tick()), R.CHECKPOINT_EXPIRED),
    ],
)
def test_the_coordinators_abort_reason_reaches_the_tasks_barrier_handler(
    abort: Any, expected: CheckpointFailureReason
) -> None:
    job = _job(channels=2)
    barrier = job.trigger()
    job.inputs[0].send_event(barrier)
    job.run()
    handler = job.task.handler
    assert handler is not None and handler.blocked_channels == {0}
    abort(job)
    assert handler.blocked_channels == frozenset()
    # The handler's abort declines with the coordinator's reason (ignored there: not pending).
    assert [d.reason for d in job.declines()] == [expected]
    assert job.op.aborted == [1]
    assert _failure(job, 1)[0] == expected.name
