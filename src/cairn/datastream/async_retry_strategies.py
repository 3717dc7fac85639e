"""Retry strategies of async I/O at PyFlink's path
(``pyflink.datastream.async_retry_strategies``).

Invariant: a re-export only; the definitions live in ``cairn.api.async_retry``, below the
runtime and the state backends, which import them from there.
"""

from cairn.api.async_retry import (
    NO_RETRY_STRATEGY,
    ExponentialBackoffDelayRetryStrategy,
    FixedDelayRetryStrategy,
    NoRetryStrategy,
    RetryPredicate,
)

__all__ = [
    "NO_RETRY_STRATEGY",
    "ExponentialBackoffDelayRetryStrategy",
    "FixedDelayRetryStrategy",
    "NoRetryStrategy",
    "RetryPredicate",
]
