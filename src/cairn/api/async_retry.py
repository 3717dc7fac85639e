"""Retry of async I/O: the ``AsyncRetryStrategy`` and ``AsyncRetryPredicate`` interfaces
(``pyflink.datastream.functions``) and the strategies their factories build
(``pyflink.datastream.async_retry_strategies``), in one module so neither imports the other.

Invariant: a strategy is a small picklable value; ``can_retry(n)`` is true while ``n``
(attempts made so far, from 1) is at most ``max_attempts``, so ``max_attempts`` counts the
retries after the first attempt, as in Flink. The exponential strategy's delay is a pure
function of ``n``, so inputs retried concurrently do not disturb each other's delays.

>>> s = FixedDelayRetryStrategy(3, 50, None, lambda e: isinstance(e, TimeoutError))
>>> s.can_retry(3), s.can_retry(4), s.get_retry_predicate().exception_predicate()(TimeoutError())
(True, False, True)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = [
    "NO_RETRY_STRATEGY",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "ExponentialBackoffDelayRetryStrategy",
    "FixedDelayRetryStrategy",
    "NoRetryStrategy",
    "RetryPredicate",
]

ResultPredicate = Callable[[list[Any]], bool] | None
ExceptionPredicate = Callable[[BaseException], bool] | None

OUT = TypeVar("OUT")


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
    (from 1); the factories build the strategies below:

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
        return NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[BaseException], bool] | None = None,
    ) -> AsyncRetryStrategy[Any]:
        """Up to ``max_attempts`` retries, ``backoff_time_millis`` apart."""
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
        return ExponentialBackoffDelayRetryStrategy(
            max_attempts,
            initial_delay,
            max_retry_delay,
            multiplier,
            result_predicate,
            exception_predicate,
        )


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} should be greater than zero, got {value!r}")


class RetryPredicate(AsyncRetryPredicate[Any]):
    """The two predicates of a strategy (either may be ``None``)."""

    def __init__(self, result_predicate: ResultPredicate, exception_predicate: ExceptionPredicate):
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> ResultPredicate:
        return self._result_predicate

    def exception_predicate(self) -> ExceptionPredicate:
        return self._exception_predicate


class NoRetryStrategy(AsyncRetryStrategy[Any]):
    """Never retries (what ``unordered_wait`` and ``ordered_wait`` use)."""

    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate[Any]:
        return RetryPredicate(None, None)


class FixedDelayRetryStrategy(AsyncRetryStrategy[Any]):
    """Up to ``max_attempts`` retries, ``backoff_time_millis`` apart."""

    def __init__(
        self,
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: ResultPredicate,
        exception_predicate: ExceptionPredicate,
    ) -> None:
        _positive("max_attempts", max_attempts)
        _positive("backoff_time_millis", backoff_time_millis)
        self._max_attempts = int(max_attempts)
        self._backoff_time_millis = int(backoff_time_millis)
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self._backoff_time_millis

    def get_retry_predicate(self) -> AsyncRetryPredicate[Any]:
        return self._predicate


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy[Any]):
    """Up to ``max_attempts`` retries; the ``n``-th waits ``initial_delay * multiplier**(n-1)``
    ms, at most ``max_retry_delay``.

    >>> s = ExponentialBackoffDelayRetryStrategy(9, 100, 1000, 3.0, None, None)
    >>> [s.get_backoff_time_millis(n) for n in range(1, 5)]
    [100, 300, 900, 1000]
    """

    def __init__(
        self,
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: ResultPredicate,
        exception_predicate: ExceptionPredicate,
    ) -> None:
        _positive("max_attempts", max_attempts)
        _positive("initial_delay", initial_delay)
        _positive("max_retry_delay", max_retry_delay)
        _positive("multiplier", multiplier)
        self._max_attempts = int(max_attempts)
        self._initial_delay = int(initial_delay)
        self._max_retry_delay = int(max_retry_delay)
        self._multiplier = float(multiplier)
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        delay = float(self._initial_delay)
        for _ in range(max(current_attempts, 1) - 1):
            delay = min(delay * self._multiplier, self._max_retry_delay)
            if delay >= self._max_retry_delay:
                break
        return int(min(delay, self._max_retry_delay))

    def get_retry_predicate(self) -> AsyncRetryPredicate[Any]:
        return self._predicate


NO_RETRY_STRATEGY = NoRetryStrategy()
