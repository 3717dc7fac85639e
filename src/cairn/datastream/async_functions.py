"""Async I/O's user interfaces at Cairn's path (PyFlink: ``pyflink.datastream.functions``).

Invariant: a re-export only; the definitions live in ``cairn.api.async_functions``, below the
runtime and the state backends, which import them from there.
"""

from cairn.api.async_functions import (
    AsyncFunction,
    AsyncRetryPredicate,
    AsyncRetryStrategy,
    ResultFuture,
)

__all__ = [
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "ResultFuture",
]
