"""Operator (non-keyed) list state and broadcast state, and their redistribution on restore.

Invariant: every element checkpointed by any old subtask is restored exactly once for
``split`` state, and by every new subtask for ``union`` state; new subtask ``i`` gets old
subtask ``i mod old_parallelism``'s copy of ``broadcast`` state. At unchanged parallelism each
subtask gets back exactly its own split lists; on rescale the lists of all old subtasks are
concatenated in old-subtask order and cut into contiguous, near-equal chunks (Flink's
``RoundRobinOperatorStateRepartitioner``: the one-element surplus rotates over states).

>>> old = {0: {"offsets": ("split", [1, 2, 3])}, 1: {"offsets": ("split", [4])}}
>>> [redistribute_operator_state(old, 2, 3, i)["offsets"][1] for i in range(3)]
[[1, 2], [3], [4]]
>>> rules = {i: {"rules": ("broadcast", [("max", i)])} for i in range(2)}
>>> [redistribute_operator_state(rules, 2, 3, i)["rules"][1] for i in range(3)]
[[('max', 0)], [('max', 1)], [('max', 0)]]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.api.state import ListState, ListStateDescriptor, MapStateDescriptor
from cairn.checkpoint.handles import OperatorStateHandle, StateFileReader, StateFileWriter
from cairn.ids import CheckpointId, SubtaskIndex
from cairn.state.api import OperatorSnapshot
from cairn.state.broadcast_state import BROADCAST, BroadcastMapState
from cairn.state.errors import StateMigrationError, StateRestoreError
from cairn.state.keyed_states import check_list_element, list_elements
from cairn.state.snapshot_format import (
    OPERATOR_MAGIC,
    assemble_file,
    decode_section,
    dumps,
    read_sections,
)

__all__ = [
    "SPLIT",
    "UNION",
    "DefaultOperatorStateBackend",
    "OperatorListState",
    "redistribute_operator_state",
]

SPLIT = "split"
UNION = "union"
_SECTION = "section"  # the single section of an operator state file
_WHAT = "operator state"


class OperatorListState(ListState[Any]):
    """A plain list owned by one subtask; ``get()`` returns a copy."""

    __slots__ = ("_values", "mode", "name")

    def __init__(self, name: str, mode: str, values: list[Any]) -> None:
        self.name, self.mode, self._values = name, mode, values

    def get(self) -> list[Any]:
        return list(self._values)

    def add(self, value: Any) -> None:
        check_list_element(value)
        self._values.append(value)

    def add_all(self, values: Iterable[Any] | None) -> None:
        self._values.extend(list_elements(values))

    def update(self, values: Iterable[Any] | None) -> None:
        self._values[:] = list_elements(values)

    def clear(self) -> None:
        self._values.clear()

    def __len__(self) -> int:
        return len(self._values)

    def live_values(self) -> list[Any]:
        """The list itself, not a copy: for the backend's snapshot, which copies it at once."""
        return self._values

    def restore(self, values: Iterable[Any]) -> None:
        """Append restored ``values`` (checked when they were first added)."""
        self._values.extend(values)


