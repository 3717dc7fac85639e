"""Restart strategies (Flink's ``restart-strategy.*``) as pure decisions.

Invariant: ``RestartPolicy.on_failure(now_ms)`` depends only on the settings and the failure
history it was told about, so every strategy is tested without running a job; ``after_failure``
never tells the strategy of an attempt whose workers found its restored state corrupt.
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


# A worker found the restored checkpoint's state corrupt (it checks every byte it restores):
# restore an older one at once, as if the job master's own check had skipped it before
# deploying. The checkpoint is never offered again, so this happens once per checkpoint.
RESTORE_OLDER = RestartDecision(
    True, 0, "the restored checkpoint is unusable, restoring an older one (not counted)"
)


def after_failure(policy: RestartPolicy, restore_unusable: bool, now_ms: int) -> RestartDecision:
    """What to do after an attempt failed: ``RESTORE_OLDER`` if its workers found the
    restored state corrupt (not a failure for the restart strategy), else ask ``policy``.

    >>> policy = RestartPolicy(RestartSettings(RestartKind.NONE))
    >>> after_failure(policy, True, 0) is RESTORE_OLDER, after_failure(policy, False, 0).restart
    (True, False)
    """
    if restore_unusable:
        return RESTORE_OLDER
    return policy.on_failure(now_ms)
