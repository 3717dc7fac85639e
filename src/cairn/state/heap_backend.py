"""Keyed state and timers of one subtask kept in Python dicts, with asynchronous snapshots.

Invariant: each state is a list of per-key-group dicts (``{key: value}``), one slot per key
group of the job, never replaced while state objects hold it; ``snapshot()`` copies what
processing may mutate (the synchronous part) and the returned callable only reads those
copies, so processing continues while it writes. Large states are not copied: ``snapshot()``
forks, and the child serializes its copy-on-write image of the tables at a low CPU priority
(``fork_snapshot``), so neither the copy nor the pickling competes for the task's GIL.
Because state is already grouped, the snapshot file gets one section per non-empty key
group without re-hashing any key, and a restore (at any parallelism) reads only the
sections of the key groups this backend owns.

>>> from cairn.api.state import ValueStateDescriptor
>>> from cairn.clock import ManualClock
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, clock=ManualClock())
>>> count = backend.get_partitioned_state(ValueStateDescriptor("count", None))
>>> backend.set_current_key("a"); count.update((count.value() or 0) + 1); count.value()
1
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.api.state import State, StateDescriptor, StateTtlConfig
from cairn.checkpoint.handles import (
    AnyKeyedStateHandle,
    KeyedStateHandle,
    StateFileReader,
    StateFileWriter,
)
from cairn.clock import Clock, SystemClock
from cairn.ids import CheckpointId
from cairn.settings import DEFAULT_FORK_NICENESS, DEFAULT_FORK_THRESHOLD
from cairn.state.api import KeyedSnapshot, KeyedStateBackend
from cairn.state.backend_checks import (
    check_key_group_range,
    foreign_key_groups,
    owned_sections,
    registered_state,
)
from cairn.state.errors import StateMigrationError, StateRestoreError
from cairn.state.fork_snapshot import ForkedSerializer, fork_supported
from cairn.state.key_context_owner import KeyContextOwner
from cairn.state.key_groups import (
    DEFAULT_KEY_GROUP_CACHE_SIZE,
    KeyGroupAssigner,
    KeyGroupRange,
)
from cairn.state.keyed_states import (
    NO_KEY,
    Groups,
    HeapAggregatingState,
    HeapListState,
    HeapMapState,
    HeapReducingState,
    HeapValueState,
    KeyContext,
)
from cairn.state.operator_state import DefaultOperatorStateBackend
from cairn.state.snapshot_format import (
    FORMAT_VERSION,
    KEYED_MAGIC,
    TableCopy,
    assemble_file,
    copy_table,
    dumps_unshared,
    thaw_table,
)
from cairn.state.timers import EVENT_TIME, PROCESSING_TIME, TimerQueue, timer_owner
from cairn.state.ttl import (
    TtlAggregatingState,
    TtlListState,
    TtlMapState,
    TtlReducingState,
    TtlValueState,
    drop_expired,
    unwrap_ttl_table,
    wrap_ttl_table,
)

__all__ = [
    "DEFAULT_FORK_THRESHOLD",
    "HeapKeyedStateBackend",
    "OperatorStateBackend",
    "wall_clock_ms",
]

log = logging.getLogger(__name__)

# DEFAULT_FORK_THRESHOLD (re-exported from cairn.settings): entries from which a snapshot is
# serialized by a forked child instead of a thread. Below it, copying the tables in the
# synchronous part costs about as much as a fork (a few ms) and the thread's GIL share is
# short. ``CAIRN_STATE_FORK_THRESHOLD`` overrides it for a job (``off`` disables forking): the
# API reads it into ``JobSettings.state`` on the driver, and the worker passes it here.

OperatorStateBackend = DefaultOperatorStateBackend
"""The operator-state backend that goes with the heap keyed backend (Flink's default one)."""


wall_clock_ms = SystemClock().now_ms
"""Wall-clock milliseconds (``cairn.clock.SystemClock``), the backends' default TTL time."""


_STATE_CLASSES: dict[tuple[str, bool], Callable[..., State]] = {
    ("value", False): HeapValueState,
    ("list", False): HeapListState,
    ("map", False): HeapMapState,
    ("reducing", False): HeapReducingState,
    ("aggregating", False): HeapAggregatingState,
    ("value", True): TtlValueState,
    ("list", True): TtlListState,
    ("map", True): TtlMapState,
    ("reducing", True): TtlReducingState,
    ("aggregating", True): TtlAggregatingState,
}

_CONTAINER_KINDS = frozenset({"list", "map"})  # values mutated in place by add/put


@dataclass(eq=False)
class _Table:
    """One named state: its kind, whether values are TTL-wrapped, and its per-group dicts."""

    kind: str
    ttl: bool
    groups: Groups
    ttl_config: StateTtlConfig | None = None  # set once a descriptor registers the state
    state: State | None = None


@dataclass(frozen=True)
class _StateCopy:
    name: str
    kind: str
    ttl: bool
    groups: dict[int, TableCopy]  # non-empty key groups only
    expire_ttl_ms: int | None  # set when expired values are to be left out of the snapshot


class HeapKeyedStateBackend(KeyContextOwner, KeyedStateBackend):
    """Keyed state of the key groups in ``key_group_range`` (see the module docstring).

    ``clock`` drives TTL only; timers fire when the owner calls
    ``pop_due_timers``. ``file_prefix`` makes snapshot file names unique per operator.
    ``fork_threshold``: entries from which snapshots are serialized by a forked child
    (``None``, or a platform without ``fork``: never); ``fork_niceness``: the child's added
    nice value. A job's worker passes its ``JobSettings.state`` (``StateSettings``).
    """

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        clock: Clock = SystemClock(),
        *,
        file_prefix: str = "",
        key_group_cache_size: int = DEFAULT_KEY_GROUP_CACHE_SIZE,
        fork_threshold: int | None = DEFAULT_FORK_THRESHOLD,
        fork_niceness: int = DEFAULT_FORK_NICENESS,
    ) -> None:
        check_key_group_range(key_group_range, max_parallelism)
        self._range = key_group_range
        self._owned = list(key_group_range)
        self._max_parallelism = max_parallelism
        self._now_ms = clock.now_ms  # bound once: TTL reads it per state access
        self._file_prefix = file_prefix
        self._ctx = KeyContext()
        self._assigner = KeyGroupAssigner(max_parallelism, key_group_cache_size)
        self._key_group_cache = self._assigner.cache
        self._foreign = foreign_key_groups(key_group_range, max_parallelism)
        self._tables: dict[str, _Table] = {}
        self._timers = {PROCESSING_TIME: TimerQueue(), EVENT_TIME: TimerQueue()}
        self._fork_threshold = fork_threshold if fork_supported() else None
        self._fork_niceness = fork_niceness

    # ------------------------------------------------------------------------------ state

    def get_partitioned_state(self, descriptor: StateDescriptor) -> Any:
        """The state object for ``descriptor``; the same object for the same name.

        Typed per descriptor kind by the overloads of ``KeyedStateBackend`` (``Any`` here,
        which is what an override of an overloaded method may return).
        """
        if (
            not isinstance(descriptor, StateDescriptor)
            or (descriptor.kind, False) not in _STATE_CLASSES
        ):
            raise TypeError(f"unsupported state descriptor {descriptor!r}")
        name, kind, ttl_cfg = descriptor.name, descriptor.kind, descriptor.ttl_config
        table = self._tables.get(name)
        state = registered_state(table, name, kind, ttl_cfg)
        if state is not None:
            return state
        if table is None:
            table = self._new_table(name, kind, ttl_cfg is not None)
        else:  # restored, first access
            self._convert_ttl(table, ttl_cfg is not None)
        table.ttl_config = ttl_cfg
        table.state = _STATE_CLASSES[(kind, table.ttl)](
            name, self._ctx, table.groups, descriptor, self._now_ms
        )
        return table.state

    def _new_table(self, name: str, kind: str, ttl: bool) -> _Table:
        groups: Groups = list(self._foreign)
        for kg in self._owned:
            groups[kg] = {}
        table = self._tables[name] = _Table(kind, ttl, groups)
        return table

    def _convert_ttl(self, table: _Table, ttl: bool) -> None:
        """Wrap or unwrap restored values whose TTL setting changed (TTL starts now)."""
        if table.ttl == ttl:
            return
        now = self._now_ms()
        for kg in self._owned:
            group = table.groups[kg]
            if group:
                converted = (
                    wrap_ttl_table(table.kind, group, now)
                    if ttl
                    else unwrap_ttl_table(table.kind, group)
                )
                group.clear()
                group.update(converted)
        table.ttl = ttl

    def keys(self, state_name: str) -> list[Any]:
        """Keys that currently have a value in ``state_name``."""
        table = self._tables.get(state_name)
        if table is None:
            return []
        return [key for kg in self._owned for key in table.groups[kg]]

    def state_names(self) -> list[str]:
        return list(self._tables)

    def discard_current_key(self) -> None:
        """Drop every state's value of the current key (BATCH execution: a key's input has
        ended and its timers fired, so nothing reads its state again)."""
        key, kg = self._ctx.key, self._ctx.key_group
        for table in self._tables.values():
            table.groups[kg].pop(key, None)

    # ----------------------------------------------------------------------------- timers

    def _register(self, domain: str, timestamp_ms: int) -> None:
        key, key_group = timer_owner(self._ctx, self._range)
        self._timers[domain].register(timestamp_ms, key, key_group)

    def _delete(self, domain: str, timestamp_ms: int) -> None:
        self._timers[domain].delete(timestamp_ms, self.get_current_key())

    def register_processing_time_timer(self, timestamp_ms: int) -> None:
        self._register(PROCESSING_TIME, timestamp_ms)

    def delete_processing_time_timer(self, timestamp_ms: int) -> None:
        self._delete(PROCESSING_TIME, timestamp_ms)

    def next_timer_ms(self) -> int | None:
        return self._timers[PROCESSING_TIME].peek()

    def pop_due_timers(self, now_ms: int) -> list[tuple[int, Any]]:
        return self._timers[PROCESSING_TIME].pop_due(now_ms)

    def register_event_time_timer(self, timestamp_ms: int) -> None:
        self._register(EVENT_TIME, timestamp_ms)

    def delete_event_time_timer(self, timestamp_ms: int) -> None:
        self._delete(EVENT_TIME, timestamp_ms)

    def next_event_timer_ms(self) -> int | None:
        return self._timers[EVENT_TIME].peek()

    def pop_due_event_timers(self, watermark_ms: int) -> list[tuple[int, Any]]:
        return self._timers[EVENT_TIME].pop_due(watermark_ms)

    def num_timers(self) -> int:
        return sum(len(q) for q in self._timers.values())

    # --------------------------------------------------------------------------- snapshot

    def snapshot(self, checkpoint_id: CheckpointId, *, canonical: bool = False) -> KeyedSnapshot:
        """Copy the state now (synchronous part); the result writes it (asynchronous part).

        The heap's own format is the canonical one, so ``canonical`` changes nothing.

        Large states (``fork_threshold`` entries or more) are not copied: a forked child
        serializes its copy-on-write image while the task continues (``fork_snapshot``).
        """
        now = self._now_ms()
        key_range = self._range
        file_name = f"{self._file_prefix}keyed-kg{key_range.start}-{key_range.end}.state"
        if self._fork_threshold is not None and self.num_entries() >= self._fork_threshold:
            try:
                child = ForkedSerializer.start(
                    lambda: _encode(*self._capture(share=True), now),
                    KEYED_MAGIC,
                    niceness=self._fork_niceness,
                )
            except OSError as exc:
                log.warning("cannot fork a snapshot child (%s): serializing in a thread", exc)
            else:
                return _ForkedKeyedSnapshot(child, file_name, key_range)
        copies, timers = self._capture(share=False)

        def write(writer: StateFileWriter) -> KeyedStateHandle | None:
            data, ranges = assemble_file(KEYED_MAGIC, _encode(copies, timers, now))
            if not ranges:
                return None
            path = writer.write_state_file(file_name, data)
            return KeyedStateHandle(path, key_range.start, key_range.end, ranges, len(data))

        return write

    def num_entries(self) -> int:
        """Entries summed over all states (decides how snapshots are taken): a key's value,
        or each element of a list or map state's value, which a snapshot copies one by one
        (a join keeps every row of a key in one map)."""
        total = 0
        for t in self._tables.values():
            for kg in self._owned:
                group = t.groups[kg]
                if t.kind in _CONTAINER_KINDS:
                    total += sum(
                        len(v) if isinstance(v, dict | list) else 1 for v in group.values()
                    )
                else:
                    total += len(group)
        return total

    def _capture(
        self, share: bool
    ) -> tuple[list[_StateCopy], dict[str, dict[tuple[int, Any], int]]]:
        """What a snapshot writes: copies of the tables, or (``share``, for a forked child
        whose image nobody mutates) the live tables themselves.

        Shared tables are pickled inline in their sections, copies of tables holding
        anything but immutable atoms as nested pickles; a restore reads both alike.
        """
        copies: list[_StateCopy] = []
        for name, t in self._tables.items():
            # TTL tables hold (value, timestamp) tuples: copied like containers.
            containers = t.ttl or t.kind in _CONTAINER_KINDS
            groups: dict[int, TableCopy] = {
                kg: t.groups[kg] if share else copy_table(t.groups[kg], containers)
                for kg in self._owned
                if t.groups[kg]
            }
            if groups:
                cfg = t.ttl_config
                cleanup = t.ttl and cfg is not None and cfg.cleanup_in_full_snapshot
                expire = cfg.ttl_ms if cleanup and cfg is not None else None
                copies.append(_StateCopy(name, t.kind, t.ttl, groups, expire))
        timers = {domain: q.snapshot() for domain, q in self._timers.items() if len(q)}
        return copies, timers

    # ---------------------------------------------------------------------------- restore

    def restore(self, handles: Sequence[AnyKeyedStateHandle], reader: StateFileReader) -> None:
        """Load this backend's key groups from ``handles`` (written at any parallelism)."""
        canonical: list[KeyedStateHandle] = []
        for handle in handles:
            if not isinstance(handle, KeyedStateHandle):
                raise StateRestoreError(
                    f"state file {handle.path!r} was written by the RocksDB state backend in "
                    "its native format (a checkpoint, or a savepoint taken with --type "
                    "native); this job uses the heap (hashmap) backend (state.backend.type): "
                    "restore it with RocksDB, or take a canonical savepoint (the default)"
                )
            canonical.append(handle)
        for path, kg, section in owned_sections(canonical, self._range, reader):
            self._merge_section(section, path, kg)

    def _merge_section(self, section: dict[str, Any], path: str, kg: int) -> None:
        if section.get("version") != FORMAT_VERSION:
            raise StateRestoreError(
                f"state file {path!r}, key group {kg}: unsupported format version "
                f"{section.get('version')!r}"
            )
        for name, (kind, ttl, payload) in section["states"].items():
            table = self._tables.get(name) or self._new_table(name, kind, ttl)
            if table.kind != kind:
                raise StateMigrationError(
                    f"state {name!r} is {table.kind} state here but {kind} state in {path!r}"
                )
            entries = thaw_table(payload)
            if ttl != table.ttl:
                entries = (
                    wrap_ttl_table(kind, entries, self._now_ms())
                    if table.ttl
                    else unwrap_ttl_table(kind, entries)
                )
            table.groups[kg].update(entries)
        for domain, entries in section["timers"].items():
            self._timers[domain].add_all(entries, kg)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        """Nothing to do: every heap snapshot is complete in itself."""

    def dispose(self) -> None:
        for t in self._tables.values():
            for kg in self._owned:
                t.groups[kg].clear()
        self._tables.clear()
        self._timers = {PROCESSING_TIME: TimerQueue(), EVENT_TIME: TimerQueue()}
        self._ctx.key = NO_KEY


