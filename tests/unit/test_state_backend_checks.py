"""The checks both keyed backends share (``state.backend_checks``): the same misuse gets the
same error and message from the heap and the RocksDB backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairn.clock import ManualClock
from cairn.common.time import Time
from cairn.datastream.state import ListStateDescriptor, StateTtlConfig, ValueStateDescriptor
from cairn.state import KeyGroupRange
from cairn.state.errors import KeyGroupRangeError, StateMigrationError, StateRestoreError
from cairn.state.heap_backend import HeapKeyedStateBackend
from cairn.testing.simple_state_files import DirectoryStateFiles
from tests.unit import state_backends

Make = Callable[[KeyGroupRange, int], Any]

BACKENDS: dict[str, Make] = {
    "heap": lambda r, p: HeapKeyedStateBackend(r, p, clock=ManualClock()),
    "rocksdb": lambda r, p: state_backends.rocksdb(r, p),
}


@pytest.fixture(params=sorted(BACKENDS))
def make(request: pytest.FixtureRequest) -> Make:
    return BACKENDS[request.param]


def test_a_range_beyond_max_parallelism_is_refused(make: Make) -> None:
    with pytest.raises(ValueError, match=r"end=128\) exceeds max parallelism 128"):
        make(KeyGroupRange(0, 128), 128)


def test_a_key_group_of_another_subtask_is_refused(make: Make) -> None:
    backend = make(KeyGroupRange(0, 63), 128)
    count = backend.get_partitioned_state(ValueStateDescriptor("count", None))
    foreign = next(k for k in range(1000) if backend._assigner.key_group(k) >= 64)
    backend.set_current_key(foreign)
    with pytest.raises(KeyGroupRangeError, match=r"outside this subtask.s key groups 0\.\.63"):
        count.value()


def test_a_state_registered_again_must_keep_its_kind_and_ttl(make: Make) -> None:
    backend = make(KeyGroupRange(0, 127), 128)
    first = backend.get_partitioned_state(ValueStateDescriptor("s", None))
    assert backend.get_partitioned_state(ValueStateDescriptor("s", None)) is first
    with pytest.raises(StateMigrationError, match="already registered as value state"):
        backend.get_partitioned_state(ListStateDescriptor("s", None))
    with_ttl = ValueStateDescriptor("s", None)
    with_ttl.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())
    with pytest.raises(StateMigrationError, match=r"cannot access it as value state \(ttl="):
        backend.get_partitioned_state(with_ttl)


def _canonical(tmp_path: Path, make: Make, key_range: KeyGroupRange, subdir: str) -> Any:
    backend = make(key_range, 128)
    state = backend.get_partitioned_state(ValueStateDescriptor("s", None))
    for k in range(200):
        if backend._assigner.key_group(k) in key_range:
            backend.set_current_key(k)
            state.update(k)
    return backend.snapshot(1, canonical=True)(DirectoryStateFiles(tmp_path / subdir))


def test_a_restored_state_keeps_its_checkpointed_kind(make: Make, tmp_path: Path) -> None:
    handle = _canonical(tmp_path, make, KeyGroupRange(0, 127), "a")
    restored = make(KeyGroupRange(0, 127), 128)
    restored.restore([handle], DirectoryStateFiles(tmp_path / "a"))
    with pytest.raises(StateMigrationError, match=r"checkpointed as value state .* as list"):
        restored.get_partitioned_state(ListStateDescriptor("s", None))


def test_a_key_group_in_two_state_files_is_refused(make: Make, tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path / "both")
    a = _canonical(tmp_path, make, KeyGroupRange(0, 70), "both")
    b = _canonical(tmp_path, make, KeyGroupRange(60, 127), "both")
    restored = make(KeyGroupRange(0, 127), 128)
    with pytest.raises(StateRestoreError, match=r"key group 6\d is present in two state files"):
        restored.restore([a, b], files)
