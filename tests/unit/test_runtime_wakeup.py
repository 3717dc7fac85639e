"""The task thread's wake-up signal under real threads."""

from __future__ import annotations

import threading
import time

from cairn.runtime.wakeup import Wakeup
from cairn.testing.processes import holds_for


def test_a_set_from_another_thread_ends_a_wait_at_once() -> None:
    wakeup = Wakeup()
    woke: list[float] = []

    def waiter() -> None:
        started = time.monotonic()
        assert wakeup.wait(10.0)
        woke.append(time.monotonic() - started)

    thread = threading.Thread(target=waiter)
    thread.start()
    holds_for(lambda: not woke, 0.05, 0.01, "a clear signal keeps the waiter waiting")
    wakeup.set()
    thread.join(5)
    assert woke and woke[0] < 2.0


def test_a_set_between_clear_and_wait_is_not_lost() -> None:
    wakeup = Wakeup()
    wakeup.clear()
    threading.Thread(target=wakeup.set).start()
    assert wakeup.wait(5.0)  # set before or during the wait: either way it returns True


def test_racing_setters_and_a_waiter_never_fail() -> None:
    """Four threads set while the waiter clears and waits, for at least 0.3 s and 50 waits
    (counted, not timed: on a loaded machine the waiter may get little of those 0.3 s)."""
    wakeup = Wakeup()
    errors: list[BaseException] = []
    done = threading.Event()

    def setter() -> None:
        try:
            while not done.is_set():
                wakeup.set()
        except BaseException as exc:
            errors.append(exc)

    setters = [threading.Thread(target=setter) for _ in range(4)]
    for t in setters:
        t.start()
    waits = 0
    deadline = time.monotonic() + 0.3
    try:
        while waits < 50 or time.monotonic() < deadline:
            wakeup.clear()
            wakeup.wait(0.01)
            waits += 1
    finally:
        done.set()
        for t in setters:
            t.join()
    assert not errors and waits >= 50
    wakeup.set()
    assert wakeup.is_set() and wakeup.wait(0)