class DefaultOperatorStateBackend:
    """Operator list states of one subtask (Flink's ``DefaultOperatorStateBackend``)."""

    def __init__(self, *, file_prefix: str = "") -> None:
        self._file_prefix = file_prefix
        self._states: dict[str, OperatorListState] = {}
        self._broadcast: dict[str, BroadcastMapState] = {}

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState[Any]:
        return self._get(descriptor, SPLIT)

    def get_union_list_state(self, descriptor: ListStateDescriptor) -> ListState[Any]:
        return self._get(descriptor, UNION)

    def get_broadcast_state(self, descriptor: MapStateDescriptor) -> BroadcastMapState:
        """The broadcast state named by ``descriptor`` (created empty on first use)."""
        if not isinstance(descriptor, MapStateDescriptor):
            raise TypeError(f"broadcast state needs a MapStateDescriptor, got {descriptor!r}")
        if descriptor.name in self._states:
            raise StateMigrationError(
                f"operator state {descriptor.name!r} is list state; cannot access it as "
                "broadcast state"
            )
        state = self._broadcast.get(descriptor.name)
        if state is None:
            state = self._broadcast[descriptor.name] = BroadcastMapState(descriptor.name)
        return state

    def _get(self, descriptor: ListStateDescriptor, mode: str) -> OperatorListState:
        if not isinstance(descriptor, ListStateDescriptor):
            raise TypeError(f"operator state needs a ListStateDescriptor, got {descriptor!r}")
        if descriptor.name in self._broadcast:
            raise StateMigrationError(
                f"operator state {descriptor.name!r} is broadcast state; cannot access it as "
                f"{mode} list state"
            )
        state = self._states.get(descriptor.name)
        if state is None:
            state = self._states[descriptor.name] = OperatorListState(descriptor.name, mode, [])
        elif state.mode != mode:
            raise StateMigrationError(
                f"operator state {descriptor.name!r} is {state.mode} list state; "
                f"cannot access it as {mode} list state"
            )
        return state

    def state_names(self) -> list[str]:
        return [*self._states, *self._broadcast]

    def snapshot(self, checkpoint_id: CheckpointId) -> OperatorSnapshot:
        """Copy the lists now (synchronous part); the result writes them (asynchronous part)."""
        lists: dict[str, list[Any]] = {
            n: s.live_values() for n, s in self._states.items() if len(s)
        }
        modes = {n: s.mode for n, s in self._states.items()}
        for name, b in self._broadcast.items():
            if len(b):
                lists[name] = b.items()
                modes[name] = BROADCAST
        # Operator state is small: serializing it here is the cheapest isolating copy.
        payload = dumps(lists) if lists else b""
        states = {name: (modes[name], len(values)) for name, values in lists.items()}
        file_name = f"{self._file_prefix}operator.state"

        def write(writer: StateFileWriter) -> OperatorStateHandle | None:
            if not states:
                return None
            data, ranges = assemble_file(OPERATOR_MAGIC, [(_SECTION, payload)])
            path = writer.write_state_file(file_name, data)
            return OperatorStateHandle(path, ranges[_SECTION], states, len(data))

        return write

    def restore(
        self,
        old_states: Mapping[SubtaskIndex, Sequence[OperatorStateHandle]],
        old_parallelism: int,
        subtask_index: SubtaskIndex,
        parallelism: int,
        reader: StateFileReader,
    ) -> None:
        """Load this subtask's share of the operator state of all old subtasks."""
        old: dict[int, dict[str, tuple[str, list[Any]]]] = {}
        for old_index, handles in old_states.items():
            for handle in handles:
                if not _needed(handle, int(old_index), old_parallelism, subtask_index, parallelism):
                    continue
                raw = read_sections(reader, handle.path, {_SECTION: handle.section}, _WHAT)
                payload = decode_section(raw[_SECTION], handle.path, _WHAT, _SECTION)
                lists = old.setdefault(int(old_index), {})
                for name, values in payload.items():
                    mode = _mode_of(handle, name)
                    if name in lists:
                        lists[name][1].extend(values)
                    else:
                        lists[name] = (mode, list(values))
        mine = redistribute_operator_state(old, old_parallelism, parallelism, subtask_index)
        for name, (mode, values) in mine.items():
            if mode == BROADCAST:
                self._broadcast[name] = BroadcastMapState(name, values)
                continue
            state = self._states.get(name)
            if state is None:
                self._states[name] = OperatorListState(name, mode, list(values))
            elif state.mode != mode:
                raise StateMigrationError(
                    f"operator state {name!r} is registered as {state.mode} but restored as {mode}"
                )
            else:
                state.restore(values)

    def dispose(self) -> None:
        self._states.clear()
        self._broadcast.clear()


