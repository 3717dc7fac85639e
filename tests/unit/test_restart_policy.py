"""Restart strategies as pure decisions (Flink's restart-strategy.* semantics)."""

from __future__ import annotations

import random

from cairn.deploy.restart_policy import RestartPolicy
from cairn.settings import RestartKind, RestartSettings


def test_no_restart_strategy_never_restarts() -> None:
    policy = RestartPolicy(RestartSettings(kind=RestartKind.NONE))
    decision = policy.on_failure(0)
    assert not decision.restart
    assert "none" in decision.reason


def test_fixed_delay_allows_exactly_n_restarts_with_the_delay() -> None:
    policy = RestartPolicy(RestartSettings(kind=RestartKind.FIXED_DELAY, attempts=3, delay_ms=250))
    decisions = [policy.on_failure(i * 1000) for i in range(4)]
    assert [d.restart for d in decisions] == [True, True, True, False]
    assert {d.delay_ms for d in decisions[:3]} == {250}
    assert "3 attempts" in decisions[3].reason


def test_exponential_delay_grows_caps_and_resets_after_quiet_period() -> None:
    settings = RestartSettings(
        kind=RestartKind.EXPONENTIAL_DELAY,
        attempts=100,
        delay_ms=100,
        max_backoff_ms=1000,
        multiplier=2.0,
        reset_threshold_ms=10_000,
        jitter=0.0,
    )
    policy = RestartPolicy(settings, rng=random.Random(1))
    delays = [policy.on_failure(i).delay_ms for i in range(6)]
    assert delays == [100, 200, 400, 800, 1000, 1000]
    # a failure after a quiet period longer than the threshold starts from the initial backoff
    assert policy.on_failure(60_000).delay_ms == 100


def test_exponential_delay_jitter_stays_within_bounds() -> None:
    settings = RestartSettings(
        kind=RestartKind.EXPONENTIAL_DELAY,
        attempts=100,
        delay_ms=1000,
        max_backoff_ms=60_000,
        multiplier=1.0,
        jitter=0.1,
    )
    policy = RestartPolicy(settings, rng=random.Random(7))
    delays = [policy.on_failure(i).delay_ms for i in range(50)]
    assert all(900 <= d <= 1100 for d in delays)
    assert len(set(delays)) > 1


def test_exponential_delay_attempts_are_bounded() -> None:
    settings = RestartSettings(
        kind=RestartKind.EXPONENTIAL_DELAY, attempts=2, delay_ms=10, jitter=0.0
    )
    policy = RestartPolicy(settings)
    assert [policy.on_failure(i).restart for i in range(3)] == [True, True, False]


def test_failure_rate_fails_when_too_many_failures_in_the_interval() -> None:
    settings = RestartSettings(
        kind=RestartKind.FAILURE_RATE,
        max_failures_per_interval=2,
        failure_rate_interval_ms=1000,
        delay_ms=5,
    )
    policy = RestartPolicy(settings)
    assert policy.on_failure(0).restart
    assert policy.on_failure(100).restart
    assert not policy.on_failure(200).restart  # third failure within one second
    fresh = RestartPolicy(settings)
    assert all(fresh.on_failure(t).restart for t in (0, 2000, 4000, 6000))
