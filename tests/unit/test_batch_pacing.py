"""Time-bounded batches: the pacing policy alone (pure arithmetic, no clock); a source task
whose chained map is slow polls records a few at a time, and a task whose head is slow takes
a network batch in slices, so a checkpoint trigger is taken between records."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cairn.checkpoint.messages import TaskKey
from cairn.events import AlignmentMode, CheckpointBarrier
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.graph.transformations import PartitionKind
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.runtime.batch_pacing import BATCH_BUDGET_S, PROBE_AFTER, BatchPacing
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.operators.base import StreamOperator
from cairn.runtime.operators.sources import SourceFunctionOperator, SourceOperator
from cairn.runtime.record_writer import RecordWriter
from cairn.runtime.source_polling import SOURCE_BATCH
from cairn.runtime.task import StreamTask
from cairn.testing.processes import wait_for

from ._task_services import StubServices, operator_context

# ------------------------------------------------------------------ the policy


def _run_model(pacing: BatchPacing, fixed_s: float, per_record_s: float, batches: int) -> list[int]:
    """Feed ``batches`` batches costing ``fixed_s + n * per_record_s``; the sizes asked for."""
    sizes = []
    for _ in range(batches):
        n = pacing.records
        sizes.append(n)
        pacing.learn(n, fixed_s + n * per_record_s)
    return sizes


def _run(pacing: BatchPacing, cost_s: float, batches: int) -> list[int]:
    """Feed ``batches`` full batches at ``cost_s`` per record; the sizes asked for."""
    sizes = []
    for _ in range(batches):
        sizes.append(pacing.records)
        pacing.learn(pacing.records, pacing.records * cost_s)
    return sizes


def test_cheap_records_reach_the_count_cap_by_doubling_from_one() -> None:
    pacing = BatchPacing(cap=SOURCE_BATCH)
    sizes = _run(pacing, 1e-6, 12)
    assert sizes[:11] == [1 << i for i in range(11)]
    assert sizes[11] == pacing.records == SOURCE_BATCH


def test_slow_records_keep_a_batch_under_the_budget() -> None:
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    assert _run(pacing, 0.020, 5) == [1, 1, 1, 1, 1]  # never below one record
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    sizes = _run(pacing, 0.001, 10)
    assert max(sizes) <= 10 and sizes[-1] == 10  # 10 x 1 ms fills the budget
    assert all(n * 0.001 <= 0.010 for n in sizes)


def test_records_turning_slow_shrink_the_next_batch_at_once() -> None:
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    _run(pacing, 1e-6, 12)
    assert pacing.records == SOURCE_BATCH
    pacing.learn(SOURCE_BATCH, SOURCE_BATCH * 0.020)  # one slow batch: 20 ms a record
    assert pacing.records == 1
    assert pacing.cost_per_record_s == pytest.approx(0.020)


def test_records_turning_fast_again_regrow_within_a_few_dozen_batches() -> None:
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    _run(pacing, 0.020, 3)
    sizes = _run(pacing, 1e-6, 40)
    assert sizes[-1] == SOURCE_BATCH
    assert sizes == sorted(sizes), "grows monotonically while records stay fast"


def test_one_noisy_batch_costs_little_and_is_forgotten() -> None:
    """A pause (a garbage collection) in one batch of cheap records: smaller batches for a
    few rounds, then the cap again."""
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    _run(pacing, 1e-6, 12)
    pacing.learn(SOURCE_BATCH, 0.030)  # 30 ms for 1,024 records
    assert 100 < pacing.records < SOURCE_BATCH
    assert _run(pacing, 1e-6, 10)[-1] == SOURCE_BATCH


def test_partial_and_empty_batches() -> None:
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    pacing.learn(0, 1.0)  # nothing measured: nothing learned
    assert pacing.records == 1 and pacing.cost_per_record_s == 0.0
    pacing.learn(1, 0.0)  # too fast to measure: doubles
    assert pacing.records == 2
    for _ in range(20):
        pacing.learn(3, 3e-6)  # a source with 3 records at a time, cheap ones
    assert pacing.records == SOURCE_BATCH


def test_a_large_cost_per_batch_does_not_shrink_batches_to_one_record() -> None:
    """20 ms per call plus 0.1 ms per record (a pandas function over a model): one record
    per batch would still take 20 ms and multiply the calls; the batch grows until its
    records take as long as its call."""
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    sizes = _run_model(pacing, 0.020, 1e-4, 40)
    assert sizes[:PROBE_AFTER] == [1] * PROBE_AFTER  # one size: all of it looks per record
    assert 150 <= sizes[-1] <= 250
    assert pacing.fixed_cost_s == pytest.approx(0.020, rel=0.05)
    assert pacing.cost_per_record_s == pytest.approx(1e-4, rel=0.05)


def test_a_fixed_cost_under_the_budget_leaves_room_for_records() -> None:
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    sizes = _run_model(pacing, 0.005, 5e-6, 30)
    assert 900 <= sizes[-1] <= SOURCE_BATCH  # (10 ms - 5 ms) / 5 us


def test_truly_slow_records_are_probed_rarely_and_stay_one_at_a_time() -> None:
    pacing = BatchPacing(budget_s=0.010, cap=SOURCE_BATCH)
    sizes = _run_model(pacing, 0.0, 0.020, 5 * PROBE_AFTER)
    assert set(sizes) <= {1, 2}
    assert sizes.count(2) <= 5


@pytest.mark.parametrize(
    ("budget_s", "cap", "initial"), [(0.0, 8, 1), (0.01, 0, 1), (0.01, 8, 0), (0.01, 8, 9)]
)
def test_bad_settings_are_refused(budget_s: float, cap: int, initial: int) -> None:
    with pytest.raises(ValueError, match="batch pacing needs"):
        BatchPacing(budget_s, cap, initial)


def test_the_default_budget_is_a_few_milliseconds() -> None:
    assert 0.001 <= BATCH_BUDGET_S <= 0.020


# ------------------------------------------------------------------ a source task


class _Numbers(SourceOperator):
    """Counts up from 0 forever, remembering how many records each poll asked for."""

    def __init__(self) -> None:
        super().__init__(OperatorNode("src", "src", 1, "source", None, None, 1, 128, False))
        self.asked: list[int] = []
        self.next = 0

    def poll(self, max_records: int) -> list[Any] | None:
        self.asked.append(max_records)
        batch = list(range(self.next, self.next + max_records))
        self.next += max_records
        return batch


class _SleepyMap(StreamOperator):
    """A chained map with a synchronous call of ``sleep_s`` per record."""

    def __init__(self, sleep_s: float) -> None:
        super().__init__(OperatorNode("map", "map", 2, "map", None, None, 1, 128, False))
        self.sleep_s = sleep_s
        self.seen: list[int] = []

    def process_batch(self, records: list[Any]) -> None:
        for r in records:
            time.sleep(self.sleep_s)
            self.seen.append(r)


def _source_task(sleep_s: float) -> tuple[StreamTask, _Numbers, _SleepyMap]:
    src, slow = _Numbers(), _SleepyMap(sleep_s)
    writer = RecordWriter(
        [LocalOutputChannel(InputChannel(0), capacity=1 << 20)], PartitionKind.FORWARD
    )
    vertex = JobVertex(1, "src", 1, 128, (src.node, slow.node), True, False)
    task = StreamTask(
        TaskKey(VertexId(1), SubtaskIndex(0)),
        vertex,
        [src, slow],
        None,
        [writer],
        StubServices(),
        AlignmentMode.ALIGNED,
        True,
    )
    return task, src, slow


def test_a_slow_chained_map_makes_its_source_poll_a_record_or_two_at_a_time() -> None:
    """5 ms per record against the 20 ms budget: four records per poll (eight in an
    occasional probe), so a trigger waits for a few records, not for 1,024 of them."""
    task, src, slow = _source_task(0.005)
    for _ in range(12):
        assert task.run_once()
    assert src.asked[0] == 1
    fits = int(BATCH_BUDGET_S / 0.005)
    assert max(src.asked) <= 2 * fits
    assert sorted(src.asked).count(2 * fits) <= 12 // PROBE_AFTER
    assert slow.seen == list(range(sum(src.asked)))  # every record once, in order


# ------------------------------------------------------------------ a task behind the network


class _Count:
    """A ``SourceFunction`` emitting ``0 .. n - 1`` from its own thread."""

    def __init__(self, n: int) -> None:
        self.n = n

    def run(self, ctx: Any) -> None:
        for i in range(self.n):
            ctx.collect(i)


def test_a_legacy_source_runs_only_a_few_records_ahead_of_a_slow_chain() -> None:
    """What a ``SourceFunction``'s thread collected must go out before the barrier: with a
    slow chain it may collect only a few batches' worth ahead."""
    node = OperatorNode("src", "src", 1, "source", None, None, 1, 128, False)
    src = SourceFunctionOperator(node, _Count(1_000))
    src.setup(operator_context(node, lambda records: None))
    src.open()
    slow = _SleepyMap(0.003)
    writer = RecordWriter(
        [LocalOutputChannel(InputChannel(0), capacity=1 << 20)], PartitionKind.FORWARD
    )
    vertex = JobVertex(1, "src", 1, 128, (node, slow.node), True, False)
    task = StreamTask(
        TaskKey(VertexId(1), SubtaskIndex(0)),
        vertex,
        [src, slow],
        None,
        [writer],
        StubServices(),
        AlignmentMode.ALIGNED,
        True,
    )
    snapshots: list[int] = []
    task.checkpoints.checkpoint_state = lambda b: snapshots.append(len(slow.seen))  # type: ignore[method-assign]
    try:
        wait_for(lambda: len(src.context.buffer) == src.INITIAL_BUFFER, 10, 0.001, "a full buffer")
        for _ in range(10):
            task.run_once()
        bound = 4 * 2 * int(BATCH_BUDGET_S / 0.003)  # four batches, of a probe's size
        assert src.context.limit <= bound
        before = len(slow.seen)
        task.trigger_source_checkpoint(CheckpointBarrier(CheckpointId(1), 0))
        assert snapshots and snapshots[0] - before <= bound, "drained a few records only"
        assert slow.seen == list(range(len(slow.seen)))
    finally:
        src.close()
