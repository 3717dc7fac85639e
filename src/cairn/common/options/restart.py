"""Restart strategy options (``restart-strategy.*``), read by ``common.restart_strategy``.

Invariant: every key here is registered on import; an unset type means exponential-delay
with checkpointing and none without (decided where the strategy is built, not here).
"""

from __future__ import annotations

from cairn.common.options.define import MS, at_least, between, define, spellings

RS = "restart-strategy."

RESTART_TYPE = define(
    RS + "type",
    "enum",
    None,
    "none, fixed-delay, exponential-delay or failure-rate; unset: "
    "exponential-delay with checkpointing, none without.",
    "restart-strategy",
    choices=spellings(
        ("none", "off", "disable"),
        ("fixed-delay", "fixeddelay"),
        ("exponential-delay", "exponentialdelay"),
        ("failure-rate", "failurerate"),
    ),
)
FIXED_DELAY_ATTEMPTS = define(
    RS + "fixed-delay.attempts",
    "int",
    1,
    "Restarts before the job fails.",
    check=at_least(0, "fixed-delay attempts"),
)
FIXED_DELAY_DELAY = define(RS + "fixed-delay.delay", "duration", 1_000, "Delay between restarts.")
EXP_INITIAL_BACKOFF = define(
    RS + "exponential-delay.initial-backoff",
    "duration",
    1_000,
    "First restart delay.",
    check=at_least(1, "initial backoff", MS),
)
EXP_MAX_BACKOFF = define(
    RS + "exponential-delay.max-backoff",
    "duration",
    60_000,
    "Upper bound of the delay.",
    check=at_least(1, "max backoff", MS),
)
EXP_MULTIPLIER = define(
    RS + "exponential-delay.backoff-multiplier",
    "float",
    1.5,
    "Delay growth per failure.",
    check=at_least(1.0, "backoff multiplier"),
)
EXP_RESET_THRESHOLD = define(
    RS + "exponential-delay.reset-backoff-threshold",
    "duration",
    3_600_000,
    "Running this long without failure resets the backoff.",
    check=at_least(1, "reset backoff threshold", MS),
)
EXP_JITTER = define(
    RS + "exponential-delay.jitter-factor",
    "float",
    0.1,
    "Random +/- share of each delay.",
    check=between(0.0, 1.0, "jitter factor"),
)
EXP_ATTEMPTS = define(
    RS + "exponential-delay.attempts-before-reset-backoff",
    "int",
    2**31 - 1,
    "Restarts allowed before the backoff is reset.",
    check=at_least(1, "attempts before reset backoff"),
)
FAILURE_RATE_MAX = define(
    RS + "failure-rate.max-failures-per-interval",
    "int",
    1,
    "Failures within the interval before the job fails.",
    check=at_least(1, "max failures per interval"),
)
FAILURE_RATE_INTERVAL = define(
    RS + "failure-rate.failure-rate-interval",
    "duration",
    60_000,
    "Failure counting window.",
    check=at_least(1, "failure rate interval", MS),
)
FAILURE_RATE_DELAY = define(RS + "failure-rate.delay", "duration", 1_000, "Delay between restarts.")
