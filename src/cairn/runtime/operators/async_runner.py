"""The asyncio side of an async wait operator: one event loop on a thread of its own.

Invariant: the user's ``open``, ``close``, ``async_invoke`` and ``timeout`` run on the loop's
thread only, one at a time (the loop is single-threaded), so a function's attributes need no
lock. Every submitted input ends in exactly one outcome handed to ``deliver`` (on the loop's
thread): its result list, or the error that fails the job; the timeout bounds all attempts of
an input together; ``close`` cancels what is still running and delivers nothing more.

>>> class Double:
...     async def async_invoke(self, value):
...         return [2 * value]
>>> got = []
>>> runner = AsyncRunner(Double(), 1000, None, lambda entry, ok, out: got.append((ok, out)))
>>> runner.start(None)
>>> runner.submit([Entry(21, None)])
>>> runner.wait_for_outcome(5.0)
True
>>> runner.close(); got
[(True, [42])]
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from cairn.runtime.operators.async_queue import Entry

__all__ = ["AsyncRunner", "Deliver"]

# (entry, ok, result list or error): called on the loop's thread.
Deliver = Callable[[Entry, bool, Any], None]

_START_TIMEOUT_S = 60.0
_CLOSE_TIMEOUT_S = 10.0


def _takes_result_future(method: Any) -> bool:
    """The older form ``method(value, result_future)`` (two parameters after ``self``)."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


class _ResultFuture:
    """``ResultFuture`` over an asyncio future; completable from any thread, first call wins."""

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        self._loop = loop
        self._future = future

    def _set(self, ok: bool, value: Any) -> None:
        if self._future.done():
            return
        if ok:
            self._future.set_result(value)
        else:
            self._future.set_exception(value)

    def _call(self, ok: bool, value: Any) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._set(ok, value)
        else:
            self._loop.call_soon_threadsafe(self._set, ok, value)

    def complete(self, result: list[Any]) -> None:
        self._call(True, result)

    def complete_exceptionally(self, error: BaseException) -> None:
        self._call(False, error)


def check_result(result: Any, where: str) -> list[Any]:
    """An ``async_invoke``/``timeout`` result as the list PyFlink requires.

    >>> check_result((1, 2), "x")
    Traceback (most recent call last):
    ...
    TypeError: x: The result of AsyncFunction should be of list type, got tuple: (1, 2)
    """
    if result is None:
        raise TypeError(f"{where}: The result of AsyncFunction cannot be none (return [] for none)")
    if not isinstance(result, list):
        shown = repr(result)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(
            f"{where}: The result of AsyncFunction should be of list type, got "
            f"{type(result).__name__}: {shown}"
        )
    return result


