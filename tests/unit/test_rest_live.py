"""The live feed over a real aiohttp server and client (no job): every reader gets the same
updates in order, each update is computed once for all of them, a poke sends one at once,
the stream ends with the final update, and readers over the limit are refused."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from cairn.rest.live import LiveFeed, Update
from cairn.testing.processes import wait_for_async


async def read_stream(session: aiohttp.ClientSession, url: str) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    async with session.get(url) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        name = None
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((str(name), json.loads(line.removeprefix("data: "))))
    return events


def serve(feed_of: Any) -> web.Application:
    async def events(request: web.Request) -> web.StreamResponse:
        return await feed_of().stream(request)

    app = web.Application()
    app.router.add_get("/events", events)
    return app


def test_readers_share_each_update_and_the_stream_ends_with_the_final_one() -> None:
    async def main() -> None:
        count = 0

        def snapshot() -> tuple[Update, bool]:
            nonlocal count
            count += 1
            return [("tick", {"n": count}), ("state", "<b>")], count == 5

        feed = LiveFeed(asyncio.get_running_loop(), snapshot, interval_s=0.05)
        async with TestServer(serve(lambda: feed)) as server, aiohttp.ClientSession() as s:
            url = str(server.make_url("/events"))
            first, second = await asyncio.gather(read_stream(s, url), read_stream(s, url))
        ticks = [data["n"] for name, data in first if name == "tick"]
        assert ticks == sorted(ticks) and ticks[-1] == 5  # in order, to the final one
        assert [e for e in second if e[0] == "tick"][-1] == ("tick", {"n": 5})
        assert ("state", "<b>") in first  # data is JSON, never interpreted
        assert feed.updates == 5 and feed.readers == 0  # once for both readers; all gone

    asyncio.run(main())


def test_a_poke_sends_an_update_before_the_interval() -> None:
    async def main() -> None:
        moments: list[float] = []

        def snapshot() -> tuple[Update, bool]:
            moments.append(time.monotonic())
            return [("tick", len(moments))], len(moments) == 3

        feed = LiveFeed(asyncio.get_running_loop(), snapshot, interval_s=30.0)
        async with TestServer(serve(lambda: feed)) as server, aiohttp.ClientSession() as s:
            reading = asyncio.ensure_future(read_stream(s, str(server.make_url("/events"))))
            await wait_for_async(lambda: moments, 10, 0.01, "the first update")
            for n in (2, 3):  # each poke once the update before it was taken
                feed.poke()  # e.g. a status change, from the job master's thread
                await wait_for_async(lambda n=n: len(moments) >= n, 10, 0.01, f"update {n}")
            events = await asyncio.wait_for(reading, 10)
        assert [data for _, data in events] == [1, 2, 3]
        assert moments[-1] - moments[0] < 5.0  # not 2 x 30 s

    asyncio.run(main())


def test_readers_over_the_limit_are_refused() -> None:
    async def main() -> None:
        final = False

        def snapshot() -> tuple[Update, bool]:
            return [("tick", 1)], final

        feed = LiveFeed(asyncio.get_running_loop(), snapshot, interval_s=0.05, max_readers=1)
        async with TestServer(serve(lambda: feed)) as server, aiohttp.ClientSession() as s:
            url = str(server.make_url("/events"))
            reading = asyncio.ensure_future(read_stream(s, url))
            await wait_for_async(lambda: feed.readers >= 1, 10, 0.01, "the first reader")
            async with s.get(url) as refused:
                assert refused.status == 503
            final = True
            assert (await asyncio.wait_for(reading, 10))[-1] == ("tick", 1)

    asyncio.run(main())


def test_a_stream_ends_after_its_longest_life_and_frees_its_place() -> None:
    async def main() -> None:
        feed = LiveFeed(
            asyncio.get_running_loop(),
            lambda: ([("tick", 1)], False),  # never final
            interval_s=0.05,
            max_readers=1,
            max_stream_s=0.5,
        )
        async with TestServer(serve(lambda: feed)) as server, aiohttp.ClientSession() as s:
            url = str(server.make_url("/events"))
            started = time.monotonic()
            events = await asyncio.wait_for(read_stream(s, url), 10)
            assert 0.4 < time.monotonic() - started < 5 and events
            assert feed.readers == 0
            assert (await asyncio.wait_for(read_stream(s, url), 10))[0] == ("tick", 1)

    asyncio.run(main())
