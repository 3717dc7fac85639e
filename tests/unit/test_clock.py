"""The one clock abstraction (``cairn.clock``): its doctests and the manual clock's invariant."""

from __future__ import annotations

import doctest

import pytest

import cairn.clock
from cairn.clock import Clock, ManualClock, MonotonicClock, SystemClock


def test_docstring_examples() -> None:
    result = doctest.testmod(cairn.clock)
    assert result.failed == 0 and result.attempted > 0


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
