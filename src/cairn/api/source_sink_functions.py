"""Legacy source and sink functions, and the checkpoint hooks of user functions.

Invariant: interfaces only; the runtime implements every context. A ``SourceFunction`` must
emit records and update its state while holding ``ctx.get_checkpoint_lock()`` so that a
checkpoint never sees a record emitted but its offset not yet advanced (Flink's contract).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from cairn.api.runtime_context import Function, KeyedStateStore
from cairn.ids import CheckpointId

if TYPE_CHECKING:
    from cairn.api.state import ListState, ListStateDescriptor

__all__ = [
    "CheckpointListener",
    "CheckpointedFunction",
    "FunctionInitializationContext",
    "FunctionSnapshotContext",
    "OperatorStateStore",
    "SinkFunction",
    "SourceContext",
    "SourceFunction",
]


class OperatorStateStore(ABC):
    """Non-keyed (operator) state of one subtask, redistributed on rescaling."""

    @abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState[Any]:
        """Even-split redistribution: on restore each subtask gets a share of all elements."""

    @abstractmethod
    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState[Any]:
        """Union redistribution: on restore every subtask gets all elements of all subtasks."""


class FunctionSnapshotContext(ABC):
    @abstractmethod
    def get_checkpoint_id(self) -> CheckpointId: ...

    @abstractmethod
    def get_checkpoint_timestamp(self) -> int:
        """When the coordinator triggered the checkpoint, epoch milliseconds."""


class FunctionInitializationContext(ABC):
    @abstractmethod
    def is_restored(self) -> bool:
        """``True`` when state was restored from a checkpoint or savepoint."""

    def get_restored_checkpoint_id(self) -> CheckpointId | None:
        """Id of the checkpoint restored from, or ``None``."""
        return None

    @abstractmethod
    def get_operator_state_store(self) -> OperatorStateStore: ...

    @abstractmethod
    def get_keyed_state_store(self) -> KeyedStateStore | None:
        """Keyed state (functions on a KeyedStream only), else ``None``."""


class CheckpointedFunction(ABC):
    """Mix into a function that keeps its own operator state.

    >>> class Buffering(CheckpointedFunction):
    ...     def initialize_state(self, context):
    ...         self.buffer = []
    ...     def snapshot_state(self, context):
    ...         pass
    """

    @abstractmethod
    def snapshot_state(self, context: FunctionSnapshotContext) -> None:
        """Copy in-memory data into state objects; called at each checkpoint barrier."""

    @abstractmethod
    def initialize_state(self, context: FunctionInitializationContext) -> None:
        """Create state objects (and read restored values); called before ``open``."""


class CheckpointListener(ABC):  # noqa: B024 - both hooks are optional
    """Mix in to learn when checkpoints complete (e.g. to commit side effects)."""

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:  # noqa: B027
        """Checkpoint ``checkpoint_id`` completed on every task; may be skipped for some
        checkpoints (a later notification covers earlier ones)."""

    def notify_checkpoint_aborted(self, checkpoint_id: CheckpointId) -> None:  # noqa: B027
        """Checkpoint ``checkpoint_id`` was aborted."""


class SourceContext(ABC):
    """Given to ``SourceFunction.run``: how a legacy source emits records."""

    @abstractmethod
    def collect(self, element: Any) -> None: ...

    @abstractmethod
    def collect_with_timestamp(self, element: Any, timestamp: int) -> None:
        """Emit with an event-time timestamp (stored; event time is not implemented yet)."""

    @abstractmethod
    def emit_watermark(self, watermark: Any) -> None:
        """Accepted and ignored until event time is implemented."""

    @abstractmethod
    def mark_as_temporarily_idle(self) -> None: ...

    @abstractmethod
    def get_checkpoint_lock(self) -> AbstractContextManager[Any]:
        """Hold it while emitting and updating offsets: ``with ctx.get_checkpoint_lock():``."""


_SourceContext = SourceContext  # the nested alias below shadows the name inside the class


class SourceFunction(Function):
    """A legacy, non-parallel source: ``run`` loops emitting records until the input ends or
    ``cancel`` is called from another thread (``env.add_source(MySource())``)."""

    SourceContext = SourceContext

    @abstractmethod
    def run(self, ctx: _SourceContext) -> None: ...

    @abstractmethod
    def cancel(self) -> None:
        """Make ``run`` return soon; called from a different thread than ``run``."""


class SinkFunction(Function):
    """A legacy sink (``ds.add_sink(MySink())``): ``invoke`` per record, at-least-once unless
    it is also a ``CheckpointedFunction`` that makes its writes idempotent."""

    class Context(ABC):
        @abstractmethod
        def current_processing_time(self) -> int: ...

        @abstractmethod
        def current_watermark(self) -> int: ...

        @abstractmethod
        def timestamp(self) -> int | None: ...

    @abstractmethod
    def invoke(self, value: Any, context: SinkFunction.Context) -> None: ...

    def finish(self) -> None:
        """End of input: flush anything buffered (called before ``close``)."""