def _mode_of(handle: OperatorStateHandle, name: str) -> str:
    meta = handle.states.get(name)
    if meta is None:
        raise StateRestoreError(f"state file {handle.path!r} holds {name!r} absent from its handle")
    mode, _count = meta
    return str(mode)


def _needed(
    handle: OperatorStateHandle,
    old_index: int,
    old_parallelism: int,
    subtask_index: int,
    parallelism: int,
) -> bool:
    """Whether a handle can contribute anything to ``subtask_index`` (skips useless reads)."""
    modes = {str(meta[0]) for meta in handle.states.values()}
    if UNION in modes:
        return True
    if BROADCAST in modes and old_index == subtask_index % old_parallelism:
        return True
    return old_parallelism != parallelism or old_index == subtask_index


@dataclass(frozen=True)
class _Named:
    mode: str
    parts: list[tuple[int, Sequence[Any]]]  # (old subtask index, elements), any order


def redistribute_operator_state(
    old: Mapping[int, Mapping[str, tuple[str, Sequence[Any]]]],
    old_parallelism: int,
    parallelism: int,
    subtask_index: int,
) -> dict[str, tuple[str, list[Any]]]:
    """The share of subtask ``subtask_index`` (of ``parallelism``) of old operator state.

    ``old`` maps an old subtask index to ``{state name: (mode, elements)}``; old subtasks
    without state may be absent. Pure: the I/O-free core of ``restore``.
    """
    if not 0 <= subtask_index < parallelism:
        raise ValueError(
            f"subtask index {subtask_index} out of range for parallelism {parallelism}"
        )
    by_name: dict[str, _Named] = {}
    for old_index, states in old.items():
        if not 0 <= old_index < old_parallelism:
            raise StateRestoreError(
                f"old subtask index {old_index} out of range for old parallelism {old_parallelism}"
            )
        for name, (mode, elements) in states.items():
            if mode not in (SPLIT, UNION, BROADCAST):
                raise StateRestoreError(f"operator state {name!r}: unknown mode {mode!r}")
            named = by_name.setdefault(name, _Named(mode, []))
            if named.mode != mode:
                raise StateRestoreError(
                    f"operator state {name!r} is {named.mode} in one old subtask, {mode} in another"
                )
            named.parts.append((old_index, elements))

    out: dict[str, tuple[str, list[Any]]] = {}
    surplus_start = 0
    for name in sorted(by_name):
        named = by_name[name]
        if named.mode == BROADCAST:
            copy = subtask_index % old_parallelism
            out[name] = (
                BROADCAST,
                [e for i, elements in named.parts if i == copy for e in elements],
            )
            continue
        if named.mode == SPLIT and parallelism == old_parallelism:
            mine = [e for idx, elements in named.parts if idx == subtask_index for e in elements]
            out[name] = (SPLIT, mine)
            continue
        ordered = [e for _, elements in sorted(named.parts, key=lambda p: p[0]) for e in elements]
        if named.mode == UNION:
            out[name] = (UNION, ordered)
            continue
        bounds = _chunk_bounds(len(ordered), parallelism, surplus_start)
        surplus_start = (surplus_start + len(ordered) % parallelism) % parallelism
        lo, hi = bounds[subtask_index]
        out[name] = (SPLIT, ordered[lo:hi])
    return out


def _chunk_bounds(total: int, parallelism: int, surplus_start: int) -> list[tuple[int, int]]:
    """Contiguous chunks; subtasks ``surplus_start, surplus_start + 1, ...`` get one extra."""
    base, surplus = divmod(total, parallelism)
    bounds: list[tuple[int, int]] = []
    lo = 0
    for i in range(parallelism):
        extra = 1 if (i - surplus_start) % parallelism < surplus else 0
        bounds.append((lo, lo + base + extra))
        lo += base + extra
    return bounds
