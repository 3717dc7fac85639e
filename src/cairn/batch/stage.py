"""One partition of one BATCH stage: the vertex's chain of runtime operators over its sorted
input, yielding what it emits for the next exchanges.

Invariant: the operators are the streaming runtime's own, set up, opened, fed and finished
in the streaming order; what differs is only how time and keys reach them, as in Flink's
BATCH mode: no watermark but the final one travels (event time stands still, then jumps to
the end of input); a keyed head sees its input key by key, and at the end of each key its
timers fire (event time, then processing time, as if both clocks jumped to the end), its
state is dropped, and a reduce emits only the key's final value (PyFlink's BATCH reduce).
Outputs leave in blocks (``cairn.batch.exchange``) once enough are buffered, so a partition
never holds its whole output.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cairn.api.aggregations import AccumulateReduceFunction
from cairn.batch.exchange import (
    COLLECTED,
    BlockWriter,
    Chunk,
    Out,
    SortedBlock,
    read_blocks,
)
from cairn.batch.plan import EdgeRouter, Stage, StageInput
from cairn.events import MAX_WATERMARK
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.graph.transformations import OperatorKind
from cairn.ids import AttemptNumber, JobId, SubtaskIndex
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.operators import create_operator
from cairn.runtime.operators.base import OperatorContext, StreamOperator
from cairn.runtime.operators.keyed import KeyedOperatorBase, ReduceOperator
from cairn.runtime.operators.sources import SourceFunctionOperator, SourceOperator
from cairn.runtime.operators.user_function import resolve_method
from cairn.state.heap_backend import HeapKeyedStateBackend, OperatorStateBackend
from cairn.state.key_groups import key_group_range_for_subtask

__all__ = ["COLLECTED", "Out", "PartitionCounts", "StageTask", "run_partition"]

BATCH_SIZE = 1024  # records per call into the chain, as the streaming runtime's batches


class _NoServices:
    """Worker services of a BATCH task: nothing to tell a job master."""

    def send_to_master(self, message: Any) -> None:
        return None


class _CollectOperator(StreamOperator):
    """``execute_and_collect`` in BATCH mode: records go to the client after the job."""

    def __init__(self, node: OperatorNode, sink: Callable[[list[Any]], None]) -> None:
        super().__init__(node)
        self._sink = sink

    def process_batch(self, records: list[Any]) -> None:
        self._sink(list(records))


def _final_watermark_only(target: Callable[[int], None]) -> Callable[[int], None]:
    def forward(timestamp: int) -> None:
        if timestamp == MAX_WATERMARK:
            target(timestamp)

    return forward


def _drop_watermark(timestamp: int) -> None:
    return None


def _drop_status(status: Any) -> None:
    return None


class _FoldReduce:
    """A BATCH reduce: folds each key's records into the key's final value and emits it
    once (stamped with the end of time, as PyFlink's end-of-input timer emits it), not every
    running value; no state access per record, the key set once per key."""

    def __init__(self, head: ReduceOperator, backend: HeapKeyedStateBackend) -> None:
        self._head = head
        self._backend = backend
        self._reduce: Callable[[Any, Any], Any] | None = None

    def key(self, chunks: list[Chunk]) -> None:
        head = self._head
        first = chunks[0][1][0]
        self._backend.set_current_key(head.key_selector(first))
        stamped = any(stamps is not None for _, _, stamps in chunks)
        if isinstance(head.function, AccumulateReduceFunction):  # sum & co.: one pass
            records = chunks[0][1] if len(chunks) == 1 else [r for c in chunks for r in c[1]]
            acc = head.function.fold(records)
        else:
            reduce = self._reduce
            if reduce is None:  # resolved once the operator is open
                reduce = self._reduce = resolve_method(head.function, "reduce")
            acc = _NOTHING
            for _side, records, _stamps in chunks:
                it = iter(records)
                if acc is _NOTHING:
                    acc = next(it)
                for r in it:
                    acc = reduce(acc, r)
        head.output(stamp([acc], [MAX_WATERMARK]) if stamped else [acc])


_NOTHING: Any = object()


@dataclass
class StageTask:
    """What a partition needs to run: the stage, its vertex (with the user's functions), the
    consumers' parallelism per output edge, and the job's identity."""

    stage: Stage
    vertex: JobVertex
    consumer_inputs: dict[int, StageInput]  # output edge index -> the consumer's view of it
    consumer_parallelism: dict[int, int]  # output edge index -> consumer parallelism
    job_id: JobId
    job_parameters: dict[str, str] = field(default_factory=dict)


# A partition's counts so far (records in, records out: Flink's numRecordsIn/Out; the ms
# it has run) and whether it completed; while it runs, at most every REPORT_INTERVAL_S.
PartitionCounts = Callable[[int, int, float, bool], None]
REPORT_INTERVAL_S = 0.5


def run_partition(
    task: StageTask,
    partition: int,
    blocks: Iterable[SortedBlock] | None,
    attempt: int = 0,
    counts: PartitionCounts | None = None,
) -> Iterator[Out]:
    """Run partition ``partition`` of the stage over its sorted input ``blocks`` (``None``
    for a source stage); yields its output blocks as they fill up. Operators are closed at
    the end, also when the caller stops early or a user function raises. ``counts`` hears
    the record counts while the partition runs and, once its operators closed without
    error, the final ones (``done``)."""
    runner = _PartitionRun(task, partition, attempt, counts)
    ended = False
    try:
        runner.open()
        if blocks is None:
            yield from runner.run_source()
        else:
            yield from runner.run_input(blocks)
        yield from runner.end_input()
        ended = True
    finally:
        # After a failure (or an early stop) a close error must not hide the first error.
        runner.close(raise_errors=ended)
    if counts is not None:
        counts(runner.records_in, runner.emitter.records_out, runner.elapsed_ms(), True)


class _PartitionRun:
    def __init__(
        self, task: StageTask, partition: int, attempt: int, counts: PartitionCounts | None
    ) -> None:
        self.task = task
        self._counts = counts
        self._started = time.monotonic()
        self._next_report = self._started + REPORT_INTERVAL_S
        vertex = task.vertex
        outputs = task.stage.outputs
        routers = [
            (
                e.target_vertex,
                EdgeRouter(task.consumer_inputs[i], task.consumer_parallelism[i], partition),
            )
            for i, e in enumerate(outputs)
        ]
        self.emitter = BlockWriter(routers, vertex.id, partition)
        self.ops: list[StreamOperator] = []
        self.backends: list[HeapKeyedStateBackend] = []
        self.fold: _FoldReduce | None = None
        nodes = list(vertex.operators)
        for node in nodes:
            if node.kind == OperatorKind.COLLECT.value:
                self.ops.append(
                    _CollectOperator(node, self.emitter.collect(node.transformation_id))
                )
            else:
                self.ops.append(create_operator(node))
        tail_output = self.emitter.output(None)
        for i, (node, op) in enumerate(zip(nodes, self.ops, strict=True)):
            output = self.ops[i + 1].process_batch if i + 1 < len(self.ops) else tail_output
            keyed = None
            if node.keyed and not node.kind.startswith("source"):
                keyed = HeapKeyedStateBackend(
                    key_group_range_for_subtask(node.max_parallelism, node.parallelism, partition),
                    node.max_parallelism,
                    fork_threshold=None,
                )
                self.backends.append(keyed)
            op.setup(
                OperatorContext(
                    node=node,
                    task_name=vertex.name,
                    subtask_index=SubtaskIndex(partition),
                    parallelism=vertex.parallelism,
                    max_parallelism=node.max_parallelism,
                    attempt=AttemptNumber(attempt),
                    job_id=task.job_id,
                    output=output,
                    operator_backend=OperatorStateBackend(),
                    keyed_backend=keyed,
                    clock_ms=lambda: int(time.time() * 1000),
                    services=_NoServices(),
                    checkpointing=False,
                    job_parameters=dict(task.job_parameters),
                    watermark_interval_ms=0,
                )
            )
        for op, nxt in itertools.pairwise(self.ops):
            op.watermark_output = _final_watermark_only(nxt.process_watermark)
        self.ops[-1].watermark_output = _drop_watermark
        for op in self.ops:
            op.status_output = _drop_status
        tags = self.emitter.tags()
        if tags:
            self.ops[-1].side_outputs = {t: self.emitter.output(t) for t in tags}
        self.head = self.ops[0]
        self.records_in = 0  # records the head was given (a source's: none)
        self._opened: list[StreamOperator] = []
        self._wakeup = threading.Event()

    def open(self) -> None:
        for op in self.ops:
            op.initialize_state(None)
        for op in reversed(self.ops):
            op.open()
            self._opened.append(op)
            if isinstance(op, SourceFunctionOperator):
                op.wake = self._wakeup.set

    # ------------------------------------------------------------------------ sources

    def run_source(self) -> Iterator[Out]:
        head = self.head
        assert isinstance(head, (SourceOperator, SourceFunctionOperator))
        deliver = self.ops[1].process_batch if len(self.ops) > 1 else head.output
        while True:
            batch = head.poll(BATCH_SIZE)
            if batch is None:
                head.end_of_event_time()
                break
            if not batch:
                hint = head.available_in_s()
                self._wakeup.wait(0.05 if hint is None else min(max(hint, 0.0), 0.05))
                self._wakeup.clear()
                continue
            deliver(batch)
            self._tick()
            yield from self.emitter.take()
        yield from self.emitter.take()

    # ------------------------------------------------------------------------ other heads

    def _deliver(self, side: int, records: list[Any], stamps: list[int | None] | None) -> None:
        self.records_in += len(records)
        for start in range(0, len(records), BATCH_SIZE):
            part = records if len(records) <= BATCH_SIZE else records[start : start + BATCH_SIZE]
            if stamps is not None:
                part = stamp(part, stamps[start : start + BATCH_SIZE])
            process_side = getattr(self.head, "process_side", None)
            if process_side is not None:
                process_side(side, part)
            else:
                self.head.process_batch(part)

    def run_input(self, blocks: Iterable[SortedBlock]) -> Iterator[Out]:
        """Unkeyed blocks in order, then key by key (a keyed head's broadcast input, sorted
        first, goes in before any key); a key's timers fire at the end of its records."""
        keyed = self.task.stage.keyed_head
        head = self.head
        emitter = self.emitter
        fold = None
        if keyed and isinstance(head, ReduceOperator):
            fold = _FoldReduce(head, self.backends[0])
        for is_key, chunks in read_blocks(blocks):
            if fold is not None and is_key:
                self.records_in += sum(len(records) for _, records, _ in chunks)
                fold.key(chunks)
            else:
                for side, records, stamps in chunks:
                    self._deliver(side, records, stamps)
            if is_key and keyed:
                assert isinstance(head, KeyedOperatorBase)
                head.fire_remaining_timers()
                self.backends[0].discard_current_key()
            self._tick()
            out = emitter.take()
            if out:
                yield from out

    def _tick(self) -> None:
        """Tell ``counts`` the counts so far, if ``REPORT_INTERVAL_S`` passed."""
        if self._counts is None:
            return
        now = time.monotonic()
        if now >= self._next_report:
            self._next_report = now + REPORT_INTERVAL_S
            self._counts(self.records_in, self.emitter.records_out, self.elapsed_ms(), False)

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self._started) * 1000.0

    # ------------------------------------------------------------------------ the end

    def end_input(self) -> Iterator[Out]:
        """The final watermark, the remaining timers of keyed operators (all keys at once:
        none are left in a head fed key by key), then ``finish`` head to tail."""
        if not self.task.stage.is_source:
            self.head.process_watermark(MAX_WATERMARK)
        for op in self.ops:
            if isinstance(op, KeyedOperatorBase):
                op.fire_remaining_timers()
        for op in self.ops:
            op.finish()
        sys.stdout.flush()
        yield from self.emitter.take(final=True)

    def close(self, raise_errors: bool) -> None:
        """Close every opened operator (the tail first); the first error is raised when
        ``raise_errors``, after all were closed."""
        errors: list[BaseException] = []
        for op in self._opened:
            try:
                op.close()
            except Exception as e:
                errors.append(e)
        for backend in self.backends:
            backend.dispose()
        if errors and raise_errors:
            raise errors[0]
