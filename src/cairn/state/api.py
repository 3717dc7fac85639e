"""The seams between operators/tasks and state backends (heap and RocksDB).

Invariant: a backend is used from its task thread only, except for the callable returned by
``snapshot``: that asynchronous part may run on any thread while the task keeps processing,
and it reads nothing that the task thread mutates afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, overload

from cairn.api.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    State,
    StateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from cairn.checkpoint.handles import (
    AnyKeyedStateHandle,
    OperatorStateHandle,
    StateFileReader,
    StateFileWriter,
)
from cairn.ids import CheckpointId, SubtaskIndex
from cairn.state.broadcast_state import BroadcastMapState
from cairn.state.key_groups import KeyGroupRange

__all__ = [
    "KeyedSnapshot",
    "KeyedStateBackend",
    "OperatorSnapshot",
    "OperatorStateBackend",
]

KeyedSnapshot = Callable[[StateFileWriter], AnyKeyedStateHandle | None]
"""Asynchronous part of a keyed snapshot: writes its files, ``None`` when there is no state."""

OperatorSnapshot = Callable[[StateFileWriter], OperatorStateHandle | None]
"""Asynchronous part of an operator-state snapshot."""


class KeyedStateBackend(Protocol):
    """Keyed state and keyed timers of one subtask of one operator."""

    @property
    def key_group_range(self) -> KeyGroupRange: ...

    @property
    def max_parallelism(self) -> int: ...

    def set_current_key(self, key: Any, key_group: int | None = None) -> None:
        """Make ``key`` the key every state object and timer call acts on.

        ``key_group`` may be passed when the caller already computed it (skips hashing).
        """

    def get_current_key(self) -> Any: ...

    @property
    def current_key_group(self) -> int: ...

    @overload
    def get_partitioned_state(self, descriptor: ValueStateDescriptor) -> ValueState[Any]: ...
    @overload
    def get_partitioned_state(self, descriptor: ListStateDescriptor) -> ListState[Any]: ...
    @overload
    def get_partitioned_state(self, descriptor: MapStateDescriptor) -> MapState[Any, Any]: ...
    @overload
    def get_partitioned_state(self, descriptor: ReducingStateDescriptor) -> ReducingState[Any]: ...
    @overload
    def get_partitioned_state(
        self, descriptor: AggregatingStateDescriptor
    ) -> AggregatingState[Any, Any]: ...
    @overload
    def get_partitioned_state(self, descriptor: StateDescriptor) -> State: ...
    def get_partitioned_state(self, descriptor: StateDescriptor) -> State:
        """The state object for ``descriptor`` (the same object for the same name)."""
        ...

    def keys(self, state_name: str) -> list[Any]:
        """Keys that currently have a value in ``state_name``."""
        ...

    def register_processing_time_timer(self, timestamp_ms: int) -> None: ...

    def delete_processing_time_timer(self, timestamp_ms: int) -> None: ...

    def next_timer_ms(self) -> int | None:
        """Earliest registered processing-time timer, or ``None``."""
        ...

    def pop_due_timers(self, now_ms: int) -> list[tuple[int, Any]]:
        """Remove and return processing-time timers ``<= now_ms`` as ``(ts, key)``, by time."""
        ...

    def register_event_time_timer(self, timestamp_ms: int) -> None: ...

    def delete_event_time_timer(self, timestamp_ms: int) -> None: ...

    def next_event_timer_ms(self) -> int | None: ...

    def pop_due_event_timers(self, watermark_ms: int) -> list[tuple[int, Any]]: ...

    def snapshot(self, checkpoint_id: CheckpointId, *, canonical: bool = False) -> KeyedSnapshot:
        """Synchronous part of a checkpoint; returns the asynchronous part.

        ``canonical`` (savepoints): write the heap backend's format (``snapshot_format``)
        whatever the backend, so that any backend restores it; otherwise the backend's own.
        """
        ...

    def restore(self, handles: Sequence[AnyKeyedStateHandle], reader: StateFileReader) -> None:
        """Load the key groups of this backend's range from any number of old subtasks."""

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        """``checkpoint_id`` completed (an incremental backend may now reuse its files)."""

    def dispose(self) -> None: ...


class OperatorStateBackend(Protocol):
    """Non-keyed (operator) list state of one subtask of one operator."""

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState[Any]:
        """Split-redistributed list state: on rescale each element goes to one subtask."""
        ...

    def get_union_list_state(self, descriptor: ListStateDescriptor) -> ListState[Any]:
        """Union-redistributed list state: on restore every subtask gets every element."""
        ...

    def get_broadcast_state(self, descriptor: MapStateDescriptor) -> BroadcastMapState:
        """Broadcast state: on restore subtask ``i`` gets old subtask ``i mod old_n``'s copy."""
        ...

    def snapshot(self, checkpoint_id: CheckpointId) -> OperatorSnapshot: ...

    def restore(
        self,
        old_states: Mapping[SubtaskIndex, Sequence[OperatorStateHandle]],
        old_parallelism: int,
        subtask_index: SubtaskIndex,
        parallelism: int,
        reader: StateFileReader,
    ) -> None: ...

    def dispose(self) -> None: ...
