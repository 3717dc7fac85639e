"""One partition of one BATCH stage: the vertex's chain of runtime operators over its sorted
input, yielding what it emits for the next exchanges.

Invariant: the operators are the streaming runtime's own, set up, opened, fed and finished
in the streaming order; what differs is only how time and keys reach them, as in Flink's
BATCH mode: no watermark but the final one travels (event time stands still, then jumps to
the end of input); a keyed head sees its input key by key, and at the end of each key its
timers fire (event time, then processing time, as if both clocks jumped to the end), its
state is dropped, and a reduce emits only the key's final value (PyFlink's BATCH reduce).
Outputs are yielded after each input batch, so a partition never holds its whole output.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from cairn.batch.plan import KEYED, EdgeRouter, Stage, StageInput
from cairn.events import MAX_WATERMARK
from cairn.graph.job_graph import JobVertex, OperatorNode
from cairn.graph.transformations import OperatorKind
from cairn.ids import AttemptNumber, JobId, SubtaskIndex
from cairn.runtime.eventtime.stamped import StampedBatch, stamp
from cairn.runtime.operators import create_operator
from cairn.runtime.operators.base import OperatorContext, StreamOperator
from cairn.runtime.operators.keyed import KeyedOperatorBase, ReduceOperator
from cairn.runtime.operators.sources import SourceFunctionOperator, SourceOperator
from cairn.state.heap_backend import HeapKeyedStateBackend, OperatorStateBackend
from cairn.state.key_groups import key_group_range_for_subtask

__all__ = ["COLLECTED", "Entry", "Out", "StageTask", "run_partition"]

BATCH_SIZE = 1024  # records per call into the chain, as the streaming runtime's batches

# An output entry: (consumer vertex, partition, sort key, input side, timestamp, record).
# A consumer vertex of COLLECTED marks a record for ``execute_and_collect`` (its partition
# is the collect sink's transformation id).
Out = tuple[int, int, tuple[Any, ...], int, int | None, Any]
COLLECTED = -1
# An input entry, in sort-key order: (sort key, input side, timestamp, record).
Entry = tuple[tuple[Any, ...], int, int | None, Any]


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


class _Emitter:
    """The tail's outputs, routed by every output edge (side outputs by their tag)."""

    def __init__(self, routers: Sequence[tuple[int, EdgeRouter]]) -> None:
        self.buffer: list[Out] = []
        self._seq = 0
        self._by_tag: dict[str | None, list[tuple[int, EdgeRouter]]] = {}
        for consumer, router in routers:
            self._by_tag.setdefault(router.edge.output_tag, []).append((consumer, router))

    def tags(self) -> list[str]:
        return [t for t in self._by_tag if t is not None]

    def output(self, tag: str | None) -> Callable[[list[Any]], None]:
        targets = self._by_tag.get(tag, [])

        def emit(records: list[Any]) -> None:
            stamps = records.timestamps if type(records) is StampedBatch else None
            seq, buf = self._seq, self.buffer
            for consumer, router in targets:
                router.emit_into(buf, consumer, records, stamps, seq)
            self._seq = seq + len(records)

        return emit

    def collect(self, transformation_id: int) -> Callable[[list[Any]], None]:
        def emit(records: list[Any]) -> None:
            self.buffer.extend((COLLECTED, transformation_id, (), 0, None, r) for r in records)

        return emit

    def take(self) -> list[Out]:
        out, self.buffer = self.buffer, []
        return out


class _FinalReduce:
    """A BATCH reduce emits the key's final value once (stamped with the end of time, as
    PyFlink's end-of-input timer emits it), not every intermediate one."""

    _NONE: Any = object()

    def __init__(self, output: Callable[[list[Any]], None]) -> None:
        self._output = output
        self._last: Any = self._NONE
        self._stamped = False

    def capture(self, records: list[Any]) -> None:
        if records:
            self._last = records[-1]
            self._stamped = type(records) is StampedBatch

    def end_key(self) -> None:
        if self._last is self._NONE:
            return
        last, self._last = self._last, self._NONE
        self._output(stamp([last], [MAX_WATERMARK]) if self._stamped else [last])


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


