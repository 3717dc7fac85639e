"""User-facing state API with PyFlink's names (``pyflink.datastream.state``).

Invariant: descriptors only *describe* state (name, kind, TTL, functions); state objects are
created by a state backend (``cairn.state``) and always act on the current key's value.
Type infos are hints: they are stored and never interpreted here.

>>> desc = ValueStateDescriptor("count", None)
>>> desc.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(5)).build())
>>> desc.get_name()
'count'
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from cairn.common.time import Duration, Time

__all__ = [
    "AggregatingState",
    "AggregatingStateDescriptor",
    "AppendingState",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "MergingState",
    "ReducingState",
    "ReducingStateDescriptor",
    "State",
    "StateDescriptor",
    "StateTtlConfig",
    "ValueState",
    "ValueStateDescriptor",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
OUT = TypeVar("OUT")


# --------------------------------------------------------------------------- state objects


class State(ABC):
    """Base of every state object; ``clear`` removes the current key's value."""

    __slots__ = ()

    @abstractmethod
    def clear(self) -> None: ...


class ValueState(State, Generic[T]):
    """A single value per key. ``value()`` is ``None`` until ``update``; ``update(None)`` clears."""

    __slots__ = ()

    @abstractmethod
    def value(self) -> T: ...

    @abstractmethod
    def update(self, value: T | None) -> None: ...


class AppendingState(State, Generic[IN, OUT]):
    """State that values are added to and whose combined result can be read."""

    __slots__ = ()

    @abstractmethod
    def get(self) -> OUT: ...

    @abstractmethod
    def add(self, value: IN) -> None: ...


class MergingState(AppendingState[IN, OUT]):
    """Appending state whose instances can be merged (PyFlink marker class)."""

    __slots__ = ()


class ListState(MergingState[T, Iterable[T]]):
    """A list per key. ``get()`` returns a new list (``[]`` when empty); ``None`` is rejected."""

    __slots__ = ()

    @abstractmethod
    def update(self, values: Iterable[T]) -> None: ...

    @abstractmethod
    def add_all(self, values: Iterable[T]) -> None: ...

    def __iter__(self) -> Iterator[T]:
        return iter(self.get())


class ReducingState(MergingState[T, T]):
    """Values added are combined with the descriptor's reduce function; ``get()`` → result."""

    __slots__ = ()


class AggregatingState(MergingState[IN, OUT]):
    """Values added are folded into an accumulator; ``get()`` → ``get_result(accumulator)``."""

    __slots__ = ()


class MapState(State, Generic[K, V]):
    """A dict per key. Iteration methods return snapshots, so mutating while iterating is safe."""

    __slots__ = ()

    @abstractmethod
    def get(self, key: K) -> V: ...

    @abstractmethod
    def put(self, key: K, value: V) -> None: ...

    @abstractmethod
    def put_all(self, dict_value: Mapping[K, V]) -> None: ...

    @abstractmethod
    def remove(self, key: K) -> None: ...

    @abstractmethod
    def contains(self, key: K) -> bool: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[K, V]]: ...

    @abstractmethod
    def keys(self) -> Iterable[K]: ...

    @abstractmethod
    def values(self) -> Iterable[V]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: K) -> V:
        return self.get(key)

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: K) -> None:
        self.remove(key)

    def __contains__(self, key: K) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())


# ----------------------------------------------------------------------------------- TTL


class StateTtlConfig:
    """Time-to-live of keyed state values (processing time), built with ``new_builder``.

    >>> cfg = (StateTtlConfig.new_builder(Duration.of_seconds(5))
    ...        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
    ...        .cleanup_full_snapshot().build())
    >>> cfg.ttl_ms, cfg.is_enabled()
    (5000, True)
    """

    class UpdateType(enum.Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(enum.Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(enum.Enum):
        ProcessingTime = 0

    def __init__(
        self,
        update_type: StateTtlConfig.UpdateType,
        state_visibility: StateTtlConfig.StateVisibility,
        ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic,
        ttl: Time | Duration,
        cleanup_full_snapshot: bool = False,
    ) -> None:
        ttl_ms = _to_millis(ttl)
        if ttl_ms <= 0:
            raise ValueError(f"state TTL must be positive, got {ttl_ms} ms")
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self.ttl_ms = ttl_ms
        self.cleanup_in_full_snapshot = cleanup_full_snapshot

    @staticmethod
    def new_builder(ttl: Time | Duration) -> StateTtlConfig.Builder:
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> StateTtlConfig.UpdateType:
        return self._update_type

    def get_state_visibility(self) -> StateTtlConfig.StateVisibility:
        return self._state_visibility

    def get_ttl(self) -> Time | Duration:
        return self._ttl

    def get_ttl_time_characteristic(self) -> StateTtlConfig.TtlTimeCharacteristic:
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    @property
    def update_on_read(self) -> bool:
        return self._update_type is StateTtlConfig.UpdateType.OnReadAndWrite

    @property
    def return_expired(self) -> bool:
        vis = StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
        return self._state_visibility is vis

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig<update_type={self._update_type.name}, "
            f"state_visibility={self._state_visibility.name}, ttl={self.ttl_ms} ms, "
            f"cleanup_full_snapshot={self.cleanup_in_full_snapshot}>"
        )

    class Builder:
        """PyFlink's builder; defaults: OnCreateAndWrite, NeverReturnExpired, ProcessingTime."""

        def __init__(self, ttl: Time | Duration) -> None:
            self._ttl = ttl
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._cleanup_full_snapshot = False

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(
            self, state_visibility: StateTtlConfig.StateVisibility
        ) -> StateTtlConfig.Builder:
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            vis = StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
            return self.set_state_visibility(vis)

        def never_return_expired(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic
        ) -> StateTtlConfig.Builder:
            self._characteristic = ttl_time_characteristic
            return self

        def use_processing_time(self) -> StateTtlConfig.Builder:
            return self.set_ttl_time_characteristic(
                StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            )

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            """Leave expired values out of every snapshot (live state is cleaned lazily)."""
            self._cleanup_full_snapshot = True
            return self

        def cleanup_incrementally(
            self, cleanup_size: int, run_cleanup_for_every_record: bool
        ) -> StateTtlConfig.Builder:
            """Accepted for compatibility; expired values are always cleaned lazily on access."""
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int, periodic_compaction_time: Any = None
        ) -> StateTtlConfig.Builder:
            """Accepted for compatibility; has no effect on the heap backend."""
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            """Accepted for compatibility; the heap backend has no background cleanup."""
            return self

        def set_ttl(self, ttl: Time | Duration) -> StateTtlConfig.Builder:
            self._ttl = ttl
            return self

        def build(self) -> StateTtlConfig:
            return StateTtlConfig(
                self._update_type,
                self._state_visibility,
                self._characteristic,
                self._ttl,
                self._cleanup_full_snapshot,
            )


