"""Operators that host a user function: open/close, CheckpointedFunction, CheckpointListener.

Invariant: the user's function object is the one that was deserialized on this worker; its
``open`` is called once before any record and ``close`` once at the end, and operator state
registered in ``initialize_state`` is snapshotted after ``snapshot_state`` ran.
"""

from __future__ import annotations

from typing import Any

from cairn.events import DEFAULT_CHECKPOINT_OPTIONS, CheckpointOptions
from cairn.graph.job_graph import OperatorNode
from cairn.ids import CheckpointId
from cairn.runtime.operators.base import OperatorRestore, OperatorSnapshot, StreamOperator
from cairn.runtime.operators.contexts import (
    FunctionInitializationContextImpl,
    FunctionSnapshotContextImpl,
    StreamingRuntimeContext,
)


def resolve_method(function: Any, name: str) -> Any:
    """``function.name`` for Function objects, the function itself for plain callables."""
    method = getattr(function, name, None)
    if method is not None and callable(method):
        return method
    if callable(function):
        return function
    raise TypeError(f"{function!r} has no method {name!r} and is not callable")


def is_checkpointed(function: Any) -> bool:
    return callable(getattr(function, "snapshot_state", None)) and callable(
        getattr(function, "initialize_state", None)
    )


class UserFunctionOperator(StreamOperator):
    def __init__(self, node: OperatorNode, function: Any | None = None) -> None:
        super().__init__(node)
        self.function: Any = (
            function
            if function is not None
            else (node.spec.function if node.spec is not None else node.source)
        )

    def initialize_state(self, restore: OperatorRestore | None) -> None:
        super().initialize_state(restore)
        if is_checkpointed(self.function):
            self.function.initialize_state(
                FunctionInitializationContextImpl(self.ctx, restore is not None)
            )

    def open(self) -> None:
        opener = getattr(self.function, "open", None)
        if callable(opener):
            opener(StreamingRuntimeContext(self.ctx))

    def close(self) -> None:
        closer = getattr(self.function, "close", None)
        if callable(closer):
            closer()

    def snapshot_state(
        self,
        checkpoint_id: CheckpointId,
        timestamp_ms: int,
        options: CheckpointOptions = DEFAULT_CHECKPOINT_OPTIONS,
    ) -> OperatorSnapshot:
        if is_checkpointed(self.function):
            self.function.snapshot_state(FunctionSnapshotContextImpl(checkpoint_id, timestamp_ms))
        return super().snapshot_state(checkpoint_id, timestamp_ms, options)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        hook = getattr(self.function, "notify_checkpoint_complete", None)
        if callable(hook):
            hook(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: CheckpointId) -> None:
        hook = getattr(self.function, "notify_checkpoint_aborted", None)
        if callable(hook):
            hook(checkpoint_id)
