"""The leader lease and the HA pointer as pure protocol: two (or three) drivers scripted
step by step against an in-memory store and manual clocks, no I/O, no threads."""

from __future__ import annotations

import threading

import pytest

from cairn.checkpoint.ha.fence import LeadershipLost
from cairn.checkpoint.ha.leader import LEASE, POINTER, Leadership
from cairn.checkpoint.ha.lease import (
    Create,
    Lease,
    Seen,
    TakeOver,
    Wait,
    decide_acquire,
    held_after_write,
    may_act,
)
from cairn.checkpoint.ha.pointer import Pointer, claim, decide_publish, pointing_to
from cairn.checkpoint.ha.store import MemoryStore, WriteConflict
from cairn.clock import ManualClock
from cairn.ids import CheckpointId

LEASE_MS = 10_000


def test_first_contender_creates_token_one() -> None:
    assert decide_acquire(None, None, "a", LEASE_MS, 0) == Create(Lease("a", 1, LEASE_MS, 0))


def test_standby_waits_a_whole_lease_from_its_first_sight_of_a_version() -> None:
    lease = Lease("a", 1, LEASE_MS, renewed_at_ms=0)
    first = decide_acquire(("v1", lease), None, "b", LEASE_MS, now_ms=5_000)
    assert isinstance(first, Wait) and first.until_ms == 15_000
    # The record's wall-clock time says nothing: only the standby's own observation counts.
    almost = decide_acquire(("v1", lease), first.seen, "b", LEASE_MS, now_ms=14_999)
    assert isinstance(almost, Wait)
    due = decide_acquire(("v1", lease), first.seen, "b", LEASE_MS, now_ms=15_000)
    assert isinstance(due, TakeOver) and due.expected == "v1" and due.lease.token == 2


def test_a_renewal_restarts_the_standbys_wait() -> None:
    lease = Lease("a", 1, LEASE_MS, 0)
    seen = Seen("v1", 0)
    after_renewal = decide_acquire(("v2", lease), seen, "b", LEASE_MS, now_ms=9_000)
    assert isinstance(after_renewal, Wait)
    assert after_renewal.seen == Seen("v2", 9_000) and after_renewal.until_ms == 19_000


def test_the_holders_duration_counts_not_the_standbys() -> None:
    long_lease = Lease("a", 1, 60_000, 0)
    decision = decide_acquire(("v1", long_lease), Seen("v1", 0), "b", 1_000, now_ms=30_000)
    assert isinstance(decision, Wait) and decision.until_ms == 60_000


def test_released_lease_is_taken_at_once() -> None:
    gone = Lease("a", 7, LEASE_MS, 0, released=True)
    decision = decide_acquire(("v9", gone), None, "b", LEASE_MS, now_ms=0)
    assert isinstance(decision, TakeOver) and decision.lease.token == 8


def test_holder_stops_acting_before_any_standby_may_take_over() -> None:
    """The holder's validity is counted from when it *sent* its write; a standby's wait
    from when it *read* the write, which is later: so the two never overlap."""
    for sent, seen_at in [(0, 0), (0, 1), (1_000, 4_000)]:
        held = held_after_write(Lease("a", 1, LEASE_MS, 0), "v1", sent_ms=sent)
        takeover_at = seen_at + LEASE_MS
        assert not may_act(held, takeover_at)
        assert held.valid_until_ms <= takeover_at - LEASE_MS // 10  # the safety margin


def test_pointer_fences_an_older_token_and_never_moves_back() -> None:
    newer = claim(Pointer(1, "j", 5, "/c/chk-5"), token=2, job_id="j", graph_digest="g")
    assert decide_publish(newer, my_token=1) is not None
    assert decide_publish(newer, my_token=2) is None
    moved = pointing_to(newer, 6, "/c/chk-6", "RUNNING")
    assert (moved.checkpoint_id, moved.token) == (6, 2)
    assert pointing_to(moved, 3, "/c/chk-3", "RUNNING").checkpoint_id == 6


def _driver(store: MemoryStore, name: str, clock: ManualClock) -> Leadership:
    return Leadership(store, name, LEASE_MS, renew_interval_ms=3_000, clock=clock, wall=clock)


