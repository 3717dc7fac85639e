"""Restart strategies with PyFlink's names (``pyflink.common.RestartStrategies``).

Invariant: a strategy is nothing but a set of ``restart-strategy.*`` configuration entries
(``to_configuration``), so ``env.set_restart_strategy(...)`` and the configuration keys are two
spellings of the same thing; ``restart_settings_from`` is the single translation into the
immutable ``RestartSettings`` the job master reads.

>>> settings = RestartStrategies.fixed_delay_restart(3, 10_000).to_settings()
>>> settings.kind.value, settings.attempts, settings.delay_ms
('fixed-delay', 3, 10000)
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from cairn.common import config_options as opts
from cairn.common.config_values import parse_duration_ms
from cairn.common.exceptions import ConfigurationError
from cairn.settings import RestartKind, RestartSettings

__all__ = [
    "ExponentialDelayRestartStrategyConfiguration",
    "FailureRateRestartStrategyConfiguration",
    "FallbackRestartStrategyConfiguration",
    "FixedDelayRestartStrategyConfiguration",
    "NoRestartStrategyConfiguration",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "restart_settings_from",
]

Delay = int | datetime.timedelta | Any  # milliseconds, timedelta, or Duration/Time


class RestartStrategyConfiguration:
    """Base of the restart strategy configurations; equal when their entries are equal."""

    def __init__(self, entries: Mapping[str, Any]) -> None:
        self._entries: dict[str, Any] = {}
        for key, value in entries.items():
            canonical, parsed = opts.parse_value(key, value)
            self._entries[canonical] = parsed

    def to_configuration(self) -> dict[str, str]:
        """The ``restart-strategy.*`` entries; empty for the fall-back strategy."""
        return {k: opts.get_option(k).format(v) for k, v in self._entries.items()}

    def to_settings(self, checkpointing_enabled: bool = False) -> RestartSettings:
        return restart_settings_from(self._entries, checkpointing_enabled)

    def get_description(self) -> str:
        entries = ", ".join(f"{k}={v}" for k, v in self.to_configuration().items())
        return f"{type(self).__name__}({entries})"

    def _get(self, option: opts.ConfigOption) -> Any:
        return self._entries.get(option.key, option.default)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RestartStrategyConfiguration) or type(other) is not type(self):
            return False
        return self._entries == other._entries

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self._entries.items()))))

    def __repr__(self) -> str:
        return self.get_description()


def _td(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _ms(name: str, value: Delay) -> int:
    try:
        return parse_duration_ms(value)
    except ValueError as exc:
        raise TypeError(
            f"{name} must be milliseconds (int), a datetime.timedelta or a Duration, "
            f"got {value!r}: {exc}"
        ) from None


class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
    """The job fails on the first failure."""

    def __init__(self) -> None:
        super().__init__({opts.RESTART_TYPE.key: "none"})


class FallbackRestartStrategyConfiguration(RestartStrategyConfiguration):
    """Use the configured (or default) strategy: exponential-delay with checkpointing, none
    without."""

    def __init__(self) -> None:
        super().__init__({})


class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    def __init__(self, restart_attempts: int, delay_between_attempts_interval: Delay) -> None:
        super().__init__(
            {
                opts.RESTART_TYPE.key: "fixed-delay",
                opts.FIXED_DELAY_ATTEMPTS.key: restart_attempts,
                opts.FIXED_DELAY_DELAY.key: _ms(
                    "delay_between_attempts", delay_between_attempts_interval
                ),
            }
        )

    def get_restart_attempts(self) -> int:
        return int(self._get(opts.FIXED_DELAY_ATTEMPTS))

    def get_delay_between_attempts_interval(self) -> datetime.timedelta:
        return _td(self._get(opts.FIXED_DELAY_DELAY))


class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
    def __init__(
        self, max_failure_rate: int, failure_interval: Delay, delay_between_attempts_interval: Delay
    ) -> None:
        super().__init__(
            {
                opts.RESTART_TYPE.key: "failure-rate",
                opts.FAILURE_RATE_MAX.key: max_failure_rate,
                opts.FAILURE_RATE_INTERVAL.key: _ms("failure_interval", failure_interval),
                opts.FAILURE_RATE_DELAY.key: _ms("delay_interval", delay_between_attempts_interval),
            }
        )

    def get_max_failure_rate(self) -> int:
        return int(self._get(opts.FAILURE_RATE_MAX))

    def get_failure_interval(self) -> datetime.timedelta:
        return _td(self._get(opts.FAILURE_RATE_INTERVAL))

    def get_delay_between_attempts_interval(self) -> datetime.timedelta:
        return _td(self._get(opts.FAILURE_RATE_DELAY))


class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    def __init__(
        self,
        initial_backoff: Delay,
        max_backoff: Delay,
        backoff_multiplier: float,
        reset_backoff_threshold: Delay,
        jitter_factor: float,
    ) -> None:
        super().__init__(
            {
                opts.RESTART_TYPE.key: "exponential-delay",
                opts.EXP_INITIAL_BACKOFF.key: _ms("initial_backoff", initial_backoff),
                opts.EXP_MAX_BACKOFF.key: _ms("max_backoff", max_backoff),
                opts.EXP_MULTIPLIER.key: backoff_multiplier,
                opts.EXP_RESET_THRESHOLD.key: _ms(
                    "reset_backoff_threshold", reset_backoff_threshold
                ),
                opts.EXP_JITTER.key: jitter_factor,
            }
        )

    def get_initial_backoff(self) -> datetime.timedelta:
        return _td(self._get(opts.EXP_INITIAL_BACKOFF))

    def get_max_backoff(self) -> datetime.timedelta:
        return _td(self._get(opts.EXP_MAX_BACKOFF))

    def get_backoff_multiplier(self) -> float:
        return float(self._get(opts.EXP_MULTIPLIER))

    def get_reset_backoff_threshold(self) -> datetime.timedelta:
        return _td(self._get(opts.EXP_RESET_THRESHOLD))

    def get_jitter_factor(self) -> float:
        return float(self._get(opts.EXP_JITTER))


# The nested aliases in RestartStrategies shadow these names inside the class body.
_NoRestartStrategyConfiguration = NoRestartStrategyConfiguration
_FallbackRestartStrategyConfiguration = FallbackRestartStrategyConfiguration
_FixedDelayRestartStrategyConfiguration = FixedDelayRestartStrategyConfiguration
_FailureRateRestartStrategyConfiguration = FailureRateRestartStrategyConfiguration
_ExponentialDelayRestartStrategyConfiguration = ExponentialDelayRestartStrategyConfiguration


class RestartStrategies:
    """Factories of restart strategy configurations (``env.set_restart_strategy(...)``).

    Delays are milliseconds (``int``), ``datetime.timedelta`` or ``Duration``.
    """

    NoRestartStrategyConfiguration = NoRestartStrategyConfiguration
    FallbackRestartStrategyConfiguration = FallbackRestartStrategyConfiguration
    FixedDelayRestartStrategyConfiguration = FixedDelayRestartStrategyConfiguration
    FailureRateRestartStrategyConfiguration = FailureRateRestartStrategyConfiguration
    ExponentialDelayRestartStrategyConfiguration = ExponentialDelayRestartStrategyConfiguration

    @staticmethod
    def no_restart() -> _NoRestartStrategyConfiguration:
        return NoRestartStrategyConfiguration()

    @staticmethod
    def fall_back_restart() -> _FallbackRestartStrategyConfiguration:
        return FallbackRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: Delay
    ) -> _FixedDelayRestartStrategyConfiguration:
        """Restart up to ``restart_attempts`` times, waiting ``delay_between_attempts``."""
        return FixedDelayRestartStrategyConfiguration(restart_attempts, delay_between_attempts)

    @staticmethod
    def failure_rate_restart(
        failure_rate: int, failure_interval: Delay, delay_interval: Delay
    ) -> _FailureRateRestartStrategyConfiguration:
        """Fail the job once more than ``failure_rate`` failures happen within
        ``failure_interval``; wait ``delay_interval`` before each restart."""
        return FailureRateRestartStrategyConfiguration(
            failure_rate, failure_interval, delay_interval
        )

    @staticmethod
    def exponential_delay_restart(
        initial_backoff_time: Delay,
        max_backoff_time: Delay,
        backoff_multiplier: float,
        reset_backoff_threshold: Delay,
        jitter_factor: float,
    ) -> _ExponentialDelayRestartStrategyConfiguration:
        """Restart without limit, the delay growing by ``backoff_multiplier`` from
        ``initial_backoff_time`` up to ``max_backoff_time``; it resets after running
        ``reset_backoff_threshold`` without failure."""
        return ExponentialDelayRestartStrategyConfiguration(
            initial_backoff_time,
            max_backoff_time,
            backoff_multiplier,
            reset_backoff_threshold,
            jitter_factor,
        )


def restart_settings_from(
    resolved: Mapping[str, Any], checkpointing_enabled: bool
) -> RestartSettings:
    """``RestartSettings`` from parsed configuration (canonical key -> value).

    Without ``restart-strategy.type`` the default is Flink 2's: exponential-delay when
    checkpointing is enabled, no restart otherwise.
    """

    def get(option: opts.ConfigOption) -> Any:
        return resolved.get(option.key, option.default)

    kind = get(opts.RESTART_TYPE)
    if kind is None:
        kind = "exponential-delay" if checkpointing_enabled else "none"
    if kind == "none":
        return RestartSettings(kind=RestartKind.NONE)
    if kind == "fixed-delay":
        return RestartSettings(
            kind=RestartKind.FIXED_DELAY,
            attempts=get(opts.FIXED_DELAY_ATTEMPTS),
            delay_ms=get(opts.FIXED_DELAY_DELAY),
        )
    if kind == "failure-rate":
        return RestartSettings(
            kind=RestartKind.FAILURE_RATE,
            delay_ms=get(opts.FAILURE_RATE_DELAY),
            max_failures_per_interval=get(opts.FAILURE_RATE_MAX),
            failure_rate_interval_ms=get(opts.FAILURE_RATE_INTERVAL),
        )
    if kind == "exponential-delay":
        initial, maximum = get(opts.EXP_INITIAL_BACKOFF), get(opts.EXP_MAX_BACKOFF)
        if maximum < initial:
            raise ConfigurationError(
                f"{opts.EXP_MAX_BACKOFF.key} ({maximum} ms) must not be smaller than "
                f"{opts.EXP_INITIAL_BACKOFF.key} ({initial} ms)"
            )
        return RestartSettings(
            kind=RestartKind.EXPONENTIAL_DELAY,
            attempts=get(opts.EXP_ATTEMPTS),
            delay_ms=initial,
            max_backoff_ms=maximum,
            multiplier=get(opts.EXP_MULTIPLIER),
            reset_threshold_ms=get(opts.EXP_RESET_THRESHOLD),
            jitter=get(opts.EXP_JITTER),
        )
    raise ConfigurationError(f"unsupported restart strategy {kind!r}")