def run_partition(
    task: StageTask, partition: int, entries: Iterable[Entry] | None, attempt: int = 0
) -> Iterator[Out]:
    """Run partition ``partition`` of the stage over its sorted ``entries`` (``None`` for a
    source stage); yields its outputs batch by batch. Operators are closed at the end, also
    when the caller stops early or a user function raises."""
    runner = _PartitionRun(task, partition, attempt)
    ended = False
    try:
        runner.open()
        if entries is None:
            yield from runner.run_source()
        elif task.stage.keyed_head:
            yield from runner.run_keyed(entries)
        else:
            yield from runner.run_unkeyed(entries)
        yield from runner.end_input()
        ended = True
    finally:
        # After a failure (or an early stop) a close error must not hide the first error.
        runner.close(raise_errors=ended)


class _PartitionRun:
    def __init__(self, task: StageTask, partition: int, attempt: int) -> None:
        self.task = task
        vertex = task.vertex
        outputs = task.stage.outputs
        routers = [
            (
                e.target_vertex,
                EdgeRouter(task.consumer_inputs[i], task.consumer_parallelism[i], partition),
            )
            for i, e in enumerate(outputs)
        ]
        self.emitter = _Emitter(routers)
        self.ops: list[StreamOperator] = []
        self.backends: list[HeapKeyedStateBackend] = []
        self.final_reduce: _FinalReduce | None = None
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
            if i == 0 and task.stage.keyed_head and isinstance(op, ReduceOperator):
                self.final_reduce = _FinalReduce(output)
                output = self.final_reduce.capture
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
            yield from self.emitter.take()
        yield from self.emitter.take()

    # ------------------------------------------------------------------------ other heads

    def _deliver(self, side: int, records: list[Any], stamps: list[int | None]) -> None:
        batch = stamp(records, stamps) if any(t is not None for t in stamps) else records
        process_side = getattr(self.head, "process_side", None)
        if process_side is not None:
            process_side(side, batch)
        else:
            self.head.process_batch(batch)

    def run_unkeyed(self, entries: Iterable[Entry]) -> Iterator[Out]:
        records: list[Any] = []
        stamps: list[int | None] = []
        current = -1
        for _key, side, ts, record in entries:
            if side != current or len(records) >= BATCH_SIZE:
                if records:
                    self._deliver(current, records, stamps)
                    records, stamps = [], []
                    yield from self.emitter.take()
                current = side
            records.append(record)
            stamps.append(ts)
        if records:
            self._deliver(current, records, stamps)
        yield from self.emitter.take()

    def run_keyed(self, entries: Iterable[Entry]) -> Iterator[Out]:
        """Key by key: a broadcast input's records (sorted first) go in before any key."""
        head = self.head
        assert isinstance(head, KeyedOperatorBase)
        backend = self.backends[0]
        records: list[Any] = []
        stamps: list[int | None] = []
        side = -1
        run: tuple[Any, ...] | None = None  # sort key of the current key's first record
        emitter = self.emitter
        for key, s, ts, record in entries:
            # A new key: the sort key's key group or key token changed (``same_key`` inline).
            new_key = key[0] == KEYED and (run is None or key[2] != run[2] or key[1] != run[1])
            if records and (new_key or s != side or len(records) >= BATCH_SIZE):
                self._deliver(side, records, stamps)
                records, stamps = [], []
            if new_key:
                if run is not None:
                    self._end_key(head, backend)
                run = key
            if emitter.buffer:
                yield from emitter.take()
            side = s
            records.append(record)
            stamps.append(ts)
        if records:
            self._deliver(side, records, stamps)
        if run is not None:
            self._end_key(head, backend)
        yield from self.emitter.take()

    def _end_key(self, head: KeyedOperatorBase, backend: HeapKeyedStateBackend) -> None:
        head.fire_remaining_timers()
        if self.final_reduce is not None:
            self.final_reduce.end_key()
        backend.discard_current_key()

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
        yield from self.emitter.take()

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
