"""The checkpoint coordinator under high availability, with a real ``Leadership`` (in-memory
store, manual clock) as its fence: a leader records each completion in the HA pointer; once
its lease lapsed or a newer leader wrote, it writes no ``_metadata``, tells no task to commit
and deletes nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.ha.leader import POINTER, Leadership
from cairn.checkpoint.ha.pointer import Pointer
from cairn.checkpoint.ha.store import MemoryStore
from cairn.checkpoint.protocol import Blocked, TerminalJobStatus, TriggerNow
from cairn.checkpoint.storage import CheckpointStorage
from cairn.clock import ManualClock
from cairn.ids import CheckpointId, OperatorUid
from cairn.settings import CheckpointSettings
from tests.unit._coordinator_harness import (
    SRC0,
    SRC1,
    T0,
    TASKS,
    CoordinatorHarness,
    RecordingGateway,
    exists,
)

LEASE_MS = 10_000
HA = tuple[CoordinatorHarness, Leadership, MemoryStore]


def _pointer(store: MemoryStore) -> Pointer:
    record = store.read(POINTER)
    assert record is not None
    return Pointer.decode(record.data)


@pytest.fixture
def ha(root: str) -> Iterator[tuple[CoordinatorHarness, Leadership, MemoryStore]]:
    store, clock = MemoryStore(), ManualClock(T0)
    leader = Leadership(store, "a", LEASE_MS, 3_000, clock=clock, wall=clock)
    assert leader.acquire(threading.Event(), "job-1", "g") is not None
    gateway = RecordingGateway()
    storage = CheckpointStorage(root, "job-1")
    coord = CheckpointCoordinator(
        "job-1",  # type: ignore[arg-type]
        CheckpointSettings(interval_ms=100, timeout_ms=60_000),
        storage,
        gateway,
        TASKS,
        [SRC0, SRC1],
        {OperatorUid("src"): (2, 128), OperatorUid("agg"): (1, 128)},
        clock,
        fence=leader,
    )
    yield CoordinatorHarness(coord, gateway, clock, storage), leader, store


def test_each_completion_moves_the_pointer_under_the_leaders_token(
    ha: tuple[CoordinatorHarness, Leadership, MemoryStore],
) -> None:
    h, _, store = ha
    first = h.checkpoint()
    assert _pointer(store).checkpoint_id == first
    second = h.checkpoint()
    pointer = _pointer(store)
    assert (pointer.checkpoint_id, pointer.token) == (second, 1)
    assert pointer.checkpoint_dir == h.storage.checkpoint_dir(CheckpointId(second))
    assert h.gateway.completed == [first, second]


def test_a_leader_past_its_lease_completes_nothing_and_deletes_nothing(
    ha: tuple[CoordinatorHarness, Leadership, MemoryStore],
) -> None:
    h, leader, store = ha
    done = h.checkpoint()
    decision = h.coord.trigger_checkpoint(force=True)
    assert isinstance(decision, TriggerNow)
    cid = decision.checkpoint_id
    h.ack(cid, TASKS[0])
    h.ack(cid, TASKS[1])
    h.clock.advance(LEASE_MS)  # paused (no renewal) past its lease, then woken
    h.ack(cid, TASKS[2])  # the last acknowledgement: it would complete
    assert not exists(h.storage.checkpoint_dir(CheckpointId(cid)) + "/_metadata")
    assert exists(h.storage.checkpoint_dir(CheckpointId(cid)))  # its files are left alone
    assert h.gateway.completed == [done]  # no task is told to commit
    assert _pointer(store).checkpoint_id == done
    assert leader.role == "lost"
    assert isinstance(h.coord.trigger_checkpoint(force=True), Blocked)
    h.coord.shutdown(TerminalJobStatus.CANCELED)  # would delete the job directory
    assert exists(h.storage.checkpoint_dir(CheckpointId(done)))


def test_a_leader_fenced_by_a_newer_one_does_not_announce(
    ha: tuple[CoordinatorHarness, Leadership, MemoryStore],
) -> None:
    h, leader, store = ha
    done = h.checkpoint()
    record = store.read(POINTER)
    assert record is not None
    newer = Pointer.decode(record.data)
    store.replace(
        POINTER,
        Pointer(2, "job-1", newer.checkpoint_id, newer.checkpoint_dir).encode(),
        record.version,
    )
    decision = h.coord.trigger_checkpoint(force=True)
    assert isinstance(decision, TriggerNow)
    h.ack_all(decision.checkpoint_id)
    assert h.gateway.completed == [done]
    # Its _metadata was written (exclusively) before the pointer refused it: withdrawn.
    assert not exists(h.storage.checkpoint_dir(decision.checkpoint_id) + "/_metadata")
    assert _pointer(store).token == 2 and _pointer(store).checkpoint_id == done
    assert leader.role == "lost" and not leader.holds()


def test_under_ha_metadata_is_never_written_over_another_leaders(ha: HA) -> None:
    h, _, _ = ha
    decision = h.coord.trigger_checkpoint(force=True)
    assert isinstance(decision, TriggerNow)
    cid = decision.checkpoint_id
    theirs = h.storage.checkpoint_dir(cid) + "/_metadata"
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(theirs)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    fs.pipe_file(path, b"another leader's")
    h.ack_all(cid)
    assert h.gateway.completed == []  # not completed: aborted as an I/O failure
    assert h.coord.latest_completed() is None
