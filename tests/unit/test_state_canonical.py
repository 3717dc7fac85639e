"""The canonical snapshot format: a savepoint of either keyed backend restores into the other,
at any parallelism, with the same values, TTL timestamps and timers (``rocksdb.canonical``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import KeyedStateHandle, RocksDBKeyedStateHandle
from cairn.clock import ManualClock
from cairn.common.time import Time
from cairn.common.typeinfo import Types
from cairn.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from cairn.state import (
    HeapKeyedStateBackend,
    KeyGroupRange,
    StateMigrationError,
    StateRestoreError,
    key_group_range_for_subtask,
)
from cairn.state.rocksdb import RocksDBKeyedStateBackend
from cairn.state.snapshot_format import decode_section, read_sections, thaw_table
from cairn.testing.simple_state_files import DirectoryStateFiles
from tests.unit import state_backends

MAX_P = 32
FULL = KeyGroupRange(0, MAX_P - 1)
KEYS = ["a", "b", "c", 1, 2, (3, "x"), None, 2.5, *[f"k{i}" for i in range(30)]]


def _make(kind: str, key_groups: KeyGroupRange, clock: ManualClock) -> Any:
    if kind == "heap":
        return HeapKeyedStateBackend(key_groups, MAX_P, clock=clock, fork_threshold=None)
    return state_backends.rocksdb(key_groups, MAX_P, clock)


_TTL = StateTtlConfig.new_builder(Time.seconds(10)).build()


def _descriptors() -> list[Any]:
    ttl_value = ValueStateDescriptor("tv", None)
    ttl_value.enable_time_to_live(_TTL)
    ttl_list = ListStateDescriptor("tl", None)
    ttl_list.enable_time_to_live(_TTL)
    ttl_map = MapStateDescriptor("tm", None, None)
    ttl_map.enable_time_to_live(_TTL)
    return [
        ValueStateDescriptor("v", Types.INT()),
        ListStateDescriptor("l", None),
        MapStateDescriptor("m", Types.STRING(), None),
        ReducingStateDescriptor("r", lambda a, b: a + b, Types.LONG()),
        ttl_value,
        ttl_list,
        ttl_map,
    ]


def _fill(backends: Any, clock: ManualClock, seed: int) -> None:
    """Random operations on every state and timer, each on the backend owning its key."""
    if not isinstance(backends, list):
        backends = [backends]
    rng = random.Random(seed)
    for step in range(400):
        clock.advance(rng.randrange(3))
        key = rng.choice(KEYS)
        b = next(
            b for b in backends if b.key_group_range.start <= _kg(key) <= b.key_group_range.end
        )
        v, lst, m, r, tv, tl, tm = (b.get_partitioned_state(d) for d in _descriptors())
        b.set_current_key(key)
        op, arg = rng.randrange(10), rng.randrange(5)
        if op == 0:
            v.update(arg if arg else None)
        elif op == 1:
            lst.add({"n": arg})
        elif op == 2:
            m.put(f"u{arg}", [step])
        elif op == 3:
            m.remove(f"u{arg}")
        elif op == 4:
            r.add(arg)
        elif op == 5:
            tv.update(step)
        elif op == 6:
            tl.add(arg)
        elif op == 7:
            tm.put(arg, str(step))
        elif op == 8:
            b.register_event_time_timer(1000 + arg)
        else:
            b.register_processing_time_timer(2000 + step)


def _contents(backends: list[Any]) -> dict[str, Any]:
    """Every value (TTL states read at the same clock), and every timer, of ``backends``."""
    out: dict[str, Any] = {}
    for b in backends:
        states = [b.get_partitioned_state(d) for d in _descriptors()]
        for key in KEYS:
            if b.key_group_range.start <= _kg(key) <= b.key_group_range.end:
                b.set_current_key(key)
                out[repr(key)] = (
                    states[0].value(),
                    list(states[1].get() or []),
                    sorted(states[2].items()),
                    states[3].get(),
                    states[4].value(),
                    list(states[5].get() or []),
                    sorted(states[6].items()),
                )
        out.setdefault("timers", []).extend(b.pop_due_event_timers(1 << 40))
        out["timers"].extend(b.pop_due_timers(1 << 40))
    out["timers"] = sorted(map(repr, out["timers"]))
    return out


def _kg(key: Any) -> int:
    from cairn.state import assign_to_key_group

    return assign_to_key_group(key, MAX_P)


@pytest.mark.parametrize(("old_p", "new_p"), [(1, 1), (2, 3), (3, 1)])
@pytest.mark.parametrize(("source", "target"), [("heap", "rocksdb"), ("rocksdb", "heap")])
def test_canonical_snapshots_restore_into_the_other_backend_at_any_parallelism(
    tmp_path: Path, source: str, target: str, old_p: int, new_p: int
) -> None:
    files = DirectoryStateFiles(tmp_path)
    clock = ManualClock(1_000)
    olds = [
        _make(source, key_group_range_for_subtask(MAX_P, old_p, i), clock) for i in range(old_p)
    ]
    ref_clock = ManualClock(1_000)
    reference = _make(source, FULL, ref_clock)
    _fill(olds, clock, seed=7)
    _fill(reference, ref_clock, seed=7)
    handles = [b.snapshot(1, canonical=True)(files) for b in olds]
    assert all(isinstance(h, KeyedStateHandle) for h in handles if h is not None)
    news = [
        _make(target, key_group_range_for_subtask(MAX_P, new_p, i), clock) for i in range(new_p)
    ]
    for b in news:
        b.restore([h for h in handles if h is not None], files)
    assert _contents(news) == _contents([reference])


def test_rocksdb_canonical_file_has_the_heap_sections(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    sections = []
    for kind in ("heap", "rocksdb"):
        clock = ManualClock(1_000)
        b = _make(kind, FULL, clock)
        _fill(b, clock, seed=3)
        h = b.snapshot(1, canonical=True)(files)
        assert isinstance(h, KeyedStateHandle)
        raw = read_sections(files, h.path, h.sections, "key group")
        decoded = {kg: decode_section(d, h.path, "key group", kg) for kg, d in raw.items()}
        for section in decoded.values():
            section["states"] = {
                n: (k, t, thaw_table(p)) for n, (k, t, p) in section["states"].items()
            }
            section["timers"] = {d: sorted(map(repr, e)) for d, e in section["timers"].items()}
        sections.append(decoded)
    assert sections[0] == sections[1]


def test_checkpoints_stay_native_and_native_files_are_refused_by_the_heap(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    clock = ManualClock()
    b = _make("rocksdb", FULL, clock)
    _fill(b, clock, seed=1)
    native = b.snapshot(1)(files)
    assert isinstance(native, RocksDBKeyedStateHandle)
    with pytest.raises(StateRestoreError, match="written by the RocksDB"):
        HeapKeyedStateBackend(FULL, MAX_P).restore([native], files)
    canon = b.snapshot(2, canonical=True)(files)
    assert isinstance(canon, KeyedStateHandle)
    with pytest.raises(
        StateRestoreError, match=r"mixes RocksDB checkpoint files \(0\.\.31\) and canonical"
    ):
        _make("rocksdb", FULL, ManualClock()).restore([native, canon], files)
    assert not any(Path(b.working_directory, "snapshots").iterdir())  # local copies removed


def test_kind_conflict_with_a_registered_state_is_a_clear_error(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    heap = _make("heap", FULL, ManualClock())
    heap.set_current_key("a")
    heap.get_partitioned_state(ValueStateDescriptor("s", None)).update(1)
    handle = heap.snapshot(1, canonical=True)(files)
    rocks = _make("rocksdb", FULL, ManualClock())
    rocks.get_partitioned_state(ListStateDescriptor("s", None))
    with pytest.raises(StateMigrationError, match="'s' is list state here but value state"):
        rocks.restore([handle], files)


def test_expired_values_are_left_out_when_cleanup_in_full_snapshot(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    clock = ManualClock(0)
    rocks = _make("rocksdb", FULL, clock)
    desc = ValueStateDescriptor("t", None)
    desc.enable_time_to_live(
        StateTtlConfig.new_builder(Time.seconds(1)).cleanup_full_snapshot().build()
    )
    state = rocks.get_partitioned_state(desc)
    rocks.set_current_key("old")
    state.update(1)
    clock.advance(900)
    rocks.set_current_key("new")
    state.update(2)
    clock.advance(200)  # "old" expired, "new" not
    handle = rocks.snapshot(1, canonical=True)(files)
    heap = _make("heap", FULL, clock)
    heap.restore([handle], files)
    assert heap.keys("t") == ["new"]


def test_restored_rocksdb_state_snapshots_natively_and_canonically_again(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    clock = ManualClock(1_000)
    heap = _make("heap", FULL, clock)
    _fill(heap, clock, seed=5)
    expected = _contents([_restored("heap", heap.snapshot(1)(files), files)])
    rocks = _make("rocksdb", FULL, clock)
    rocks.restore([heap.snapshot(1, canonical=True)(files)], files)
    again = _restored("rocksdb", rocks.snapshot(2)(files), files)  # native checkpoint
    assert _contents([again]) == expected
    assert isinstance(rocks, RocksDBKeyedStateBackend)


def _restored(kind: str, handle: Any, files: DirectoryStateFiles) -> Any:
    b = _make(kind, FULL, ManualClock(1_000))
    b.restore([handle], files)
    return b