class AsyncRunner:
    """Runs ``function``'s coroutines for submitted entries on a private event loop.

    ``timeout_ms`` 0: no timeout; ``retry``: an ``AsyncRetryStrategy`` or ``None``.
    """

    def __init__(
        self, function: Any, timeout_ms: int, retry: Any, deliver: Deliver, name: str = "async"
    ) -> None:
        self._function = function
        self._timeout_s = timeout_ms / 1000.0 if timeout_ms > 0 else None
        self._deliver = deliver
        self._name = name
        self._old_invoke = _takes_result_future(function.async_invoke)
        timeout = getattr(function, "timeout", None)
        self._old_timeout = timeout is not None and _takes_result_future(timeout)
        predicate = retry.get_retry_predicate() if retry is not None else None
        self._retry = retry
        self._on_result = predicate.result_predicate() if predicate is not None else None
        self._on_error = predicate.exception_predicate() if predicate is not None else None
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.outcome = threading.Event()  # set after every delivered outcome

    # ------------------------------------------------------------------ lifecycle

    def start(self, runtime_context: Any) -> None:
        """Start the loop's thread and run the function's ``open`` there (errors raise here)."""
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"cairn-async {self._name}", daemon=True
        )
        self._thread.start()
        opener = getattr(self._function, "open", None)
        if callable(opener):
            self._call_on_loop(lambda: opener(runtime_context), _START_TIMEOUT_S)

    def close(self) -> None:
        """Cancel what runs, call the function's ``close`` on the loop, stop the thread."""
        if self._thread is None or self._closing:
            return
        self._closing = True

        async def cancel_all() -> None:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result(_CLOSE_TIMEOUT_S)
            closer = getattr(self._function, "close", None)
            if callable(closer):
                self._call_on_loop(closer, _CLOSE_TIMEOUT_S)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_CLOSE_TIMEOUT_S)
            if not self._thread.is_alive():
                self._loop.close()

    def _call_on_loop(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        """``fn()`` on the loop's thread (awaited there if it returns an awaitable: ``open``
        and ``close`` may be ``async def``); its error raises here."""

        async def call() -> Any:
            result = fn()
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout_s)

    # ------------------------------------------------------------------ requests

    def submit(self, entries: list[Entry]) -> None:
        """Start the requests of ``entries`` (records), one wake-up of the loop for all."""
        if entries:
            self._loop.call_soon_threadsafe(self._start_all, entries)

    def wait_for_outcome(self, timeout_s: float) -> bool:
        """Block until an outcome was delivered since the last call (or ``timeout_s``)."""
        got = self.outcome.wait(timeout_s)
        self.outcome.clear()
        return got

    def _start_all(self, entries: list[Entry]) -> None:
        if self._closing:
            return
        for entry in entries:
            task = self._loop.create_task(self._run(entry))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, entry: Entry) -> None:
        attempts = asyncio.ensure_future(self._attempts(entry.value))
        out: Any
        try:
            if self._timeout_s is None:
                result = await attempts
            else:
                done, _ = await asyncio.wait({attempts}, timeout=self._timeout_s)
                if done:
                    result = attempts.result()
                else:
                    attempts.cancel()
                    result = await self._timed_out(entry.value)
            ok, out = True, result
        except asyncio.CancelledError:
            if self._closing:
                return
            raise
        except Exception as e:
            ok, out = False, e
        finally:
            if not attempts.done():
                attempts.cancel()  # cancelled (closing) or timed out: stop the attempts too
        if not self._closing:
            self._deliver(entry, ok, out)
            self.outcome.set()

    async def _invoke(self, value: Any) -> list[Any]:
        function = self._function
        if not self._old_invoke:
            return check_result(await function.async_invoke(value), "async_invoke")
        future: asyncio.Future[Any] = self._loop.create_future()
        await function.async_invoke(value, _ResultFuture(self._loop, future))
        return check_result(await future, "result_future.complete()")

    async def _attempts(self, value: Any) -> list[Any]:
        retry, attempt = self._retry, 1
        while True:
            try:
                result = await self._invoke(value)
            except Exception as e:
                if self._on_error is None or not self._on_error(e) or not retry.can_retry(attempt):
                    raise
            else:
                if self._on_result is None or not self._on_result(result):
                    return result
                if not retry.can_retry(attempt):
                    return result
            await asyncio.sleep(max(retry.get_backoff_time_millis(attempt), 0) / 1000.0)
            attempt += 1

    async def _timed_out(self, value: Any) -> list[Any]:
        timeout = getattr(self._function, "timeout", None)
        if timeout is None:
            raise TimeoutError(f"Async function call has timed out for input: {value}")
        if not self._old_timeout:
            return check_result(timeout(value), "timeout")
        future: asyncio.Future[Any] = self._loop.create_future()
        timeout(value, _ResultFuture(self._loop, future))
        try:  # a timeout() that never completes its future must not hang the input forever
            result = await asyncio.wait_for(future, self._timeout_s)
        except asyncio.TimeoutError:
            raise RuntimeError(
                f"timeout() did not complete its result_future for input {value!r}"
            ) from None
        return check_result(result, "result_future.complete() in timeout")
