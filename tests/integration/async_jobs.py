"""A lookup service over real HTTP for the async I/O tests, and the job that calls it.

``LookupServer``: an aiohttp server on 127.0.0.1 (its own thread and event loop in the test
process) answering ``GET /square/<n>`` with ``n*n``; slow for some ``n``, failing (HTTP 503)
on the first request of others, never answering a few; it counts every request per ``n``.
``HttpSquare``: the ``AsyncFunction`` that asks it, with an ``aiohttp`` client session
created in ``open`` (on the operator's event loop) and closed in ``close``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import Counter
from typing import Any

from aiohttp import ClientResponseError, ClientSession, ClientTimeout, web

from cairn.common import Time, Types, WatermarkStrategy
from cairn.datastream import (
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    StreamExecutionEnvironment,
    async_retry_predicates,
)
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from tests.integration.jobs import file_sink

SLOW_EVERY, FAIL_EVERY, HANG = 3, 7, frozenset({101, 601})


class LookupServer:
    """The lookup service; ``with LookupServer() as server: server.url``."""

    def __init__(self) -> None:
        self.requests: Counter[int] = Counter()
        self.failed = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._released = asyncio.Event()  # set when the server stops
        self.url = ""

    async def _square(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        self.requests[n] += 1
        if n in HANG:
            await self._released.wait()  # the caller times out first
        if n % FAIL_EVERY == 0 and self.requests[n] == 1:
            self.failed += 1
            return web.Response(status=503, text="try again")
        if n % SLOW_EVERY == 0:
            await asyncio.sleep(0.05 + (n % 4) * 0.05)
        return web.Response(text=str(n * n))

    async def _start(self) -> str:
        app = web.Application()
        app.router.add_get("/square/{n}", self._square)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    def __enter__(self) -> LookupServer:
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _stop(self) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class HttpSquare(AsyncFunction):
    """``n`` -> ``"n,n*n"`` from the lookup service; ``"n,timeout"`` when it does not answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session: ClientSession | None = None

    def open(self, runtime_context: Any) -> None:
        # Runs on the operator's event loop: the session binds to it.
        self.session = ClientSession(timeout=ClientTimeout(total=30))

    async def close(self) -> None:  # type: ignore[override]
        if self.session is not None:
            await self.session.close()

    async def async_invoke(self, value: int) -> list[str]:
        assert self.session is not None
        async with self.session.get(f"{self.url}/square/{value}") as response:
            response.raise_for_status()  # 503: ClientResponseError, retried
            return [f"{value},{await response.text()}"]

    def timeout(self, value: int) -> list[str]:
        return [f"{value},timeout"]


def expected_lines(records: int) -> list[str]:
    """The golden output of ``lookup_job``, sorted."""
    return sorted(f"{n},timeout" if n in HANG else f"{n},{n * n}" for n in range(records))


def lookup_job(
    env: StreamExecutionEnvironment, url: str, out_dir: str, records: int, rate: float
) -> None:
    """numbers -> unordered_wait_with_retry(HttpSquare, 503 retried) -> exactly-once files."""
    source = DataGeneratorSource(lambda i: i, records, RateLimiterStrategy.per_second(rate))
    numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    retry = AsyncRetryStrategy.fixed_delay(
        3,
        50,
        exception_predicate=functools.partial(
            async_retry_predicates.exception_type_predicate,
            expected_error_type=ClientResponseError,
        ),
    )
    squares = AsyncDataStream.unordered_wait_with_retry(
        numbers, HttpSquare(url), Time.seconds(4), retry, capacity=16, output_type=Types.STRING()
    )
    squares.uid("lookup").sink_to(file_sink(out_dir)).uid("file-sink")
