"""The watermark valve: scripted watermarks and statuses per channel, the events it outputs."""

from __future__ import annotations

import random

import pytest

from cairn.events import ACTIVE, IDLE, MAX_WATERMARK, MIN_WATERMARK, Watermark
from cairn.runtime.eventtime.valve import StatusWatermarkValve


def wm(ts: int) -> Watermark:
    return Watermark(ts)


def test_output_is_the_minimum_over_channels_and_only_advances() -> None:
    v = StatusWatermarkValve(3)
    assert v.on_watermark(0, 10) == ()
    assert v.on_watermark(1, 20) == ()
    assert v.on_watermark(2, 5) == (wm(5),)
    assert v.on_watermark(2, 30) == (wm(10),)
    assert v.on_watermark(0, 8) == (), "a lower watermark of a channel is ignored"
    assert v.on_watermark(0, 25) == (wm(20),)
    assert v.on_watermark(1, 20) == (), "an equal watermark changes nothing"
    assert v.watermark == 20


def test_idle_channels_hold_nothing_back_and_rejoin_once_caught_up() -> None:
    v = StatusWatermarkValve(2)
    v.on_watermark(0, 100)
    assert v.on_status(1, IDLE) == (wm(100),), "the idle channel no longer holds it back"
    assert v.on_watermark(0, 150) == (wm(150),)
    assert v.on_watermark(1, 10) == (), "an idle channel's watermark is ignored"
    assert v.on_status(1, ACTIVE) == (), "the output was not idle: nothing to announce"
    assert v.on_watermark(1, 120) == (), "behind the output: not aligned, not counted"
    assert v.on_watermark(0, 300) == (wm(300),)
    assert v.on_watermark(1, 200) == (), "still behind the output"
    assert v.on_watermark(1, 310) == ()
    assert v.on_watermark(0, 400) == (wm(310),), "caught up: counts for the minimum again"


def test_all_idle_outputs_the_largest_watermark_then_idle_and_active_when_one_returns() -> None:
    v = StatusWatermarkValve(2)
    v.on_watermark(0, 50)
    v.on_watermark(1, 70)
    assert v.watermark == 50
    assert v.on_status(1, IDLE) == (), "channel 0 (50) still holds the output"
    assert v.on_status(0, IDLE) == (wm(70), IDLE), "nothing holds back the largest any more"
    assert v.idle
    assert v.on_status(0, IDLE) == (), "idle twice is once"
    assert v.on_status(1, ACTIVE) == (ACTIVE,)
    assert not v.idle


def test_all_idle_flushes_the_max_watermark_when_the_last_channel_was_the_minimum() -> None:
    v = StatusWatermarkValve(2)
    v.on_watermark(0, 80)
    v.on_watermark(1, 60)
    assert v.watermark == 60
    assert v.on_status(0, IDLE) == ()  # channel 1 (60) still decides
    assert v.on_status(1, IDLE) == (wm(80), IDLE)


def test_end_of_partition_counts_as_max_and_all_ended_gives_the_final_watermark() -> None:
    v = StatusWatermarkValve(2)
    v.on_watermark(0, 10)
    v.on_status(1, IDLE)
    assert v.watermark == 10
    assert v.on_end_of_partition(0) == (wm(MAX_WATERMARK),), "the idle channel waits for none"
    v2 = StatusWatermarkValve(2)
    assert v2.on_end_of_partition(0) == ()
    assert v2.on_watermark(1, 42) == (wm(42),)
    assert v2.on_end_of_partition(1) == (wm(MAX_WATERMARK),)


def test_end_of_an_idle_only_input_reactivates_and_finishes() -> None:
    v = StatusWatermarkValve(1)
    assert v.on_status(0, IDLE) == (IDLE,)
    assert v.on_end_of_partition(0) == (ACTIVE, wm(MAX_WATERMARK))


def test_a_valve_needs_a_channel() -> None:
    with pytest.raises(ValueError, match="at least one channel"):
        StatusWatermarkValve(0)


@pytest.mark.parametrize("seed", range(20))
def test_random_sequences_keep_the_invariants(seed: int) -> None:
    """Output never decreases; while not all idle it equals the minimum over aligned active
    channels once every channel reported (checked against a model after each step)."""
    rng = random.Random(seed)
    n = rng.randint(1, 4)
    v = StatusWatermarkValve(n)
    last = MIN_WATERMARK
    marks = [MIN_WATERMARK] * n
    for _ in range(200):
        ch = rng.randrange(n)
        if rng.random() < 0.15:
            v.on_status(ch, IDLE if rng.random() < 0.5 else ACTIVE)
        else:
            marks[ch] = max(marks[ch], marks[ch] + rng.randint(-5, 20))
            out = v.on_watermark(ch, marks[ch])
            assert all(isinstance(e, Watermark) for e in out)
        assert v.watermark >= last
        last = v.watermark
        assert v.watermark <= max(marks) or v.watermark == MIN_WATERMARK
