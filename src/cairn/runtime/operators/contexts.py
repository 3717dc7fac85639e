"""Runtime implementations of the contexts user functions see (PyFlink interfaces).

Invariant: contexts only expose the task's own state backends and metadata; keyed state
accessed outside a keyed operator fails with Flink's message instead of returning garbage.
"""

from __future__ import annotations

from typing import Any

from cairn.api import functions as fn_api
from cairn.api.state import StateDescriptor
from cairn.ids import AttemptNumber, CheckpointId, SubtaskIndex
from cairn.runtime.operators.base import OperatorContext
from cairn.runtime.user_metrics import UserMetricGroup
from cairn.state.api import KeyedStateBackend, OperatorStateBackend

KEYED_STATE_ERROR = (
    "Keyed state can only be used on a 'keyed stream', i.e., after a 'key_by()' operation "
    "(operator {name!r})."
)


class KeyedStateAccessError(RuntimeError):
    pass


class StreamingRuntimeContext(fn_api.RuntimeContext):
    def __init__(self, ctx: OperatorContext) -> None:
        self._ctx = ctx

    def _keyed(self) -> KeyedStateBackend:
        backend = self._ctx.keyed_backend
        if backend is None:
            raise KeyedStateAccessError(KEYED_STATE_ERROR.format(name=self._ctx.node.name))
        return backend

    def get_task_name(self) -> str:
        return self._ctx.task_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._ctx.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._ctx.max_parallelism

    def get_index_of_this_subtask(self) -> SubtaskIndex:
        return self._ctx.subtask_index

    def get_attempt_number(self) -> AttemptNumber:
        return self._ctx.attempt

    def get_task_name_with_subtasks(self) -> str:
        c = self._ctx
        return f"{c.task_name} ({c.subtask_index + 1}/{c.parallelism})"

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return self._ctx.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> UserMetricGroup:
        """This operator's metrics: counters, gauges, meters and distributions reported
        with the task's metrics (REST, Prometheus, web UI)."""
        return UserMetricGroup(self._ctx.user_metrics, self._ctx.node.name)

    def restored_keyed_state_names(self) -> frozenset[str]:
        return frozenset(self._ctx.restored_schema)

    def _declared(self, state_descriptor: Any) -> Any:
        """The state of a descriptor the function registers, checked against the restored
        state's schema (``OperatorContext.declare_keyed_state``)."""
        backend = self._keyed()
        if isinstance(state_descriptor, StateDescriptor):
            self._ctx.declare_keyed_state(state_descriptor)
        return backend.get_partitioned_state(state_descriptor)

    def get_state(self, state_descriptor: Any) -> Any:
        return self._declared(state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._declared(state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._declared(state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._declared(state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._declared(state_descriptor)


class OperatorStateStoreImpl:
    def __init__(self, backend: OperatorStateBackend) -> None:
        self._backend = backend

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._backend.get_list_state(state_descriptor)

    def get_union_list_state(self, state_descriptor: Any) -> Any:
        return self._backend.get_union_list_state(state_descriptor)


class FunctionInitializationContextImpl:
    def __init__(self, ctx: OperatorContext, restored: bool) -> None:
        self._ctx = ctx
        self._restored = restored

    def is_restored(self) -> bool:
        return self._restored

    def get_operator_state_store(self) -> OperatorStateStoreImpl:
        return OperatorStateStoreImpl(self._ctx.operator_backend)

    def get_keyed_state_store(self) -> StreamingRuntimeContext:
        return StreamingRuntimeContext(self._ctx)


class FunctionSnapshotContextImpl:
    def __init__(self, checkpoint_id: CheckpointId, timestamp_ms: int) -> None:
        self._id = checkpoint_id
        self._ts = timestamp_ms

    def get_checkpoint_id(self) -> CheckpointId:
        return self._id

    def get_checkpoint_timestamp(self) -> int:
        return self._ts
