"""Watermark strategies at work: each strategy's watermarks, idleness, timestamp assignment."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.common import Duration, TimestampAssigner, WatermarkStrategy
from cairn.events import ACTIVE, IDLE, MAX_WATERMARK, Watermark
from cairn.runtime.eventtime.generation import TimestampStamper, WatermarkEmitter
from cairn.runtime.eventtime.stamped import StampedBatch, slice_batch, stamp, timestamps_of
from cairn.runtime.operators.timestamps import PeriodicWatermarks


class First(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[0])


class Previous(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return record_timestamp + 1


def test_monotonous_timestamps_trail_the_largest_timestamp_by_one() -> None:
    e = WatermarkEmitter(WatermarkStrategy.for_monotonous_timestamps())
    assert e.on_periodic_emit(0) == (), "no record yet: no watermark"
    e.on_event(1000)
    assert e.on_periodic_emit(0) == (Watermark(999),)
    e.on_event(1500)
    e.on_event(1200)
    assert e.on_periodic_emit(0) == (Watermark(1499),)
    assert e.on_periodic_emit(0) == (), "the same watermark is not sent twice"


def test_bounded_out_of_orderness_is_max_minus_bound_minus_one() -> None:
    e = WatermarkEmitter(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)))
    e.on_event(10_000)
    e.on_event(3_000)  # late by 7 s: does not lower anything
    assert e.on_periodic_emit(0) == (Watermark(4_999),)


def test_no_watermarks_emits_only_the_final_one() -> None:
    e = WatermarkEmitter(WatermarkStrategy.no_watermarks())
    e.on_event(10_000)
    assert e.on_periodic_emit(0) == ()
    assert e.on_end_of_input() == (Watermark(MAX_WATERMARK),)
    assert e.on_end_of_input() == ()


def test_idleness_marks_idle_once_and_active_again_before_the_next_watermark() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(500))
    e = WatermarkEmitter(strategy)
    e.on_event(100)
    assert e.on_periodic_emit(0) == (Watermark(99),)
    assert e.on_periodic_emit(200) == (), "first check without activity starts the timer"
    assert e.on_periodic_emit(600) == ()
    assert e.on_periodic_emit(701) == (IDLE,)
    assert e.on_periodic_emit(900) == (), "idle is announced once"
    e.on_event(150)
    assert e.on_periodic_emit(1100) == (ACTIVE, Watermark(149))


def test_idle_source_that_ends_becomes_active_with_the_final_watermark() -> None:
    e = WatermarkEmitter(WatermarkStrategy.no_watermarks().with_idleness(Duration.of_millis(10)))
    e.on_periodic_emit(0)
    assert e.on_periodic_emit(11) == (IDLE,)
    assert e.on_end_of_input() == (ACTIVE, Watermark(MAX_WATERMARK))
    assert e.on_periodic_emit(10_000) == (), "an ended input is never idle again"


def test_stamper_uses_the_assigner_and_feeds_the_emitter() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(First())
    stamper = TimestampStamper(strategy, WatermarkEmitter(strategy))
    out = stamper.assign([(30, "a"), (10, "b")])
    assert type(out) is StampedBatch and out == [(30, "a"), (10, "b")]
    assert out.timestamps == [30, 10]
    assert stamper.emitter.on_periodic_emit(0) == (Watermark(29),)


def test_assigner_gets_the_previous_timestamp_or_min_long() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Previous())
    stamper = TimestampStamper(strategy, WatermarkEmitter(strategy))
    assert stamper.assign(stamp(["x", "y"], [5, None])).timestamps == [6, -(2**63) + 1]


def test_without_an_assigner_records_keep_their_timestamps() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    stamper = TimestampStamper(strategy, WatermarkEmitter(strategy))
    plain = ["a"]
    assert stamper.assign(plain) is plain
    kept = stamp(["b"], [70])
    assert stamper.assign(kept) is kept
    assert stamper.emitter.on_periodic_emit(0) == (Watermark(69),)


def test_periodic_emission_follows_the_interval_and_zero_disables_it() -> None:
    p = PeriodicWatermarks(WatermarkStrategy.for_monotonous_timestamps(), 200, now_ms=1000)
    p.emitter.on_event(50)
    assert p.next_ms == 1200
    assert p.on_timer(1199) == ()
    assert p.on_timer(1250) == (Watermark(49),)
    assert p.next_ms == 1450
    off = PeriodicWatermarks(WatermarkStrategy.for_monotonous_timestamps(), 0, now_ms=0)
    assert off.next_ms is None and off.on_timer(10**9) == ()


def test_with_methods_return_copies_and_check_their_arguments() -> None:
    base = WatermarkStrategy.for_monotonous_timestamps()
    assigned = base.with_timestamp_assigner(First())
    assert base.timestamp_assigner is None and assigned.timestamp_assigner is not None
    with pytest.raises(TypeError, match="extract_timestamp"):
        base.with_timestamp_assigner(object())  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="with_watermark_alignment"):
        base.with_watermark_alignment("group", Duration.of_seconds(1))


def test_stamped_batches_pickle_and_slice_with_their_timestamps() -> None:
    import pickle

    b = stamp([1, 2, 3], [10, None, 30])
    back = pickle.loads(pickle.dumps(b, protocol=5))
    assert type(back) is StampedBatch and back == [1, 2, 3] and back.timestamps == [10, None, 30]
    assert slice_batch(b, 1, 2).timestamps == [None]
    assert timestamps_of([1, 2]) == [None, None]
