"""The conditional-write stores of high availability: the same contract for the in-memory
and the file store, including races between real processes on the file store; the start-up
probe refuses a store that applies writes whose preconditions failed."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cairn.checkpoint.ha.file_store import FileStore
from cairn.checkpoint.ha.probe import UnsupportedConditionalWrites, check_conditional
from cairn.checkpoint.ha.store import ConditionalStore, MemoryStore, Versioned, WriteConflict


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ConditionalStore:
    if request.param == "memory":
        return MemoryStore()
    return FileStore(str(tmp_path / "ha"))


def test_create_once_then_replace_only_from_the_version_read(store: ConditionalStore) -> None:
    assert store.read("r") is None
    v1 = store.create("r", b"one")
    with pytest.raises(WriteConflict):
        store.create("r", b"again")
    v2 = store.replace("r", b"two", v1.version)
    assert store.read("r") == v2 and v2.data == b"two"
    with pytest.raises(WriteConflict):
        store.replace("r", b"stale", v1.version)
    assert store.read("r") == v2


def test_many_generations_keep_create_refused(store: ConditionalStore) -> None:
    version = store.create("r", b"0").version
    for i in range(1, 30):
        version = store.replace("r", str(i).encode(), version).version
    with pytest.raises(WriteConflict):
        store.create("r", b"again")
    record = store.read("r")
    assert record is not None and record.data == b"29"


def test_file_store_prunes_old_generations(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path))
    version = store.create("r", b"0").version
    for i in range(1, 50):
        version = store.replace("r", str(i).encode(), version).version
    assert len(os.listdir(tmp_path / "r")) <= 6


def test_a_writer_that_read_a_pruned_generation_loses(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path))
    stale = store.create("r", b"0").version
    version = store.replace("r", b"1", stale).version
    for i in range(2, 10):  # prunes generation 2, which the stale writer would publish
        version = store.replace("r", str(i).encode(), version).version
    with pytest.raises(WriteConflict):
        store.replace("r", b"stale", store_version_after(stale))
    record = store.read("r")
    assert record is not None and record.data == b"9"


def store_version_after(version: str) -> str:
    return str(int(version) + 1)


def _race(root: str, name: str, expected: str | None, me: int, out: Callable[..., None]) -> None:
    store = FileStore(root)
    try:
        if expected is None:
            store.create(name, f"writer {me}".encode())
        else:
            store.replace(name, f"writer {me}".encode(), expected)
        out(me)
    except WriteConflict:
        pass


def _racers(root: str, name: str, expected: str | None, n: int) -> list[int]:
    ctx = multiprocessing.get_context("fork")
    winners = ctx.Queue()
    procs = [
        ctx.Process(target=_race, args=(root, name, expected, i, winners.put)) for i in range(n)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    found = []
    while not winners.empty():
        found.append(winners.get())
    return found


def test_file_store_races_between_processes_have_one_winner(tmp_path: Path) -> None:
    root = str(tmp_path)
    for round_ in range(5):
        name = f"r{round_}"
        created = _racers(root, name, None, 6)
        assert len(created) == 1
        record = FileStore(root).read(name)
        assert record is not None and record.data == f"writer {created[0]}".encode()
        replaced = _racers(root, name, record.version, 6)
        assert len(replaced) == 1
        after = FileStore(root).read(name)
        assert after is not None and after.data == f"writer {replaced[0]}".encode()


class _IgnoresConditions(MemoryStore):
    """A server that applies every write, precondition or not."""

    def create(self, name: str, data: bytes) -> Versioned:
        try:
            return super().create(name, data)
        except Exception:
            return self._force(name, data)

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        try:
            return super().replace(name, data, expected)
        except Exception:
            return self._force(name, data)

    def _force(self, name: str, data: bytes) -> Versioned:
        record = Versioned(data, f"forced-{name}-{len(data)}-{data!r}")
        return record


def test_the_probe_refuses_a_store_that_ignores_preconditions() -> None:
    removed: list[str] = []
    with pytest.raises(UnsupportedConditionalWrites, match="ignores ifGenerationMatch"):
        check_conditional(_IgnoresConditions(), removed.append, "ifGenerationMatch")
    assert len(removed) == 1 and removed[0].startswith(".cairn-ha-probe-")
    check_conditional(MemoryStore(), removed.append, "If-Match")
    assert len(removed) == 2
