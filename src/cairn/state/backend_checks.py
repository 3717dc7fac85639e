"""The checks every keyed state backend (heap, RocksDB) makes alike: the key-group range it
is built for, the key groups it does not own, a state registered again under its name, and
the key groups a restore takes from canonical state files.

Invariant: for the same misuse every backend raises the same error with the same message;
a state's per-key-group table refuses any access to a key group the backend does not own
(``foreign_key_groups``), and a restore reads each of the backend's key groups from at most
one state file (a key group in two files is refused, never merged).

>>> check_key_group_range(KeyGroupRange(0, 63), 64)
>>> check_key_group_range(KeyGroupRange(0, 127), 64)
Traceback (most recent call last):
...
ValueError: KeyGroupRange(start=0, end=127) exceeds max parallelism 64
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from cairn.api.state import State, StateTtlConfig
from cairn.checkpoint.handles import KeyedStateHandle, StateFileReader
from cairn.state.errors import StateMigrationError, StateRestoreError
from cairn.state.key_groups import KeyGroupRange, check_parallelism
from cairn.state.keyed_states import ForeignKeyGroup
from cairn.state.snapshot_format import decode_section, read_sections
from cairn.state.ttl import same_ttl

__all__ = [
    "RegisteredState",
    "check_key_group_range",
    "foreign_key_groups",
    "owned_sections",
    "registered_state",
]


def check_key_group_range(key_group_range: KeyGroupRange, max_parallelism: int) -> None:
    """A backend for ``key_group_range`` of a job with ``max_parallelism`` key groups."""
    check_parallelism(max_parallelism, 1)
    if len(key_group_range) and key_group_range.end >= max_parallelism:
        raise ValueError(f"{key_group_range} exceeds max parallelism {max_parallelism}")


def foreign_key_groups(key_range: KeyGroupRange, max_parallelism: int) -> list[ForeignKeyGroup]:
    """One ``ForeignKeyGroup`` per key group of the job, each raising ``KeyGroupRangeError``
    (naming ``key_range``) on any access: a state's table starts as a copy of this list and
    the backend puts its own key groups' slots in.

    >>> slots = foreign_key_groups(KeyGroupRange(2, 3), 4)
    >>> slots[0].get("k")
    Traceback (most recent call last):
    ...
    cairn.state.errors.KeyGroupRangeError: the current key belongs to key group 0, outside \
this subtask's key groups 2..3: the key selector must be deterministic and keyed state may \
only be used on the keyed stream it was partitioned by
    """
    owned = f"{key_range.start}..{key_range.end}"
    return [ForeignKeyGroup(kg, owned) for kg in range(max_parallelism)]


class RegisteredState(Protocol):
    """A backend's record of one named state: its kind, its TTL config once a descriptor
    registered it, and the state object handed out then (``None``: restored, not yet
    accessed)."""

    kind: str
    ttl_config: StateTtlConfig | None
    state: State | None


def registered_state(
    table: RegisteredState | None, name: str, kind: str, ttl_config: StateTtlConfig | None
) -> State | None:
    """The state object already handed out for ``name``, or ``None`` when the backend is to
    make one (a new state, or a restored one accessed for the first time). Accessing a state
    as another kind, or with another TTL than it was registered with, or as another kind
    than it was checkpointed as, raises ``StateMigrationError``."""
    if table is None:
        return None
    if table.state is not None:
        if table.kind != kind or not same_ttl(table.ttl_config, ttl_config):
            raise StateMigrationError(
                f"state {name!r} is already registered as {table.kind} state "
                f"(ttl={table.ttl_config}); cannot access it as {kind} state (ttl={ttl_config})"
            )
        return table.state
    if table.kind != kind:
        raise StateMigrationError(
            f"state {name!r} was checkpointed as {table.kind} state and cannot be "
            f"restored as {kind} state"
        )
    return None


def owned_sections(
    handles: Sequence[KeyedStateHandle], key_range: KeyGroupRange, reader: StateFileReader
) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(path, key group, section)`` of every key group of ``key_range`` in ``handles``
    (state files written at any parallelism), read with one ranged read per file; a key
    group found in two files raises ``StateRestoreError`` before it is read twice."""
    owner: dict[int, str] = {}
    for handle in handles:
        wanted = {int(kg): r for kg, r in handle.sections.items() if int(kg) in key_range}
        for kg in wanted:
            if kg in owner:
                raise StateRestoreError(
                    f"key group {kg} is present in two state files: {owner[kg]!r} and "
                    f"{handle.path!r} (handles from different checkpoints mixed?)"
                )
            owner[kg] = handle.path
        for kg, raw in read_sections(reader, handle.path, wanted, "key group").items():
            yield handle.path, kg, decode_section(raw, handle.path, "key group", kg)
