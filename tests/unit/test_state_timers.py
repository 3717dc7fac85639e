"""Keyed timers: deduplication, ordering, deletion; parametrized over keyed backends."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cairn.clock import ManualClock
from cairn.state import HeapKeyedStateBackend, KeyGroupRange
from cairn.state.api import KeyedStateBackend
from cairn.state.timers import TimerQueue
from tests.unit import state_backends

BACKENDS: dict[str, Callable[[], KeyedStateBackend]] = {
    "heap": lambda: HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, clock=ManualClock()),
    "rocksdb": lambda: state_backends.rocksdb(),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> KeyedStateBackend:
    return BACKENDS[request.param]()


def register(b: KeyedStateBackend, key: object, *timestamps: int) -> None:
    b.set_current_key(key)
    for ts in timestamps:
        b.register_processing_time_timer(ts)


def test_timers_fire_in_time_order_once_per_key_and_timestamp(backend: KeyedStateBackend) -> None:
    register(backend, "a", 30, 10, 10)
    register(backend, "b", 10, 20)
    register(backend, ("tuple", 1), 20)
    assert backend.next_timer_ms() == 10
    assert backend.pop_due_timers(9) == []
    assert backend.pop_due_timers(20) == [(10, "a"), (10, "b"), (20, "b"), (20, ("tuple", 1))]
    assert backend.next_timer_ms() == 30
    assert backend.pop_due_timers(100) == [(30, "a")]
    assert backend.next_timer_ms() is None and backend.pop_due_timers(1_000) == []


def test_delete_and_reregister(backend: KeyedStateBackend) -> None:
    register(backend, "a", 10, 20)
    backend.delete_processing_time_timer(10)
    backend.delete_processing_time_timer(999)  # unknown: no-op
    assert backend.next_timer_ms() == 20
    backend.register_processing_time_timer(10)  # re-register after delete
    backend.delete_processing_time_timer(20)
    backend.register_processing_time_timer(20)
    assert backend.pop_due_timers(50) == [(10, "a"), (20, "a")]
    register(backend, "b", 5)
    backend.set_current_key("a")
    backend.delete_processing_time_timer(5)  # another key's timer is untouched
    assert backend.pop_due_timers(5) == [(5, "b")]


def test_event_time_timers_are_a_separate_domain(backend: KeyedStateBackend) -> None:
    backend.set_current_key("a")
    backend.register_event_time_timer(10)
    backend.register_processing_time_timer(10)
    backend.delete_event_time_timer(10)
    backend.register_event_time_timer(15)
    assert backend.next_event_timer_ms() == 15 and backend.next_timer_ms() == 10
    assert backend.pop_due_event_timers(15) == [(15, "a")]
    assert backend.pop_due_timers(15) == [(10, "a")]


def test_queue_survives_many_deletions_and_unorderable_keys() -> None:
    q = TimerQueue()
    for i in range(1_000):
        q.register(i % 7, ("k", i) if i % 2 else i, 0)  # tuples and ints: never compared
    for i in range(0, 1_000, 3):
        q.delete(i % 7, ("k", i) if i % 2 else i)
    assert len(q._heap) < 2 * len(q) + 65  # compaction keeps stale entries bounded
    expected = sorted(
        ((i % 7, ("k", i) if i % 2 else i) for i in range(1_000) if i % 3),
        key=lambda e: (e[0], str(e[1])),
    )
    fired = q.pop_due(6)
    assert [ts for ts, _ in fired] == sorted(ts for ts, _ in fired)
    assert sorted(fired, key=lambda e: (e[0], str(e[1]))) == expected
    assert len(q) == 0 and q.peek() is None


def test_ties_fire_in_registration_order() -> None:
    q = TimerQueue()
    for key in ("z", "a", "m"):
        q.register(5, key, 0)
    assert q.pop_due(5) == [(5, "z"), (5, "a"), (5, "m")]
