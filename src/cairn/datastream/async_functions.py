"""Async I/O's user interfaces with PyFlink's names: ``AsyncFunction``, ``ResultFuture``,
``AsyncRetryStrategy`` and ``AsyncRetryPredicate`` (``pyflink.datastream.functions``).

Invariant: interfaces only. The runtime (``cairn.runtime.operators.async_wait``) calls
``open``/``close`` and every coroutine of one subtask on that subtask's own asyncio event loop
thread, never two at once, so a function's attributes need no lock; each input gets one
result list (emitted with the input's timestamp), a ``timeout`` result, or fails the job.

An ``AsyncFunction`` has one of PyFlink's two forms:

>>> import asyncio
>>> class Lookup(AsyncFunction):            # returns the results (PyFlink 2.x)
...     async def async_invoke(self, value):
...         await asyncio.sleep(0)
...         return [value * 10]
...     def timeout(self, value):
...         return [-1]
>>> class OldLookup(AsyncFunction):         # completes a ResultFuture (PyFlink 1.x/2.0)
...     async def async_invoke(self, value, result_future):
...         result_future.complete([value * 10])
...     def timeout(self, value, result_future):
...         result_future.complete([-1])
>>> asyncio.run(Lookup().async_invoke(4))
[40]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from cairn.datastream.runtime_context import Function

__all__ = ["AsyncFunction", "AsyncRetryPredicate", "AsyncRetryStrategy", "ResultFuture"]

IN = TypeVar("IN")
OUT = TypeVar("OUT")


class ResultFuture(Generic[OUT]):
    """Where the older form of ``async_invoke(value, result_future)`` puts its outcome.

    ``complete`` and ``complete_exceptionally`` may be called from any thread (a callback of
    a thread pool, say); only the first call counts, as in Flink.
    """

    def complete(self, result: list[OUT]) -> None:
        """The results of this input (a list; ``[]`` for none)."""
        raise NotImplementedError

    def complete_exceptionally(self, error: BaseException) -> None:
        """This input failed with ``error`` (the job fails, unless a retry strategy retries)."""
        raise NotImplementedError


class AsyncFunction(Function, Generic[IN, OUT]):
    """A function whose ``async def async_invoke`` runs on an asyncio event loop, many inputs
    at once (at most the ``capacity`` given to ``AsyncDataStream``).

    ``async_invoke(value)`` returns the list of results; the older form
    ``async_invoke(value, result_future)`` completes ``result_future`` instead. ``timeout`` is
    called when an input's results are not there within the timeout: it returns results
    (or completes ``result_future``), or raises to fail the job (the default). ``open`` and
    ``close`` run on the same event loop (make loop-bound clients there) and may be
    ``async def``.
    """

    @abstractmethod
    async def async_invoke(self, value: IN) -> list[OUT]:
        """The results of ``value`` (a list: an input may give none or several)."""

    def timeout(self, value: IN) -> list[OUT]:
        """The results of an input that timed out; by default the job fails."""
        raise TimeoutError(f"Async function call has timed out for input: {value}")


class AsyncRetryPredicate(ABC, Generic[OUT]):
    """When to retry: on a result (``result_predicate``) or an error (``exception_predicate``);
    either may be ``None`` (never on that)."""

    @abstractmethod
    def result_predicate(self) -> Callable[[list[OUT]], bool] | None: ...

    @abstractmethod
    def exception_predicate(self) -> Callable[[BaseException], bool] | None: ...


class AsyncRetryStrategy(ABC, Generic[OUT]):
    """How often and how late an input is invoked again (Flink's ``AsyncRetryStrategy``).

    ``can_retry(n)`` and ``get_backoff_time_millis(n)`` are asked after the ``n``-th attempt
    (from 1); the factories build ``async_retry_strategies``' classes:

    >>> s = AsyncRetryStrategy.fixed_delay(2, 100, exception_predicate=lambda e: True)
    >>> s.can_retry(2), s.can_retry(3), s.get_backoff_time_millis(1)
    (True, False, 100)
    >>> e = AsyncRetryStrategy.exponential_backoff(5, 10, 35, 2.0, lambda r: not r)
    >>> [e.get_backoff_time_millis(n) for n in (1, 2, 3, 4)]
    [10, 20, 35, 35]
    """

    @abstractmethod
    def can_retry(self, current_attempts: int) -> bool: ...

    @abstractmethod
    def get_backoff_time_millis(self, current_attempts: int) -> int: ...

    @abstractmethod
    def get_retry_predicate(self) -> AsyncRetryPredicate[OUT]: ...

    @staticmethod
    def no_restart() -> AsyncRetryStrategy[Any]:
        """Never retry."""
        from cairn.datastream.async_retry_strategies import NO_RETRY_STRATEGY

        return NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[BaseException], bool] | None = None,
    ) -> AsyncRetryStrategy[Any]:
        """Up to ``max_attempts`` retries, ``backoff_time_millis`` apart."""
        from cairn.datastream.async_retry_strategies import FixedDelayRetryStrategy

        return FixedDelayRetryStrategy(
            max_attempts, backoff_time_millis, result_predicate, exception_predicate
        )

    @staticmethod
    def exponential_backoff(
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[BaseException], bool] | None = None,
    ) -> AsyncRetryStrategy[Any]:
        """Up to ``max_attempts`` retries, the delay from ``initial_delay`` ms multiplied by
        ``multiplier`` each time, at most ``max_retry_delay`` ms."""
        from cairn.datastream.async_retry_strategies import ExponentialBackoffDelayRetryStrategy

        return ExponentialBackoffDelayRetryStrategy(
            max_attempts,
            initial_delay,
            max_retry_delay,
            multiplier,
            result_predicate,
            exception_predicate,
        )
