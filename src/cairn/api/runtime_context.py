"""The ``Function`` base class and the ``RuntimeContext`` it receives in ``open``.

Invariant: interfaces only; the runtime implements ``RuntimeContext`` once per operator
subtask. State getters act on the current key and exist only for functions on a KeyedStream.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from cairn.ids import AttemptNumber, SubtaskIndex

if TYPE_CHECKING:
    from cairn.api.state import (
        AggregatingState,
        AggregatingStateDescriptor,
        ListState,
        ListStateDescriptor,
        MapState,
        MapStateDescriptor,
        ReducingState,
        ReducingStateDescriptor,
        ValueState,
        ValueStateDescriptor,
    )

__all__ = ["Function", "KeyedStateStore", "MetricGroup", "RuntimeContext"]


class KeyedStateStore(ABC):
    """Creates (or re-attaches to) keyed state by descriptor; names identify state in
    checkpoints, so the same name must always be used with the same descriptor type."""

    @abstractmethod
    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState[Any]: ...

    @abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState[Any]: ...

    @abstractmethod
    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState[Any, Any]: ...

    @abstractmethod
    def get_reducing_state(
        self, state_descriptor: ReducingStateDescriptor
    ) -> ReducingState[Any]: ...

    @abstractmethod
    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState[Any, Any]: ...


class MetricGroup:
    """Metrics of a function (PyFlink's names). This base records nothing; the runtime
    context of a running task returns ``cairn.runtime.user_metrics.UserMetricGroup``, whose
    metrics are reported with the task's."""

    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        return self

    def counter(self, name: str) -> NoOpMetric:
        return NoOpMetric()

    def gauge(self, name: str, obj: Any) -> None:
        return None

    def meter(self, name: str, time_span_in_seconds: int = 60) -> NoOpMetric:
        return NoOpMetric()

    def distribution(self, name: str) -> NoOpMetric:
        return NoOpMetric()


class NoOpMetric:
    """Counter, meter and distribution that record nothing."""

    def inc(self, n: int = 1) -> None:
        return None

    def dec(self, n: int = 1) -> None:
        return None

    def mark_event(self, value: int = 1) -> None:
        return None

    def update(self, value: int) -> None:
        return None

    def get_count(self) -> int:
        return 0


class RuntimeContext(KeyedStateStore):
    """Where a function runs: task name, subtask index, parallelism, job parameters, and (on a
    keyed stream) the keyed state of the current key."""

    @abstractmethod
    def get_task_name(self) -> str: ...

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int:
        """The max parallelism, i.e. the number of key groups."""

    @abstractmethod
    def get_index_of_this_subtask(self) -> SubtaskIndex:
        """0-based index of this parallel instance."""

    @abstractmethod
    def get_attempt_number(self) -> AttemptNumber:
        """0 on the first deployment, incremented on every restart."""

    @abstractmethod
    def get_task_name_with_subtasks(self) -> str:
        """``"MyTask (3/6)"``: task name, subtask index + 1, parallelism."""

    @abstractmethod
    def get_job_parameter(self, key: str, default_value: str) -> str:
        """A value of ``pipeline.global-job-parameters`` (``ExecutionConfig``)."""

    def get_metrics_group(self) -> MetricGroup:
        """A no-op group unless the runtime overrides it."""
        return MetricGroup()

    def restored_keyed_state_names(self) -> frozenset[str]:
        """Names of the keyed states in the snapshot this subtask restored (Cairn's own
        operators check their state's format with it; not in PyFlink)."""
        return frozenset()


class Function(ABC):  # noqa: B024 - every method is optional; subclasses add the abstract one
    """Base of all user-defined functions."""

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: B027
        """Called once per subtask before the first record (after state is restored)."""

    def close(self) -> None:  # noqa: B027
        """Called once at the end; release what ``open`` acquired."""
