"""User-facing state API: Time/Duration, StateTtlConfig builder, descriptors (PyFlink names)."""

from __future__ import annotations

import pytest

from cairn.common.time import Duration, Instant, Time
from cairn.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)


def test_time_and_duration_convert_to_milliseconds() -> None:
    assert Time.milliseconds(7).to_milliseconds() == 7
    assert Time.seconds(5).to_milliseconds() == 5_000
    assert Time.minutes(2).to_milliseconds() == 120_000
    assert Time.hours(1).to_milliseconds() == 3_600_000
    assert Time.days(1).to_milliseconds() == 86_400_000
    assert Duration.of_millis(7).to_milliseconds() == 7
    assert Duration.of_seconds(5).to_milliseconds() == 5_000
    assert Duration.of_minutes(2).to_milliseconds() == 120_000
    assert Duration.of_hours(1).to_milliseconds() == 3_600_000
    assert Duration.of_days(1).to_milliseconds() == 86_400_000
    assert Duration.of_nanos(1_999_999).to_milliseconds() == 1
    assert Duration.of_nanos(-1).to_milliseconds() == -1  # floor, like java.time.Duration
    assert Time.seconds(60) == Time.minutes(1) and Duration.of_seconds(60) == Duration.of_minutes(1)
    assert len({Time.seconds(1), Time.milliseconds(1000)}) == 1
    assert Instant.of_epoch_milli(-1).to_epoch_milli() == -1


def test_ttl_builder_defaults_match_pyflink() -> None:
    cfg = StateTtlConfig.new_builder(Time.seconds(5)).build()
    assert cfg.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert cfg.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert cfg.get_ttl_time_characteristic() is StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
    assert cfg.get_ttl() == Time.seconds(5) and cfg.ttl_ms == 5_000
    assert cfg.is_enabled() and not cfg.update_on_read and not cfg.return_expired
    assert not cfg.cleanup_in_full_snapshot


def test_ttl_builder_setters() -> None:
    cfg = (
        StateTtlConfig.new_builder(Duration.of_seconds(1))
        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
        .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
        .cleanup_full_snapshot()
        .cleanup_incrementally(10, False)
        .set_ttl(Time.minutes(1))
        .build()
    )
    assert cfg.update_on_read and cfg.return_expired and cfg.cleanup_in_full_snapshot
    assert cfg.ttl_ms == 60_000
    shortcut = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .update_ttl_on_read_and_write()
        .return_expired_if_not_cleaned_up()
        .build()
    )
    assert shortcut.update_on_read and shortcut.return_expired
    disabled = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .set_update_type(StateTtlConfig.UpdateType.Disabled)
        .build()
    )
    assert not disabled.is_enabled()


def test_ttl_rejects_bad_durations() -> None:
    with pytest.raises(TypeError, match="Time or Duration"):
        StateTtlConfig.new_builder(5).build()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        StateTtlConfig.new_builder(Time.seconds(0)).build()


def test_descriptors() -> None:
    v = ValueStateDescriptor("v", "INT")
    assert v.get_name() == "v" and v.kind == "value" and v.type_info == "INT"
    assert ValueStateDescriptor("fresh", None).ttl_config is None
    cfg = StateTtlConfig.new_builder(Time.seconds(1)).build()
    v.enable_time_to_live(cfg)
    assert v.ttl_config is cfg
    disabled = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .set_update_type(StateTtlConfig.UpdateType.Disabled)
        .build()
    )
    off = ValueStateDescriptor("off", None)
    off.enable_time_to_live(disabled)
    assert off.ttl_config is None  # a disabled config means no TTL wrapping at all
    with pytest.raises(TypeError):
        ValueStateDescriptor("w", None).enable_time_to_live("5s")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ValueStateDescriptor("", None)
    assert ListStateDescriptor("l", "STR").elem_type_info == "STR"
    m = MapStateDescriptor("m", "K", "V")
    assert (m.key_type_info, m.value_type_info, m.kind) == ("K", "V", "map")


def test_reducing_descriptor_accepts_reduce_functions_and_callables() -> None:
    class Max:
        def reduce(self, a: int, b: int) -> int:
            return max(a, b)

    fn = Max()
    d = ReducingStateDescriptor("max", fn, None)
    assert d.reduce(3, 9) == 9 and d.get_reduce_function() is fn
    assert ReducingStateDescriptor("sum", lambda a, b: a + b, None).reduce(1, 2) == 3
    with pytest.raises(TypeError, match="ReduceFunction"):
        ReducingStateDescriptor("bad", 42, None)


def test_aggregating_descriptor_checks_the_function() -> None:
    class Count:
        def create_accumulator(self) -> int:
            return 0

        def add(self, value: object, acc: int) -> int:
            return acc + 1

        def get_result(self, acc: int) -> int:
            return acc

    fn = Count()
    assert AggregatingStateDescriptor("c", fn, None).get_agg_function() is fn
    with pytest.raises(TypeError, match="get_result"):
        AggregatingStateDescriptor("bad", object(), None)
