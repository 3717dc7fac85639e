"""State backends: keyed state, timers and operator state of one subtask, and key groups.

Layers, bottom up: ``key_groups`` (stable hashing, Flink's key-group formulas) →
``keyed_states``/``ttl``/``timers`` (state objects over flat dicts) → ``snapshot_format``
(file layout, CRC-checked sections, snapshot copies) → ``heap_backend`` and
``operator_state`` (backends, snapshot/restore with redistribution). ``api`` holds the
``Protocol`` seams every backend implements; user-facing names live in
``cairn.api.state``.
"""

from cairn.state.api import KeyedSnapshot, KeyedStateBackend, OperatorSnapshot, OperatorStateBackend
from cairn.state.errors import (
    CorruptStateError,
    KeyGroupRangeError,
    StateAccessError,
    StateError,
    StateMigrationError,
    StateRestoreError,
)
from cairn.state.heap_backend import HeapKeyedStateBackend, wall_clock_ms
from cairn.state.key_groups import (
    KeyGroupAssigner,
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
    stable_hash,
    subtask_for_key_group,
)
from cairn.state.operator_state import DefaultOperatorStateBackend, redistribute_operator_state

__all__ = [
    "CorruptStateError",
    "DefaultOperatorStateBackend",
    "HeapKeyedStateBackend",
    "KeyGroupAssigner",
    "KeyGroupRange",
    "KeyGroupRangeError",
    "KeyedSnapshot",
    "KeyedStateBackend",
    "OperatorSnapshot",
    "OperatorStateBackend",
    "StateAccessError",
    "StateError",
    "StateMigrationError",
    "StateRestoreError",
    "assign_to_key_group",
    "key_group_range_for_subtask",
    "redistribute_operator_state",
    "stable_hash",
    "subtask_for_key_group",
    "wall_clock_ms",
]
