"""Async I/O's user interfaces with PyFlink's names: ``AsyncFunction``, ``ResultFuture``, and
``AsyncRetryStrategy`` and ``AsyncRetryPredicate`` from ``cairn.api.async_retry``
(``pyflink.datastream.functions``).

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

from abc import abstractmethod
from typing import Generic, TypeVar

from cairn.api.async_retry import AsyncRetryPredicate, AsyncRetryStrategy
from cairn.api.runtime_context import Function

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