def test_two_drivers_one_leader_then_takeover_and_the_old_one_is_fenced() -> None:
    store, clock_a, clock_b = MemoryStore(), ManualClock(0), ManualClock(0)
    a = _driver(store, "a", clock_a)
    takeover_a = a.acquire(threading.Event(), "j", "g")
    assert takeover_a is not None and takeover_a.token == 1 and not takeover_a.waited
    a.checkpoint_completed(CheckpointId(3), "/c/j/chk-3")

    # b looks: a holds the lease, b stands by.
    decision = decide_acquire(
        (store.read(LEASE).version, Lease.decode(store.read(LEASE).data)),  # type: ignore[union-attr]
        None,
        "b",
        LEASE_MS,
        clock_b.now_ms(),
    )
    assert isinstance(decision, Wait)

    # a is paused (no renewal) past its lease: its own clock says it may not act.
    clock_a.advance(LEASE_MS)
    assert not a.holds()
    with pytest.raises(LeadershipLost):
        a.check("complete checkpoint 4")
    with pytest.raises(LeadershipLost):
        a.checkpoint_completed(CheckpointId(4), "/c/j/chk-4")
    assert Pointer.decode(store.read(POINTER).data).checkpoint_id == 3  # type: ignore[union-attr]

    # b takes over after seeing the same version for a whole lease, with token 2, and
    # resumes from a's last pointer.
    seen = decision.seen
    lease_record = store.read(LEASE)
    assert lease_record is not None
    clock_b.advance_to(seen.since_ms + LEASE_MS)
    takeover = decide_acquire(
        (lease_record.version, Lease.decode(lease_record.data)),
        seen,
        "b",
        LEASE_MS,
        clock_b.now_ms(),
    )
    assert isinstance(takeover, TakeOver) and takeover.lease.token == 2


def test_standby_thread_takes_over_only_after_the_lease_lapses() -> None:
    """The real ``acquire`` loop, driven by a manual clock from the test's thread."""
    store, clock_a, clock_b = MemoryStore(), ManualClock(0), ManualClock(0)
    a, b = _driver(store, "a", clock_a), _driver(store, "b", clock_b)
    assert a.acquire(threading.Event(), "j", "g") is not None
    a.checkpoint_completed(CheckpointId(5), "/c/j/chk-5")
    result: list[object] = []
    stop = threading.Event()
    thread = threading.Thread(target=lambda: result.append(b.acquire(stop, "j2", "g")))
    thread.start()
    _wait_for(lambda: b.role == "standby")
    clock_b.advance(LEASE_MS - 1)
    thread.join(0.3)
    assert thread.is_alive() and b.role == "standby"
    clock_b.advance(1)
    thread.join(5.0)
    assert not thread.is_alive()
    takeover = result[0]
    assert takeover is not None and takeover.token == 2 and takeover.waited  # type: ignore[attr-defined]
    assert takeover.previous.checkpoint_id == 5  # type: ignore[attr-defined]
    # a, woken, is fenced by the pointer even if its clock had not moved.
    with pytest.raises(LeadershipLost):
        a.checkpoint_completed(CheckpointId(6), "/c/j/chk-6")
    assert a.role == "lost"
    pointer = Pointer.decode(store.read(POINTER).data)  # type: ignore[union-attr]
    assert (pointer.token, pointer.checkpoint_id, pointer.job_id) == (2, 5, "j2")


def test_renewal_conflict_loses_for_good_and_calls_back_once() -> None:
    store, clock = MemoryStore(), ManualClock(0)
    a = _driver(store, "a", clock)
    assert a.acquire(threading.Event(), "j", "g") is not None
    calls: list[str] = []
    a.on_lost.append(calls.append)
    record = store.read(LEASE)
    assert record is not None
    store.replace(LEASE, Lease("b", 2, LEASE_MS, 0).encode(), record.version)  # b took over
    a.start_renewing()
    clock.advance(3_000)
    # the role turns "lost" before the callbacks run: wait for the callback itself
    _wait_for(lambda: bool(calls))
    assert a.role == "lost"
    with pytest.raises(LeadershipLost):
        a.check("commit")
    a.finish("FINISHED")  # a lost leader writes nothing (and its renewer has stopped)
    assert len(calls) == 1 and "took the lease over" in calls[0]
    assert Pointer.decode(store.read(POINTER).data).status == "RUNNING"  # type: ignore[union-attr]


def test_finish_records_the_status_and_releases_for_an_immediate_successor() -> None:
    store, clock = MemoryStore(), ManualClock(0)
    a, b = _driver(store, "a", clock), _driver(store, "b", clock)
    assert a.acquire(threading.Event(), "j", "g") is not None
    a.checkpoint_completed(CheckpointId(2), "/c/chk-2")
    a.finish("FINISHED")
    assert a.role == "released"
    takeover = b.acquire(threading.Event(), "j", "g")
    assert takeover is not None and not takeover.waited and takeover.token == 2
    assert takeover.previous is not None and takeover.previous.status == "FINISHED"


def test_memory_store_conflicts() -> None:
    store = MemoryStore()
    v1 = store.create("r", b"1")
    with pytest.raises(WriteConflict):
        store.create("r", b"2")
    store.replace("r", b"2", v1.version)
    with pytest.raises(WriteConflict):
        store.replace("r", b"3", v1.version)


def _wait_for(condition: object, timeout_s: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)