class _ForkedKeyedSnapshot:
    """Asynchronous part of a forked snapshot: wait for the child, write what it produced."""

    __slots__ = ("_child", "_file_name", "_range")

    def __init__(self, child: ForkedSerializer, file_name: str, key_range: KeyGroupRange) -> None:
        self._child, self._file_name, self._range = child, file_name, key_range

    def __call__(self, writer: StateFileWriter) -> KeyedStateHandle | None:
        data, ranges = self._child.result()
        if not ranges:
            return None
        path = writer.write_state_file(self._file_name, data)
        return KeyedStateHandle(path, self._range.start, self._range.end, ranges, len(data))


def _encode(
    copies: list[_StateCopy], timers: dict[str, dict[tuple[int, Any], int]], now: int
) -> Iterator[tuple[int, bytes]]:
    """Each non-empty key group's pickled section, in key-group order."""
    sections = _sections(copies, timers, now)
    for kg in sorted(sections):
        yield kg, dumps_unshared(sections[kg])


def _sections(
    copies: list[_StateCopy], timers: dict[str, dict[tuple[int, Any], int]], now: int
) -> dict[int, dict[str, Any]]:
    """Per-key-group section payloads (runs in the asynchronous part)."""
    sections: dict[int, dict[str, Any]] = {}

    def section(kg: int) -> dict[str, Any]:
        sec = sections.get(kg)
        if sec is None:
            sec = sections[kg] = {"version": FORMAT_VERSION, "states": {}, "timers": {}}
        return sec

    for st in copies:
        for kg, payload in st.groups.items():
            if st.expire_ttl_ms is not None:
                payload = drop_expired(st.kind, thaw_table(payload), now, st.expire_ttl_ms)
                if not payload:
                    continue
            # ``payload`` is a dict or, for containers, already-pickled bytes (nested as is).
            section(kg)["states"][st.name] = (st.kind, st.ttl, payload)
    for domain, live in timers.items():
        for (ts, key), kg in live.items():
            section(kg)["timers"].setdefault(domain, []).append((ts, key))
    return sections
