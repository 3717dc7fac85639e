"""The one clock abstraction (``cairn.clock``): the manual clock's invariant."""

from __future__ import annotations

import pytest

from cairn.clock import Clock, ManualClock, MonotonicClock, SystemClock


def test_manual_clock_never_goes_backwards() -> None:
    clock = ManualClock(1_000)
    clock.advance_to(1_000)
    clock.advance(0)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance_to(999)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert clock.now_ms() == 1_000


def test_every_clock_is_a_clock() -> None:
    clocks: list[Clock] = [SystemClock(), MonotonicClock(), ManualClock()]
    assert all(isinstance(c.now_ms(), int) for c in clocks)
