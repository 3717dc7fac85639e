"""Operators driven directly, without a task or I/O: one subtask of a one-input operator
(``OperatorHarness``) or of a two-input operator (``TwoInputHarness``), with a manual clock and
manual watermarks, collecting what it emits; ``snapshot_operator`` takes a snapshot into
memory to restore another harness from."""

from __future__ import annotations

from typing import Any

from cairn.checkpoint.handles import OperatorSubtaskState
from cairn.clock import ManualClock
from cairn.datastream.state import MapStateDescriptor
from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import (
    BROADCAST_STATES,
    KEY_SELECTOR2,
    OperatorKind,
    OperatorSpec,
)
from cairn.runtime.eventtime.stamped import StampedBatch
from cairn.runtime.operators import create_operator
from cairn.runtime.operators.base import OperatorRestore, StreamOperator
from cairn.state import HeapKeyedStateBackend, key_group_range_for_subtask
from cairn.state.api import KeyedStateBackend
from cairn.testing.simple_state_files import MemoryStateFiles
from tests.unit import state_backends

from ._task_services import operator_context

__all__ = ["RULES", "OperatorHarness", "TwoInputHarness", "snapshot_operator"]

RULES = MapStateDescriptor("rules", None, None)
"""The broadcast state every ``TwoInputHarness`` operator declares."""


def _records(batches: list[list[Any]]) -> list[tuple[Any, int | None]]:
    out: list[tuple[Any, int | None]] = []
    for b in batches:
        stamps = b.timestamps if type(b) is StampedBatch else [None] * len(b)
        out.extend(zip(b, stamps, strict=True))
    return out


class OperatorHarness:
    """One keyed operator subtask with collected outputs, watermarks and side outputs."""

    def __init__(
        self,
        function: Any,
        parallelism: int = 1,
        index: int = 0,
        restore: OperatorRestore | None = None,
        kind: OperatorKind = OperatorKind.KEYED_PROCESS,
        keyed: bool = True,
        key_selector: Any = None,
        backend_kind: str = "heap",
    ) -> None:
        if key_selector is None and keyed:
            key_selector = lambda r: r[0]  # noqa: E731
        spec = OperatorSpec(kind, function, key_selector)
        node = OperatorNode("op", "op", 1, kind.value, spec, None, parallelism, 128, keyed)
        self.clock = ManualClock(1_000)
        self.op: StreamOperator = create_operator(node)
        backend: KeyedStateBackend | None = None
        if keyed:
            kg_range = key_group_range_for_subtask(128, parallelism, index)
            backend = (
                HeapKeyedStateBackend(kg_range, 128, clock=self.clock)
                if backend_kind == "heap"
                else state_backends.rocksdb(kg_range, 128, self.clock)
            )
        self.batches: list[list[Any]] = []
        self.watermarks: list[int] = []
        self.side: list[list[Any]] = []
        self.op.setup(
            operator_context(
                node,
                self.batches.append,
                subtask_index=index,
                parallelism=parallelism,
                keyed_backend=backend,
                clock_ms=self.clock.now_ms,
            )
        )
        self.op.initialize_state(restore)
        self.op.open()
        self.op.watermark_output = self.watermarks.append

    def records(self) -> list[tuple[Any, int | None]]:
        """Every output record with its timestamp, in order."""
        return _records(self.batches)


class TwoInputHarness:
    """One two-input operator subtask (declaring the broadcast state ``RULES``) with collected
    outputs; keyed state sees the manual ``clock`` (state TTL); ``key_selector`` keys both
    inputs (default: a record's first field)."""

    def __init__(
        self,
        kind: OperatorKind,
        function: Any,
        keyed: bool,
        parallelism: int = 1,
        index: int = 0,
        restore: OperatorRestore | None = None,
        backend_kind: str = "heap",
        key_selector: Any = None,
    ) -> None:
        options: dict[str, Any] = {BROADCAST_STATES: (RULES,)}
        if keyed and key_selector is None:
            key_selector = lambda r: r[0]  # noqa: E731
        if keyed:
            options[KEY_SELECTOR2] = key_selector
        spec = OperatorSpec(kind, function, key_selector if keyed else None, options)
        node = OperatorNode("op", "op", 1, kind.value, spec, None, parallelism, 128, keyed)
        self.clock = ManualClock(1_000)
        self.op: StreamOperator = create_operator(node)
        backend: KeyedStateBackend | None = None
        if keyed:
            kg_range = key_group_range_for_subtask(128, parallelism, index)
            backend = (
                HeapKeyedStateBackend(kg_range, 128, clock=self.clock)
                if backend_kind == "heap"
                else state_backends.rocksdb(kg_range, 128, self.clock)
            )
        self.batches: list[list[Any]] = []
        self.op.setup(
            operator_context(
                node,
                self.batches.append,
                subtask_index=index,
                parallelism=parallelism,
                keyed_backend=backend,
            )
        )
        self.op.initialize_state(restore)
        self.op.open()

    def side(self, side: int, records: list[Any]) -> None:
        self.op.process_side(side, records)  # type: ignore[attr-defined]

    def records(self) -> list[tuple[Any, int | None]]:
        """Every output record with its timestamp, in order."""
        return _records(self.batches)

    def snapshot(self, files: MemoryStateFiles) -> OperatorSubtaskState:
        return self.op.snapshot_state(1, 0).run(files)


def snapshot_operator(
    op: StreamOperator, checkpoint_id: int = 1
) -> tuple[OperatorSubtaskState, MemoryStateFiles]:
    """``op``'s snapshot for ``checkpoint_id``, written into memory: its state and files."""
    files = MemoryStateFiles(checkpoint_id)
    return op.snapshot_state(checkpoint_id, 0).run(files), files
