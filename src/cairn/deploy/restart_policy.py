"""Restart strategies (Flink's ``restart-strategy.*``) as pure decisions.

Invariant: ``RestartPolicy.on_failure(now_ms)`` depends only on the settings and the failure
history it was told about, so every strategy is tested without running a job (which failures
it is told about is ``after_attempt.py``'s decision).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from cairn.settings import RestartKind, RestartSettings


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    delay_ms: int
    reason: str


@dataclass
class RestartPolicy:
    settings: RestartSettings
    rng: random.Random = field(default_factory=random.Random)
    _failures: list[int] = field(default_factory=list)
    _restarts: int = 0
    _backoff_ms: float = 0.0
    _last_failure_ms: int | None = None

    def on_failure(self, now_ms: int) -> RestartDecision:
        s = self.settings
        self._failures.append(now_ms)
        if s.kind is RestartKind.NONE:
            return RestartDecision(False, 0, "restart strategy 'none' (no restarts)")
        if s.kind is RestartKind.FIXED_DELAY:
            if self._restarts >= s.attempts:
                return RestartDecision(
                    False, 0, f"fixed-delay restart strategy exhausted its {s.attempts} attempts"
                )
            self._restarts += 1
            return RestartDecision(
                True, s.delay_ms, f"fixed-delay restart {self._restarts}/{s.attempts}"
            )
        if s.kind is RestartKind.FAILURE_RATE:
            window = [t for t in self._failures if now_ms - t <= s.failure_rate_interval_ms]
            if len(window) > s.max_failures_per_interval:
                return RestartDecision(
                    False,
                    0,
                    f"failure-rate restart strategy: {len(window)} failures within "
                    f"{s.failure_rate_interval_ms} ms (max {s.max_failures_per_interval})",
                )
            return RestartDecision(True, s.delay_ms, "failure-rate restart")
        # exponential-delay
        last = self._last_failure_ms
        self._last_failure_ms = now_ms
        if last is not None and now_ms - last >= s.reset_threshold_ms:
            self._backoff_ms = 0.0
            self._restarts = 0
        if self._restarts >= s.attempts:
            return RestartDecision(
                False, 0, f"exponential-delay restart strategy exhausted its {s.attempts} attempts"
            )
        self._restarts += 1
        if self._backoff_ms <= 0:
            self._backoff_ms = float(s.delay_ms)
        else:
            self._backoff_ms = min(self._backoff_ms * s.multiplier, float(s.max_backoff_ms))
        jitter = self._backoff_ms * s.jitter * (2 * self.rng.random() - 1)
        delay = int(min(max(self._backoff_ms + jitter, 0.0), float(s.max_backoff_ms)))
        return RestartDecision(True, delay, f"exponential-delay restart {self._restarts}")
