"""State descriptors and state interfaces at PyFlink's path (``pyflink.datastream.state``).

Invariant: a re-export only; the definitions live in ``cairn.api.state``, below the runtime and
the state backends, which import them from there.
"""

from cairn.api.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    AppendingState,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    MergingState,
    ReducingState,
    ReducingStateDescriptor,
    State,
    StateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)

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