def _to_millis(ttl: Any) -> int:
    if isinstance(ttl, (Time, Duration)) or hasattr(ttl, "to_milliseconds"):
        return int(ttl.to_milliseconds())
    raise TypeError(
        f"TTL must be a cairn.common.time.Time or Duration, got {type(ttl).__name__}; "
        "e.g. StateTtlConfig.new_builder(Time.seconds(5))"
    )


# ---------------------------------------------------------------------------- descriptors


class StateDescriptor:
    """Names a piece of keyed (or operator) state; the name is its identity in checkpoints."""

    #: Short kind tag used by backends and in snapshots ("value", "list", ...).
    kind: str = ""

    def __init__(self, name: str, type_info: Any) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"state name must be a non-empty str, got {name!r}")
        self.name = name
        self.type_info = type_info
        self._ttl_config: StateTtlConfig | None = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Let values expire ``ttl`` after their last write (or read, per ``UpdateType``)."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"expected a StateTtlConfig, got {type(ttl_config).__name__}")
        self._ttl_config = ttl_config

    @property
    def ttl_config(self) -> StateTtlConfig | None:
        """The TTL config if TTL is enabled, else ``None``."""
        cfg = self._ttl_config
        return cfg if cfg is not None and cfg.is_enabled() else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    """Describes a ``ValueState``: ``ValueStateDescriptor("count", Types.LONG())``."""

    kind = "value"

    def __init__(self, name: str, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    """Describes a ``ListState``: ``ListStateDescriptor("buffer", Types.STRING())``."""

    kind = "list"

    def __init__(self, name: str, elem_type_info: Any = None) -> None:
        super().__init__(name, elem_type_info)
        self.elem_type_info = elem_type_info


class MapStateDescriptor(StateDescriptor):
    """Describes a ``MapState``: ``MapStateDescriptor("seen", Types.STRING(), Types.INT())``."""

    kind = "map"

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None) -> None:
        super().__init__(name, (key_type_info, value_type_info))
        self.key_type_info = key_type_info
        self.value_type_info = value_type_info


class ReducingStateDescriptor(StateDescriptor):
    """Describes a ``ReducingState``; ``reduce_function`` has ``.reduce(a, b)`` or is callable.

    >>> ReducingStateDescriptor("sum", lambda a, b: a + b, None).reduce(1, 2)
    3
    """

    kind = "reducing"

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None) -> None:
        super().__init__(name, type_info)
        reduce = getattr(reduce_function, "reduce", None)
        if callable(reduce):
            self.reduce: Callable[[Any, Any], Any] = reduce
        elif callable(reduce_function):
            self.reduce = reduce_function
        else:
            raise TypeError("The input must be a ReduceFunction or a callable function!")
        self._reduce_function = reduce_function

    def get_reduce_function(self) -> Any:
        return self._reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    """Describes an ``AggregatingState``; ``agg_function`` is an ``AggregateFunction``.

    It needs ``create_accumulator()``, ``add(value, accumulator) -> accumulator`` and
    ``get_result(accumulator)``; ``state_type_info`` describes the accumulator.
    """

    kind = "aggregating"

    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None) -> None:
        super().__init__(name, state_type_info)
        missing = [
            m
            for m in ("create_accumulator", "add", "get_result")
            if not callable(getattr(agg_function, m, None))
        ]
        if missing:
            raise TypeError(
                "The input must be an AggregateFunction (missing " + ", ".join(missing) + ")"
            )
        self._agg_function = agg_function

    def get_agg_function(self) -> Any:
        return self._agg_function
