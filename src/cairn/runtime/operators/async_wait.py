"""The async wait operator (``AsyncDataStream``): an ``AsyncFunction`` with many inputs in
flight, its coroutines on an event loop of the subtask (``async_runner``).

Invariants:
- At most ``capacity`` records are issued and not yet emitted; while that many are, or
  inputs wait to be issued, the operator refuses input (``accepts_input``) and its task
  stops reading: backpressure. A batch that arrives is taken whole; what exceeds the
  capacity waits, not issued, in ``_waiting``.
- Results are emitted on the task thread only, with their input's timestamp, in the order
  ``async_queue`` allows (ordered; or unordered within the records between two watermarks).
  A watermark leaves only after every record before it.
- Checkpoint (Flink's guarantee): before the barrier, what completed is emitted; every input
  not emitted yet (issued, completed or waiting, and the watermarks between them) is operator
  state, and a restored subtask issues them again, in order, before any new input. Results
  emitted before the barrier are downstream of it; none is emitted twice after a restore.
- End of input (the final watermark, ``finish``) waits for every request: the task thread
  blocks until the last result is out (at most the timeout, with retries, per request).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from cairn.api.async_wait import ASYNC_CONFIG, AsyncWaitConfig
from cairn.api.state import ListStateDescriptor
from cairn.events import DEFAULT_CHECKPOINT_OPTIONS, MAX_WATERMARK, CheckpointOptions
from cairn.graph.job_graph import OperatorNode
from cairn.ids import CheckpointId
from cairn.runtime.eventtime.stamped import StampedBatch, stamp
from cairn.runtime.operators.async_queue import AsyncQueue, Entry
from cairn.runtime.operators.async_runner import AsyncRunner
from cairn.runtime.operators.base import OperatorRestore, OperatorSnapshot
from cairn.runtime.operators.contexts import StreamingRuntimeContext
from cairn.runtime.operators.user_function import UserFunctionOperator

__all__ = ["FAULT_POINT", "AsyncWaitOperator"]

log = logging.getLogger(__name__)

FAULT_POINT = "async-in-flight"  # runtime/faults.py: killed with requests in flight
_STATE = ListStateDescriptor("_cairn_async_wait_inputs", None)
_WAIT_S = 0.05


def _no_wake() -> None:
    """Until the worker installs its wake-up signal."""


class AsyncWaitOperator(UserFunctionOperator):
    """Runs an ``AsyncFunction`` (see the module docstring for its guarantees)."""

    limits_input = True

    def __init__(self, node: OperatorNode) -> None:
        super().__init__(node)
        assert node.spec is not None
        self.config: AsyncWaitConfig = node.spec.options[ASYNC_CONFIG]
        self.wake: Any = _no_wake  # the worker's wake-up, installed after ``open``
        self._queue = AsyncQueue(self.config.ordered)
        self._waiting: deque[Entry] = deque()  # taken, not issued (over the capacity)
        # Outcomes from the loop's thread: (entry, ok, result or error); deque appends and
        # pops are atomic, so the two threads share it without a lock.
        self._outcomes: deque[tuple[Entry, bool, Any]] = deque()
        self._stamped = False  # inputs carried timestamps: outputs do too
        self._restored_inputs: list[tuple[Any, ...]] = []
        self._snapshot_sizes: dict[CheckpointId, int] = {}
        self._runner: AsyncRunner | None = None

    # -------------------------------------------------------------------- lifecycle

    def initialize_state(self, restore: OperatorRestore | None) -> None:
        super().initialize_state(restore)
        self._inputs_state = self.ctx.operator_backend.get_list_state(_STATE)
        if restore is not None:
            self._restored_inputs = list(self._inputs_state.get() or [])

    def open(self) -> None:
        name = f"{self.name} ({self.ctx.subtask_index + 1}/{self.ctx.parallelism})"
        config = self.config
        self._runner = AsyncRunner(
            self.function, config.timeout_ms, config.retry, self._on_outcome, name
        )
        # ``open`` runs on the loop's thread: clients bound to a loop (aiohttp) work there.
        self._runner.start(StreamingRuntimeContext(self.ctx))
        if self._restored_inputs:
            log.info("%s: issuing %d restored inputs again", name, len(self._restored_inputs))
        for item in self._restored_inputs:
            if item[0] == "w":
                self._waiting.append(Entry(None, None, watermark=item[1]))
            else:
                self._stamped = self._stamped or item[2] is not None
                self._waiting.append(Entry(item[1], item[2]))
        self._restored_inputs = []
        self._issue()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()

    def finish(self) -> None:
        self._wait_for_all()

    # -------------------------------------------------------------------- input

    def accepts_input(self) -> bool:
        """Whether the task may hand this operator more input (else: backpressure)."""
        return not self._waiting and self._queue.records < self.config.capacity

    def process_batch(self, records: list[Any]) -> None:
        waiting = self._waiting
        if type(records) is StampedBatch:
            self._stamped = True
            for r, t in zip(records, records.timestamps, strict=True):
                waiting.append(Entry(r, t))
        else:
            for r in records:
                waiting.append(Entry(r, None))
        self._issue()
        self._emit_completed()

    def process_watermark(self, timestamp: int) -> None:
        self._waiting.append(Entry(None, None, watermark=timestamp))
        self._issue()
        self._emit_completed()
        if timestamp >= MAX_WATERMARK:
            self._wait_for_all()  # end of input: every result before the final watermark

    def _issue(self) -> None:
        """Move waiting inputs into the queue while the capacity allows; start their requests."""
        waiting, queue, capacity = self._waiting, self._queue, self.config.capacity
        started: list[Entry] = []
        while waiting:
            entry = waiting[0]
            if entry.watermark is None:
                if queue.records >= capacity:
                    break
                started.append(entry)
            queue.add(waiting.popleft())
        if started:
            assert self._runner is not None
            self._runner.submit(started)

    # -------------------------------------------------------------------- output

    def _on_outcome(self, entry: Entry, ok: bool, result: Any) -> None:
        """On the loop's thread: hand the outcome to the task thread and wake it."""
        self._outcomes.append((entry, ok, result))
        self.wake()

    def next_timer_ms(self) -> int | None:
        return 0 if self._outcomes else None  # outcomes to emit: run now

    def on_processing_time(self, now_ms: int) -> None:
        self._emit_completed()

    def _emit_completed(self) -> None:
        """Apply the outcomes that arrived and emit what the queue lets go; an error fails
        the task with the user's own exception (and its traceback)."""
        outcomes, queue = self._outcomes, self._queue
        while True:
            while outcomes:
                entry, ok, result = outcomes.popleft()
                if not ok:
                    raise result
                queue.complete(entry, result)
            ready = queue.pop_ready()
            if not ready:
                return
            values: list[Any] = []
            stamps: list[int | None] = []
            for entry in ready:
                if entry.watermark is None:
                    values.extend(entry.result)
                    stamps.extend([entry.timestamp] * len(entry.result))
                    continue
                self._flush(values, stamps)
                values, stamps = [], []
                self.current_watermark = entry.watermark
                self.watermark_output(entry.watermark)
            self._flush(values, stamps)
            self._issue()  # capacity freed: waiting inputs go out (watermarks may be ready)

    def _flush(self, values: list[Any], stamps: list[int | None]) -> None:
        if values:
            self.output(stamp(values, stamps) if self._stamped else values)

    def _wait_for_all(self) -> None:
        runner = self._runner
        assert runner is not None
        while self._queue.records or self._waiting or len(self._queue):
            self._emit_completed()
            if not (self._queue.records or self._waiting or len(self._queue)):
                break
            if not self._outcomes:
                runner.wait_for_outcome(_WAIT_S)

    # -------------------------------------------------------------------- checkpoints

    def prepare_snapshot_pre_barrier(self, checkpoint_id: CheckpointId) -> None:
        self._emit_completed()  # what is there goes out ahead of the barrier

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        inputs: list[tuple[Any, ...]] = []
        for entry in [*self._queue.entries(), *self._waiting]:
            if entry.watermark is not None:
                inputs.append(("w", entry.watermark))
            else:
                inputs.append(("r", entry.value, entry.timestamp))
        self._inputs_state.update(inputs)
        self._snapshot_sizes[checkpoint_id] = sum(1 for i in inputs if i[0] == "r")
        return super().snapshot_state(checkpoint_id, timestamp_ms, options)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        super().notify_checkpoint_complete(checkpoint_id)
        stored = self._snapshot_sizes.pop(checkpoint_id, 0)
        for older in [c for c in self._snapshot_sizes if c < checkpoint_id]:
            del self._snapshot_sizes[older]
        faults = getattr(self.ctx.services, "faults", None)
        if faults is not None and faults.active and self._queue.records:
            # Tests: kill while requests are in flight, once a completed checkpoint (the one
            # a restore starts from) stores at least ``records`` of them.
            faults.check(
                FAULT_POINT,
                self.ctx.task_name,
                self.ctx.subtask_index,
                checkpoint_id,
                records=stored,
            )
