"""When an idle worker polls its sources again: the reader's hint, never a stale one; what a
source that has no more emits goes out at once, not at the buffer timeout."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.checkpoint.messages import TaskKey
from cairn.events import AlignmentMode, CheckpointBarrier, CheckpointOptions, CheckpointType
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.graph.transformations import PartitionKind
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.operators.sources import SourceOperator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.task import StreamTask

from ._task_services import StubServices


class _ScriptedSource(SourceOperator):
    """Returns the scripted polls in turn (``[]``: nothing yet, ``None``: exhausted)."""

    def __init__(
        self, polls: list[list[int] | None], hint: float | None, due: float | None = None
    ) -> None:
        node = OperatorNode("src", "src", 1, "source", None, None, 1, 128, False)
        super().__init__(node)
        self.polls = polls
        self.hint = hint
        self.due = due
        self.asked: list[int] = []

    def poll(self, max_records: int) -> list[Any] | None:
        self.asked.append(max_records)
        return self.polls.pop(0)

    def available_in_s(self) -> float | None:
        return self.hint

    def records_due_in_s(self) -> float | None:
        return self.due


def _source_task(
    polls: list[list[int] | None],
    hint: float | None,
    capacity: int = 100,
    batch_size: int = 1,
    due: float | None = None,
) -> tuple[StreamTask, InputChannel]:
    op = _ScriptedSource(polls, hint, due)
    target = InputChannel(0)
    writer = RecordWriter(
        [LocalOutputChannel(target, capacity=capacity)],
        PartitionKind.FORWARD,
        batch_size=batch_size,
    )
    vertex = JobVertex(1, "src", 1, 128, (op.node,), True, False)
    task = StreamTask(
        TaskKey(VertexId(1), SubtaskIndex(0)),
        vertex,
        [op],
        None,
        [writer],
        StubServices(),
        AlignmentMode.ALIGNED,
        True,
    )
    return task, target


def test_an_empty_poll_with_a_hint_sets_the_due_time_and_records_clear_it() -> None:
    task, _ = _source_task([[], [1, 2], []], hint=0.002)
    assert not task.run_once()
    assert task.source_ready_at is not None
    assert task.run_once()  # records came
    assert task.source_ready_at is None


def test_no_hint_means_no_due_time() -> None:
    task, _ = _source_task([[]], hint=None)
    task.run_once()
    assert task.source_ready_at is None


def test_a_backpressured_or_exhausted_source_leaves_no_stale_due_time() -> None:
    """A due time left over from an earlier empty poll would make the idle worker spin
    (wait 0 s) while the source is not even polled."""
    task, target = _source_task([[], [1], None], hint=0.001, capacity=1)
    task.run_once()
    assert task.source_ready_at is not None
    target.queue.append([0])  # the output queue (capacity 1) is full
    task.run_once()  # backpressured: not polled
    assert task.backpressured and task.source_ready_at is None
    target.queue.clear()
    task.run_once()  # emits 1
    task.source_ready_at = 0.0  # as if an old due time were left over
    task.run_once()  # exhausted
    assert task.source_exhausted and task.source_ready_at is None
    task.run_once()
    assert task.source_ready_at is None


@pytest.mark.parametrize("hint", [0.0, 0.004])
def test_the_hint_is_a_time_from_now(hint: float) -> None:
    import time

    task, _ = _source_task([[]], hint=hint)
    before = time.monotonic()
    task.run_once()
    assert task.source_ready_at is not None
    assert before + hint <= task.source_ready_at <= time.monotonic() + hint


def test_after_a_stop_with_savepoint_barrier_a_source_polls_nothing_until_resumed() -> None:
    """Records emitted after a terminating savepoint's barrier would be in neither the
    savepoint nor the job that restores it: the source stays quiet until told."""
    task, _ = _source_task([[1], [2]], hint=None)
    snapshots: list[CheckpointBarrier] = []
    task.checkpoints.checkpoint_state = snapshots.append  # type: ignore[method-assign]
    plain = CheckpointOptions(CheckpointType.SAVEPOINT)
    task.trigger_source_checkpoint(CheckpointBarrier(CheckpointId(1), 0, plain))
    assert not task.source_suspended
    stop = CheckpointOptions(CheckpointType.SAVEPOINT, terminate=True)
    task.trigger_source_checkpoint(CheckpointBarrier(CheckpointId(2), 0, stop))
    assert task.source_suspended and [b.checkpoint_id for b in snapshots] == [1, 2]
    assert not task.run_once() and not task.run_once()
    assert task.records_in == 0  # not polled after the barrier
    task.resume_input()  # the savepoint failed: the job goes on
    assert task.run_once() and task.records_in == 1


def test_a_partial_poll_sends_its_partly_filled_batch_at_once() -> None:
    """The source had fewer records than it asked for: the batch will not fill soon, so it
    goes now rather than when the worker idles or the buffer times out."""
    task, target = _source_task([[1], [2], [3]], hint=None, batch_size=8)
    head = task.head
    assert isinstance(head, _ScriptedSource)
    head.output = task.writers[0].emit  # what setup() wires
    assert task.run_once()  # the first poll asks for one record (slow start) and gets it
    assert list(target.queue) == [] and task.writers[0].has_pending()
    assert task.run_once()  # asked for two, got one
    assert head.asked == [1, 2] and list(target.queue) == [[1, 2]]
    task.flush_when_drained = False  # buffer timeout -1: only full buffers go
    assert task.run_once()
    assert list(target.queue) == [[1, 2]] and task.writers[0].has_pending()


def test_a_source_that_knows_when_its_records_are_due_is_not_polled_before() -> None:
    """A rate-limited reader's exact due time (``records_due_in_s``): no poll before it, and
    the worker sleeps until it; with a linger, a producing source is polled no more often."""
    import time

    task, _ = _source_task([[], [1], [2]], hint=None, due=60.0)
    assert not task.run_once()  # empty: due in a minute
    assert task.source_ready_at is not None and task.source_ready_at > time.monotonic() + 50
    assert not task.run_once() and not task.run_once()
    assert len(task.head.asked) == 1, "not polled again before it is due"  # type: ignore[attr-defined]
    assert not task.has_input()

    task, _ = _source_task([[1], [2], [3]], hint=None, due=0.0001, batch_size=100)
    task.polling.linger_s = 30.0
    assert task.run_once() and task.has_input()  # a full batch (of the first, paced size)
    assert task.run_once()  # fewer than asked for: the next poll after the linger
    assert task.source_ready_at is not None and task.source_ready_at > time.monotonic() + 20
    assert not task.run_once() and not task.has_input()


class _DuckLimiter:
    """A user's own limiter: ``acquire`` and ``seconds_until_ready``, nothing else."""

    def __init__(self, ready_in: float) -> None:
        self.ready_in = ready_in

    def acquire(self, wanted: int) -> int:
        return 0

    def seconds_until_ready(self, wanted: int) -> float:
        return self.ready_in


def test_a_generator_reports_its_limiters_next_grant_as_its_due_time() -> None:
    """``records_due_in_s`` of a ``DataGeneratorSource`` reader is its limiter's wait, for
    the built-in limiter and for any object with the two methods."""
    from cairn.datastream.connectors.datagen import (
        DataGeneratorReader,
        DataGenSplit,
        RateLimiter,
    )

    split = DataGenSplit(0, 0, 1, 100)
    reader = DataGeneratorReader([split], str, _DuckLimiter(0.25))  # type: ignore[arg-type]
    assert reader.poll_batch(10) == []
    assert reader.records_due_in_s() == 0.25
    clock = iter([0.0, 0.0, 0.0, 0.0]).__next__
    limited = DataGeneratorReader([split], str, RateLimiter(1000.0, clock))
    assert limited.poll_batch(10) == [] and limited.records_due_in_s() == 0.001
    unlimited = DataGeneratorReader([split], str, RateLimiter(None))
    assert unlimited.poll_batch(10) == [str(i) for i in range(10)]
    assert unlimited.records_due_in_s() == 0.0  # no rate: poll at will
