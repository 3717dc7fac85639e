"""Keyed state and timers of one subtask in an embedded RocksDB on the worker's local disk.

Invariant: the database lives in a directory of its own, created fresh for each backend
(each subtask of each operator in each attempt) under ``local_dir`` and removed by
``dispose``; it holds every state value (one column family per state, see ``codecs`` for the
key layout) and every keyed timer (written through to the ``_timers`` column family by
``timers.RocksTimers``), so a RocksDB checkpoint of it is the whole snapshot. The synchronous
part of a snapshot freezes the write caches (``native``: bounded by their size, not the
state's); a thread of the backend then writes them and takes that checkpoint (flush + hard
links) before anything after the barrier reaches RocksDB; the asynchronous part uploads its
files. Savepoints (canonical snapshots) take the checkpoint in the synchronous part.

>>> import tempfile
>>> from cairn.api.state import ValueStateDescriptor
>>> from cairn.common.typeinfo import Types
>>> b = RocksDBKeyedStateBackend(KeyGroupRange(0, 127), 128, local_dir=tempfile.mkdtemp())
>>> count = b.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
>>> b.set_current_key("a"); count.update((count.value() or 0) + 1); count.value()
1
>>> b.dispose()
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.api.state import State, StateDescriptor, StateTtlConfig
from cairn.checkpoint.handles import (
    AnyKeyedStateHandle,
    KeyedStateHandle,
    RocksDBKeyedStateHandle,
    RocksDBStateFile,
    StateFileReader,
    StateFileWriter,
)
from cairn.clock import Clock, SystemClock
from cairn.ids import CheckpointId
from cairn.state.api import KeyedSnapshot, KeyedStateBackend
from cairn.state.backend_checks import (
    check_key_group_range,
    foreign_key_groups,
    owned_sections,
    registered_state,
)
from cairn.state.errors import StateMigrationError, StateRestoreError
from cairn.state.key_context_owner import KeyContextOwner
from cairn.state.key_groups import (
    DEFAULT_KEY_GROUP_CACHE_SIZE,
    KeyGroupAssigner,
    KeyGroupRange,
)
from cairn.state.keyed_states import (
    NO_KEY,
    HeapAggregatingState,
    HeapReducingState,
    HeapValueState,
)
from cairn.state.rocksdb.canonical import (
    META_PREFIX,
    StateMeta,
    export_sections,
    import_section,
)
from cairn.state.rocksdb.codecs import (
    decode_key,
    drop_expired_value,
    retime,
    split_state_key,
    value_codec,
)
from cairn.state.rocksdb.db import STATE_CF_PREFIX, TIMERS_CF, Column, RocksDBMemory, StateDB
from cairn.state.rocksdb.native import NativeGate, native_checkpoint, wait_native
from cairn.state.rocksdb.rescale import apply_copy, merge_meta, plan_restore, trim
from cairn.state.rocksdb.states import (
    CurrentKeyTable,
    RocksKeyContext,
    RocksListState,
    RocksMapState,
    RocksValueState,
)
from cairn.state.rocksdb.timers import RocksTimers
from cairn.state.rocksdb.transfer import DEFAULT_TRANSFER_THREADS, download, upload
from cairn.state.rocksdb.write_cache import WriteCache
from cairn.state.snapshot_format import (
    KEYED_MAGIC,
    assemble_file,
    dumps_unshared,
)
from cairn.state.timers import EVENT_TIME, PROCESSING_TIME
from cairn.state.ttl import TtlAggregatingState, TtlReducingState, TtlValueState

__all__ = ["RocksDBKeyedStateBackend"]

log = logging.getLogger(__name__)

_META = META_PREFIX  # default column family: b"state:<name>" -> {"kind": ..., "ttl": ...}

_VALUE_LIKE: dict[tuple[str, bool], Callable[..., State]] = {
    ("value", False): HeapValueState,
    ("reducing", False): HeapReducingState,
    ("aggregating", False): HeapAggregatingState,
    ("value", True): TtlValueState,
    ("reducing", True): TtlReducingState,
    ("aggregating", True): TtlAggregatingState,
}
_KINDS = frozenset({"value", "list", "map", "reducing", "aggregating"})


@dataclass(eq=False)
class _Table:
    kind: str
    ttl: bool
    ttl_config: StateTtlConfig | None = None
    state: State | None = None


class RocksDBKeyedStateBackend(KeyContextOwner, KeyedStateBackend):
    """Keyed state of ``key_group_range`` in RocksDB (see the module docstring).

    ``local_dir``: where the working directory is created (default: the temp dir);
    ``memory``: block cache and write buffer bounds; ``file_prefix`` makes uploaded file
    names unique per operator; ``clock`` drives TTL only.
    """

    _ctx: RocksKeyContext

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        clock: Clock = SystemClock(),
        *,
        local_dir: str | None = None,
        memory: RocksDBMemory = RocksDBMemory(),
        incremental: bool = False,
        file_prefix: str = "",
        transfer_threads: int = DEFAULT_TRANSFER_THREADS,
        key_group_cache_size: int = DEFAULT_KEY_GROUP_CACHE_SIZE,
    ) -> None:
        check_key_group_range(key_group_range, max_parallelism)
        self._range = key_group_range
        self._max_parallelism = max_parallelism
        self._now_ms = clock.now_ms
        self._memory = memory
        self._transfer_threads = transfer_threads
        self._incremental = incremental
        self._backend_id = uuid.uuid4().hex
        # Incremental: SST files of the newest completed checkpoint (reused by the next
        # snapshots), and those of snapshots not yet known to be complete, by checkpoint.
        self._confirmed: tuple[CheckpointId | None, dict[str, RocksDBStateFile]] = (None, {})
        self._uploaded: dict[CheckpointId, dict[str, RocksDBStateFile]] = {}
        self._uploaded_lock = threading.Lock()
        self._file_prefix = file_prefix
        root = local_dir or tempfile.gettempdir()
        try:
            os.makedirs(root, exist_ok=True)
            self._dir = tempfile.mkdtemp(prefix=f"{_safe(file_prefix)}rocksdb-", dir=root)
        except OSError as exc:
            raise OSError(
                f"cannot create the RocksDB working directory under {root!r} "
                f"(state.backend.rocksdb.localdir): {exc}"
            ) from exc
        self._db_path = os.path.join(self._dir, "db")
        self._db: StateDB | None = None
        self._ctx = RocksKeyContext(key_group_range)
        self._assigner = KeyGroupAssigner(max_parallelism, key_group_cache_size)
        self._key_group_cache = self._assigner.cache
        self._owned = f"{key_group_range.start}..{key_group_range.end}"
        self._foreign = foreign_key_groups(key_group_range, max_parallelism)
        self._tables: dict[str, _Table] = {}
        self._caches: list[WriteCache] = []
        self._gate = NativeGate()  # the pending native checkpoint (see ``native``)
        self._timers = RocksTimers(self._ctx, key_group_range, self._assigner, self._settled)

    @property
    def working_directory(self) -> str:
        return self._dir

    def _open(self) -> StateDB:
        db = self._db
        if db is None:
            try:
                db = self._db = StateDB.open(self._db_path, self._memory)
            except Exception as exc:  # rocksdict raises a bare Exception with RocksDB's status
                raise OSError(
                    f"cannot open RocksDB in {self._db_path} (state.backend.rocksdb.localdir): "
                    f"{exc}"
                ) from exc
        return db

    def _settled(self) -> StateDB:
        """The database, to write to it directly: any pending native checkpoint taken."""
        self._gate.settle()
        return self._open()

    # ------------------------------------------------------------------------------ state

    def get_partitioned_state(self, descriptor: StateDescriptor) -> Any:
        """The state object for ``descriptor``; the same object for the same name."""
        if not isinstance(descriptor, StateDescriptor) or descriptor.kind not in _KINDS:
            raise TypeError(f"unsupported state descriptor {descriptor!r}")
        name, kind, ttl_cfg = descriptor.name, descriptor.kind, descriptor.ttl_config
        table = self._tables.get(name)
        state = registered_state(table, name, kind, ttl_cfg)
        if state is not None:
            return state
        db = self._open()
        ttl = ttl_cfg is not None
        if table is None:
            table = self._tables[name] = _Table(kind, ttl)
        elif table.ttl != ttl:  # restored, first access
            self._convert_ttl(name, table, ttl)
        cleanup = ttl_cfg.ttl_ms if ttl_cfg and ttl_cfg.cleanup_in_full_snapshot else None
        meta = {"kind": kind, "ttl": ttl, "cleanup_ttl_ms": cleanup}
        gate = self._gate
        gate.settle()
        db.db.put(_META + name.encode(), json.dumps(meta).encode())
        cf = db.column_family(STATE_CF_PREFIX + name)
        table.ttl_config = ttl_cfg
        if kind == "list":
            table.state = RocksListState(name, self._ctx, cf, descriptor, self._now_ms, gate)
        elif kind == "map":
            table.state = RocksMapState(name, self._ctx, cf, descriptor, self._now_ms, gate)
        else:
            entries = self._memory.write_cache_entries
            cache = WriteCache(db, STATE_CF_PREFIX + name, entries, gate)
            self._caches.append(cache)
            if kind == "value" and not ttl:
                table.state = RocksValueState(name, self._ctx, cache, descriptor.type_info)
                return table.state
            view = CurrentKeyTable(name, self._ctx, cache, value_codec(descriptor.type_info, ttl))
            groups: list[Any] = list(self._foreign)
            for kg in self._range:
                groups[kg] = view
            table.state = _VALUE_LIKE[(kind, ttl)](
                name, self._ctx, groups, descriptor, self._now_ms
            )
        return table.state

    def _flush_caches(self, keep: bool = False) -> None:
        """Write the caches to RocksDB; ``keep`` only if nothing changes RocksDB around them
        next (a snapshot, reading keys): their entries stay readable from Python."""
        self._gate.settle()
        for cache in self._caches:
            cache.flush(keep)

    def _convert_ttl(self, name: str, table: _Table, ttl: bool) -> None:
        """Restored values whose TTL setting changed: add (TTL starts now) or drop stamps."""
        self._flush_caches()
        cf = self._open().column_family(STATE_CF_PREFIX + name)
        now = self._now_ms()
        for k, v in list(cf.items()):
            cf.put(k, retime(table.kind, v, ttl, now))
        table.ttl = ttl

    def _drop_expired(self, cf: Column, kind: str, ttl_ms: int) -> None:
        """``cleanup_full_snapshot``: restored values expired by now are not restored (the
        heap leaves them out of its snapshot files; RocksDB's checkpoint files hold them)."""
        self._flush_caches()
        now = self._now_ms()
        for k, v in list(cf.items()):
            live = drop_expired_value(kind, v, now, ttl_ms)
            if live is None:
                cf.delete(k)
            elif live != v:
                cf.put(k, live)

    def keys(self, state_name: str) -> list[Any]:
        """Keys that currently have a value in ``state_name`` (in key-group order)."""
        if state_name not in self._tables:
            return []
        self._flush_caches()
        cf = self._open().column_family(STATE_CF_PREFIX + state_name)
        out: list[Any] = []
        last = None
        for k in cf.keys():  # noqa: SIM118 - a raw-mode Rdict cannot be iterated directly
            _, kb, _ = split_state_key(k)
            if kb != last:
                out.append(decode_key(kb))
                last = kb
        return out

    def state_names(self) -> list[str]:
        return list(self._tables)

    # ----------------------------------------------------------------------------- timers

    def register_processing_time_timer(self, timestamp_ms: int) -> None:
        self._timers.register(PROCESSING_TIME, timestamp_ms)

    def delete_processing_time_timer(self, timestamp_ms: int) -> None:
        self._timers.delete(PROCESSING_TIME, timestamp_ms)

    def next_timer_ms(self) -> int | None:
        return self._timers.peek(PROCESSING_TIME)

    def pop_due_timers(self, now_ms: int) -> list[tuple[int, Any]]:
        return self._timers.pop_due(PROCESSING_TIME, now_ms)

    def register_event_time_timer(self, timestamp_ms: int) -> None:
        self._timers.register(EVENT_TIME, timestamp_ms)

    def delete_event_time_timer(self, timestamp_ms: int) -> None:
        self._timers.delete(EVENT_TIME, timestamp_ms)

    def next_event_timer_ms(self) -> int | None:
        return self._timers.peek(EVENT_TIME)

    def pop_due_event_timers(self, watermark_ms: int) -> list[tuple[int, Any]]:
        return self._timers.pop_due(EVENT_TIME, watermark_ms)

    def num_timers(self) -> int:
        return len(self._timers)

    # --------------------------------------------------------------------------- snapshot

    def snapshot(self, checkpoint_id: CheckpointId, *, canonical: bool = False) -> KeyedSnapshot:
        """Freeze the write caches and start the checkpoint of the database (synchronous
        part); the result uploads it, or (``canonical``, savepoints: the checkpoint taken
        here) writes its state in the heap backend's format."""
        self._gate.settle()  # the previous snapshot's checkpoint (if still being taken)
        db = self._db
        if db is None or (not any(c.entries for c in self._caches) and self._is_empty(db)):
            return _nothing
        local = os.path.join(self._dir, "snapshots", f"chk-{checkpoint_id}-{uuid.uuid4().hex}")
        os.makedirs(os.path.dirname(local), exist_ok=True)
        frozen = [(c, c.freeze()) for c in self._caches]  # bounded by the caches' size
        waited, self._gate.waited_ms = self._gate.waited_ms, 0.0
        label = f"{checkpoint_id} of {self._owned} (task waited {waited:.1f} ms for the last)"
        names = [*db.state_column_families(), TIMERS_CF]
        columns = [db.column_family(n) for n in names if db.has_column_family(n)]
        work = native_checkpoint(db.db, frozen, columns, local, label)
        key_range = self._range
        if canonical:
            work()
            return self._canonical_snapshot(local, self._now_ms())
        native = self._gate.start(work)
        prefix = f"{self._file_prefix}keyed-kg{key_range.start}-{key_range.end}-"
        base_id, base = self._confirmed

        def write(writer: StateFileWriter) -> RocksDBKeyedStateHandle:
            try:
                wait_native(native)
                handle = upload(
                    local,
                    writer,
                    prefix,
                    key_range,
                    reuse=base if self._incremental else None,
                    backend_id=self._backend_id,
                    base_checkpoint_id=base_id,
                    threads=self._transfer_threads,
                )
            finally:
                shutil.rmtree(local, ignore_errors=True)
            if self._incremental:
                with self._uploaded_lock:
                    self._uploaded[checkpoint_id] = {f.name: f for f in handle.shared_files()}
            return handle

        return write

    def _canonical_snapshot(self, local: str, now_ms: int) -> KeyedSnapshot:
        """Asynchronous part of a canonical snapshot: the local checkpoint, read key group
        by key group into one heap-format state file (``canonical``)."""
        key_range, memory = self._range, self._memory
        file_name = f"{self._file_prefix}keyed-kg{key_range.start}-{key_range.end}.state"

        def write(writer: StateFileWriter) -> KeyedStateHandle | None:
            try:
                source = StateDB.open(local, memory)
                try:
                    sections = [
                        (kg, dumps_unshared(section))
                        for kg, section in export_sections(source, key_range, now_ms)
                    ]
                finally:
                    source.close()
            finally:
                shutil.rmtree(local, ignore_errors=True)
            data, ranges = assemble_file(KEYED_MAGIC, sections)
            if not ranges:
                return None
            path = writer.write_state_file(file_name, data)
            return KeyedStateHandle(path, key_range.start, key_range.end, ranges, len(data))

        return write

    def compact(self) -> None:
        """Compact every column family now (RocksDB does it in the background anyway; tests
        and tools use this to make files of older checkpoints unreferenced at a known time)."""
        self._flush_caches()
        if self._db is not None:
            for name in [*self._db.state_column_families(), TIMERS_CF]:
                if self._db.has_column_family(name):
                    self._db.column_family(name).compact_range(None, None)

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:
        """Checkpoint ``checkpoint_id`` completed: later snapshots may reuse its SST files
        (never those of a checkpoint not known to be complete: it may be discarded)."""
        with self._uploaded_lock:
            files = self._uploaded.pop(checkpoint_id, None)
            for cid in [c for c in self._uploaded if c < checkpoint_id]:
                del self._uploaded[cid]
        if files is not None and (self._confirmed[0] or -1) < checkpoint_id:
            self._confirmed = (checkpoint_id, files)

    @staticmethod
    def _is_empty(db: StateDB) -> bool:
        for name in [*db.state_column_families(), TIMERS_CF]:
            if db.has_column_family(name):
                it = db.column_family(name).iter()
                it.seek_to_first()
                if it.valid():
                    return False
        return True

    # ---------------------------------------------------------------------------- restore

    def restore(self, handles: Sequence[AnyKeyedStateHandle], reader: StateFileReader) -> None:
        """Rebuild this backend's key groups from old subtasks' RocksDB checkpoints, or from
        state files in the canonical format (savepoints, the heap backend's checkpoints)."""
        rocks = [h for h in handles if isinstance(h, RocksDBKeyedStateHandle)]
        canonical = [h for h in handles if isinstance(h, KeyedStateHandle)]
        if canonical:
            if rocks:
                raise StateRestoreError(
                    f"the restored state mixes RocksDB checkpoint files "
                    f"({rocks[0].key_group_start}..{rocks[0].key_group_end}) and canonical "
                    f"state files ({canonical[0].path!r}): handles of two snapshots mixed?"
                )
            self._restore_canonical(canonical, reader)
            return
        plan = plan_restore(
            self._range, [KeyGroupRange(h.key_group_start, h.key_group_end) for h in rocks]
        )
        if plan.base is None:
            return
        registered = {n: (t.kind, t.ttl) for n, t in self._tables.items()}
        self._flush_caches()  # restored values replace what was written before
        copies = list(plan.copies)
        if self._db is None:  # the usual case: the base checkpoint becomes the database
            download(rocks[plan.base], reader, self._db_path, self._transfer_threads)
            trim(self._open(), plan.trim)
        else:  # state is in use already: copy the base's key groups like the others'
            base = rocks[plan.base]
            own = KeyGroupRange(
                max(base.key_group_start, self._range.start),
                min(base.key_group_end, self._range.end),
            )
            copies.insert(0, (plan.base, own))
        db = self._open()
        for i, key_groups in copies:
            tmp = os.path.join(self._dir, f"restore-{uuid.uuid4().hex}")
            download(rocks[i], reader, tmp, self._transfer_threads)
            source = StateDB.open(tmp, self._memory)
            try:
                merge_meta(source, db)
                copied = apply_copy(source, db, key_groups)
            finally:
                source.close()
                shutil.rmtree(tmp, ignore_errors=True)
            log.debug(
                "copied %d entries of key groups %s from %s", copied, key_groups, rocks[i].path
            )
        self._load_meta(db, registered)
        self._timers.load(db)

    def _restore_canonical(
        self, handles: Sequence[KeyedStateHandle], reader: StateFileReader
    ) -> None:
        """Import the sections of this backend's key groups from heap-format files."""
        registered = {n: (t.kind, t.ttl) for n, t in self._tables.items()}
        self._flush_caches()
        db = self._open()
        imported: dict[str, StateMeta] = {}
        count = 0
        for path, kg, section in owned_sections(handles, self._range, reader):
            import_section(db, kg, section, path, imported)
            count += 1
        log.debug("imported %d key groups from %d canonical state files", count, len(handles))
        self._load_meta(db, registered)
        self._timers.load(db)

    def _load_meta(self, db: StateDB, registered: dict[str, tuple[str, bool]]) -> None:
        """Learn the restored states' kinds; states registered before the restore keep their
        TTL setting (restored values are converted) and must have the restored kind."""
        for k, v in list(db.db.items(from_key=_META)):
            if not k.startswith(_META):
                break
            name, meta = k[len(_META) :].decode(), json.loads(v)
            kind, ttl = str(meta["kind"]), bool(meta["ttl"])
            cleanup_ms = meta.get("cleanup_ttl_ms")
            if ttl and cleanup_ms is not None:
                self._drop_expired(db.column_family(STATE_CF_PREFIX + name), kind, cleanup_ms)
            if name not in registered:
                self._tables[name] = _Table(kind, ttl)
                continue
            table = self._tables[name]
            if table.kind != kind:
                raise StateMigrationError(
                    f"state {name!r} is {table.kind} state here but {kind} state in the "
                    "restored checkpoint"
                )
            if ttl != table.ttl:
                self._convert_ttl(name, _Table(kind, ttl), table.ttl)
            db.db.put(k, json.dumps({**meta, "ttl": table.ttl}).encode())

    def dispose(self) -> None:
        """Close the database and delete the working directory."""
        self._gate.close()
        if self._db is not None:
            try:
                self._db.close()
            except Exception:  # closing a broken database must not keep its files
                log.warning("closing RocksDB in %s failed", self._dir, exc_info=True)
            self._db = None
        shutil.rmtree(self._dir, ignore_errors=True)
        self._tables.clear()
        self._caches.clear()
        self._timers.clear()
        self._ctx.key = NO_KEY


def _nothing(writer: StateFileWriter) -> None:
    return None


def _safe(prefix: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in prefix)
