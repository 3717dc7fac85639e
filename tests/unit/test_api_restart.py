"""Restart strategies: the RestartStrategies API and the configuration keys agree."""

from __future__ import annotations

import datetime

import pytest

from cairn.common import Configuration, ConfigurationError, Duration, RestartStrategies
from cairn.common.restart_strategy import restart_settings_from
from cairn.datastream import StreamExecutionEnvironment
from cairn.settings import RestartKind, RestartSettings


def _settings(env: StreamExecutionEnvironment) -> RestartSettings:
    env.from_collection([1]).print()
    return env.prepare_job().settings.restart


def test_default_without_checkpointing_is_no_restart() -> None:
    assert _settings(StreamExecutionEnvironment()) == RestartSettings(kind=RestartKind.NONE)


def test_default_with_checkpointing_is_flink2_exponential_delay() -> None:
    env = StreamExecutionEnvironment().enable_checkpointing(1_000)
    assert _settings(env) == RestartSettings(
        kind=RestartKind.EXPONENTIAL_DELAY,
        attempts=2**31 - 1,
        delay_ms=1_000,
        max_backoff_ms=60_000,
        multiplier=1.5,
        reset_threshold_ms=3_600_000,
        jitter=0.1,
    )


def test_fixed_delay_from_api_and_keys_agree() -> None:
    api = StreamExecutionEnvironment()
    api.set_restart_strategy(
        RestartStrategies.fixed_delay_restart(3, datetime.timedelta(seconds=10))
    )
    keys = StreamExecutionEnvironment(
        Configuration()
        .set_string("restart-strategy.type", "fixeddelay")
        .set_string("restart-strategy.fixed-delay.attempts", "3")
        .set_string("restart-strategy.fixed-delay.delay", "10 s")
    )
    expected = RestartSettings(kind=RestartKind.FIXED_DELAY, attempts=3, delay_ms=10_000)
    assert _settings(api) == _settings(keys) == expected


def test_failure_rate_from_api_and_keys_agree() -> None:
    api = StreamExecutionEnvironment()
    api.set_restart_strategy(
        RestartStrategies.failure_rate_restart(5, 60_000, Duration.of_seconds(2))
    )
    keys = StreamExecutionEnvironment(
        {
            "restart-strategy.type": "failure-rate",
            "restart-strategy.failure-rate.max-failures-per-interval": 5,
            "restart-strategy.failure-rate.failure-rate-interval": "1 min",
            "restart-strategy.failure-rate.delay": "2 s",
        }
    )
    expected = RestartSettings(
        kind=RestartKind.FAILURE_RATE,
        delay_ms=2_000,
        max_failures_per_interval=5,
        failure_rate_interval_ms=60_000,
    )
    assert _settings(api) == _settings(keys) == expected


def test_exponential_delay_from_api() -> None:
    strategy = RestartStrategies.exponential_delay_restart(500, 10_000, 2.0, 60_000, 0.0)
    assert strategy.get_initial_backoff() == datetime.timedelta(milliseconds=500)
    assert strategy.get_backoff_multiplier() == 2.0
    env = StreamExecutionEnvironment()
    env.set_restart_strategy(strategy)
    settings = _settings(env)
    assert (settings.kind, settings.delay_ms, settings.max_backoff_ms) == (
        RestartKind.EXPONENTIAL_DELAY,
        500,
        10_000,
    )
    assert (settings.multiplier, settings.reset_threshold_ms, settings.jitter) == (2.0, 60_000, 0.0)


def test_no_restart_overrides_the_checkpointing_default() -> None:
    env = StreamExecutionEnvironment().enable_checkpointing(1_000)
    env.set_restart_strategy(RestartStrategies.no_restart())
    assert _settings(env).kind is RestartKind.NONE


def test_set_restart_strategy_replaces_previous_keys_and_fall_back_clears() -> None:
    env = StreamExecutionEnvironment().enable_checkpointing(1_000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 100))
    env.set_restart_strategy(RestartStrategies.fall_back_restart())
    assert not any(k.startswith("restart-strategy.") for k in env._configuration.key_set())
    assert _settings(env).kind is RestartKind.EXPONENTIAL_DELAY


def test_strategy_getters_and_equality() -> None:
    a = RestartStrategies.fixed_delay_restart(3, 1_000)
    assert a.get_restart_attempts() == 3
    assert a.get_delay_between_attempts_interval() == datetime.timedelta(seconds=1)
    assert a == RestartStrategies.fixed_delay_restart(3, datetime.timedelta(seconds=1))
    assert a != RestartStrategies.fixed_delay_restart(4, 1_000)
    assert a.to_configuration()["restart-strategy.fixed-delay.delay"] == "1 s"


def test_invalid_strategies() -> None:
    with pytest.raises(TypeError, match="delay_between_attempts"):
        RestartStrategies.fixed_delay_restart(3, "soon")
    with pytest.raises(ConfigurationError, match="fixed-delay attempts must be at least 0"):
        RestartStrategies.fixed_delay_restart(-1, 1_000)
    with pytest.raises(ConfigurationError, match="backoff multiplier"):
        RestartStrategies.exponential_delay_restart(1_000, 2_000, 0.5, 60_000, 0.1)
    with pytest.raises(TypeError):
        StreamExecutionEnvironment().set_restart_strategy("fixed-delay")  # type: ignore[arg-type]


def test_max_backoff_below_initial_backoff_is_rejected() -> None:
    resolved = {
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": 5_000,
        "restart-strategy.exponential-delay.max-backoff": 1_000,
    }
    with pytest.raises(ConfigurationError, match="must not be smaller"):
        restart_settings_from(resolved, checkpointing_enabled=True)
