"""Base class of runtime operators and the context a task gives them.

Invariant: an operator is driven by exactly one task thread: ``setup`` → ``initialize_state``
→ ``open`` → (``process_batch`` | ``process_watermark`` | ``on_processing_time`` | checkpoint
calls)* → ``finish`` (end of input) → ``close``. ``snapshot_state`` is the synchronous part of
a checkpoint and returns callables that the task runs in the background (the asynchronous
part). An operator passes a watermark on only after it emitted what the watermark fired, so
records never fall behind a watermark that should have come after them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cairn.checkpoint.handles import (
    AnyKeyedStateHandle,
    KeyedStateSchema,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateFileReader,
    StateFileWriter,
    pickle_inline,
)
from cairn.events import (
    DEFAULT_CHECKPOINT_OPTIONS,
    MAX_WATERMARK,
    MIN_WATERMARK,
    CheckpointOptions,
    Watermark,
    WatermarkStatus,
)
from cairn.graph.job_graph import OperatorNode
from cairn.ids import AttemptNumber, CheckpointId, JobId, SubtaskIndex
from cairn.runtime.user_metrics import UserMetricRegistry
from cairn.state.api import KeyedStateBackend, OperatorStateBackend
from cairn.state.errors import StateMigrationError
from cairn.state.schema import describe, incompatibility, schema_of

Output = Callable[[list[Any]], None]


class WorkerServices(Protocol):
    """What operators may ask of the worker that hosts them."""

    def send_to_master(self, message: Any) -> None: ...


@dataclass
class OperatorContext:
    node: OperatorNode
    task_name: str
    subtask_index: SubtaskIndex
    parallelism: int
    max_parallelism: int
    attempt: AttemptNumber
    job_id: JobId
    output: Output
    operator_backend: OperatorStateBackend
    keyed_backend: KeyedStateBackend | None
    clock_ms: Callable[[], int]
    services: WorkerServices
    checkpointing: bool = False
    job_parameters: dict[str, str] = field(default_factory=dict)
    watermark_interval_ms: int = 200  # pipeline.auto-watermark-interval (0: not periodic)
    # The task's user-defined metrics (``get_metrics_group()``), shared by its chain.
    user_metrics: UserMetricRegistry = field(default_factory=UserMetricRegistry)
    # Keyed states' schemas: restored ones (checked against) and those declared since; the
    # operator's snapshots record them (``cairn.state.schema``).
    restored_schema: dict[str, KeyedStateSchema] = field(default_factory=dict)
    keyed_schema: dict[str, KeyedStateSchema] = field(default_factory=dict)
    _checked: dict[str, Any] = field(default_factory=dict, repr=False)

    def declare_keyed_state(self, descriptor: Any) -> None:
        """A function registers keyed state: check it against the restored schema.

        Raises:
            StateMigrationError: the snapshot holds the state with another kind or type.
        """
        if self._checked.get(descriptor.name) is descriptor:
            return  # the same descriptor again (get_state per record): checked already
        new = schema_of(descriptor)
        old = self.restored_schema.get(descriptor.name)
        if old is not None:
            why = incompatibility(old, new)
            if why is not None:
                raise StateMigrationError(
                    f"operator {self.node.uid!r}: keyed state {descriptor.name!r} cannot be "
                    f"restored: {why} (the snapshot's {describe(old)}, the job's "
                    f"{describe(new)}); keep the old descriptor, or give the state a new "
                    "name (the old state is then dropped)"
                )
        self.keyed_schema[descriptor.name] = new
        self._checked[descriptor.name] = descriptor


@dataclass(frozen=True)
class OperatorRestore:
    """All subtask states of one operator in the checkpoint we restore from."""

    old_parallelism: int
    subtasks: dict[SubtaskIndex, OperatorSubtaskState]
    reader: StateFileReader


@dataclass
class OperatorSnapshot:
    """Result of the synchronous part; ``run`` performs the asynchronous part."""

    keyed: Callable[[StateFileWriter], AnyKeyedStateHandle | None] | None
    operator: Callable[[StateFileWriter], OperatorStateHandle | None] | None
    inline: dict[str, Any] = field(default_factory=dict)
    keyed_schema: dict[str, KeyedStateSchema] = field(default_factory=dict)

    def run(self, writer: StateFileWriter) -> OperatorSubtaskState:
        keyed = self.keyed(writer) if self.keyed else None
        op = self.operator(writer) if self.operator else None
        return OperatorSubtaskState(
            keyed=(keyed,) if keyed is not None else (),
            operator=(op,) if op is not None else (),
            inline=pickle_inline(self.inline),
            keyed_schema=self.keyed_schema if keyed is not None else {},
        )


def _noop_output(records: list[Any]) -> None:
    return None


def _noop_watermark(timestamp: int) -> None:
    return None


def _noop_status(status: WatermarkStatus) -> None:
    return None


class StreamOperator:
    """Base: stateless pass-through plumbing; subclasses override what they need."""

    is_source = False
    generates_watermarks = False  # sets the watermark (and idleness) downstream itself
    # Takes ``KeyGroupedBatch``es (its key selector's key groups, computed by the producer):
    # a hash edge into a head operator that says so carries them (``keyed_batch``).
    takes_key_groups = False
    # May refuse input for a while (``accepts_input``): the task then reads none (async I/O's
    # capacity). Only operators that say so are asked, so others cost the task nothing.
    limits_input = False

    def __init__(self, node: OperatorNode) -> None:
        self.node = node
        self.uid = node.uid
        self.name = node.name
        self.ctx: OperatorContext
        self.output: Output = _noop_output
        self.restored = False
        # Event time, wired by the task's ``ChainEvents``: the next operator's
        # process_watermark (or the task's output), the status output, side outputs by tag id.
        self.current_watermark = MIN_WATERMARK
        self.watermark_output: Callable[[int], None] = _noop_watermark
        self.status_output: Callable[[WatermarkStatus], None] = _noop_status
        self.side_outputs: dict[str, Output] = {}

    # -------------------------------------------------------------------- lifecycle

    def setup(self, ctx: OperatorContext) -> None:
        self.ctx = ctx
        self.output = ctx.output

    def initialize_state(self, restore: OperatorRestore | None) -> None:
        if restore is None:
            return
        self.restored = True
        old = restore.subtasks
        if self.ctx.keyed_backend is not None:
            handles = [h for s in old.values() for h in s.keyed]
            for s in old.values():
                for name, schema in s.keyed_schema.items():
                    self.ctx.restored_schema.setdefault(name, schema)
            self.ctx.keyed_schema.update(self.ctx.restored_schema)  # kept until redeclared
            if handles:
                self.ctx.keyed_backend.restore(handles, restore.reader)
        op_states = {i: list(s.operator) for i, s in old.items() if s.operator}
        if op_states:
            self.ctx.operator_backend.restore(
                op_states,
                restore.old_parallelism,
                self.ctx.subtask_index,
                self.ctx.parallelism,
                restore.reader,
            )

    def open(self) -> None:
        pass

    def notify_backend_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        """Tell the keyed state backend (before ``notify_checkpoint_complete``)."""
        ctx = getattr(self, "ctx", None)  # set by ``setup``
        if ctx is not None and ctx.keyed_backend is not None:
            ctx.keyed_backend.notify_checkpoint_complete(checkpoint_id)

    def accepts_input(self) -> bool:
        """Whether the task may hand this operator input now (asked if ``limits_input``)."""
        return True

    def process_batch(self, records: list[Any]) -> None:
        self.output(records)

    def on_processing_time(self, now_ms: int) -> None:
        pass

    def process_watermark(self, timestamp: int) -> None:
        """Event time advanced to ``timestamp``: fire what it fires, then pass it on."""
        self.current_watermark = timestamp
        self.watermark_output(timestamp)

    def emit_events(self, events: tuple[Watermark | WatermarkStatus, ...]) -> None:
        """Send watermarks (through the rest of the chain) and statuses downstream, in order."""
        for event in events:
            if isinstance(event, Watermark):
                self.current_watermark = event.timestamp
                self.watermark_output(event.timestamp)
            else:
                self.status_output(event)

    def end_of_event_time(self) -> None:
        """A source's input ended: send the final watermark."""
        self.process_watermark(MAX_WATERMARK)

    def next_timer_ms(self) -> int | None:
        return None

    def finish(self) -> None:
        """End of input: flush what is buffered (still may emit)."""

    def close(self) -> None:
        pass

    # -------------------------------------------------------------------- checkpoints

    def prepare_snapshot_pre_barrier(self, checkpoint_id: CheckpointId) -> None:
        """Called before the barrier is forwarded (may still emit records)."""

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        backend = self.ctx.keyed_backend
        keyed = (
            backend.snapshot(checkpoint_id, canonical=options.canonical_state)
            if backend is not None
            else None
        )
        op = self.ctx.operator_backend.snapshot(checkpoint_id)
        return OperatorSnapshot(keyed=keyed, operator=op, keyed_schema=dict(self.ctx.keyed_schema))

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: CheckpointId) -> None:
        pass
