"""Live updates of one job as server-sent events (``text/event-stream``): the web UI reads
one stream instead of polling a dozen REST paths.

Invariant: one producer per endpoint computes each update once, whatever the number of
readers, and only while someone reads (a job nobody watches costs nothing); it runs on the
endpoint's event loop, like every other view. A reader gets every update in order, or is
disconnected when it falls ``QUEUE_UPDATES`` behind (nothing buffers without bound); at most
``MAX_READERS`` streams are open at once, and none for more than ``MAX_STREAM_S`` (a client
that stopped reading, e.g. a frozen page, would otherwise hold its place for as long as the
socket buffers absorb updates; the page opens a new stream). The stream ends after the
update that shows the job in a globally terminal state.

Each update is a few named events, each one JSON object on one ``data:`` line::

    event: job            (GET /jobs/:jobid, with the vertices' metrics and the plan)
    event: checkpoints    (GET /jobs/:jobid/checkpoints, null with checkpointing disabled)
    event: backpressure   ({vertex id: GET /jobs/:jobid/vertices/:id/backpressure})
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

__all__ = ["CONTENT_TYPE", "LiveFeed", "frame"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/event-stream"
INTERVAL_S = 1.0  # the workers report their metrics once a second
QUEUE_UPDATES = 8
MAX_READERS = 16
MAX_STREAM_S = 600.0

Update = Sequence[tuple[str, Any]]  # (event name, JSON-able data), in order


def frame(event: str, data: Any) -> bytes:
    """One server-sent event: its name and its data as one line of JSON.

    >>> frame("job", {"state": "RUNNING"})
    b'event: job\\ndata: {"state": "RUNNING"}\\n\\n'
    """
    return f"event: {event}\ndata: {json.dumps(data, separators=(', ', ': '))}\n\n".encode()


class LiveFeed:
    """Serves ``snapshot()`` (the events of one update; ``final`` is True once the job ended)
    to every open stream, every ``interval_s`` and at once after :meth:`poke`.

    Use from the endpoint's event loop (``stream`` is an aiohttp handler); :meth:`poke` is
    safe from any thread (the job master calls it on status changes and checkpoints).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        snapshot: Callable[[], tuple[Update, bool]],
        interval_s: float = INTERVAL_S,
        max_readers: int = MAX_READERS,
        max_stream_s: float = MAX_STREAM_S,
    ) -> None:
        self._loop = loop
        self._snapshot = snapshot
        self._interval_s = interval_s
        self._max_readers = max_readers
        self._max_stream_s = max_stream_s
        self._readers: set[asyncio.Queue[bytes | None]] = set()
        self._wake: asyncio.Event | None = None
        self._producer: asyncio.Task[None] | None = None
        self.updates = 0  # updates computed (what the readers cost the job)

    @property
    def readers(self) -> int:
        return len(self._readers)

    def poke(self) -> None:
        """Send an update now (from any thread) if anyone reads."""
        if self._readers:
            self._loop.call_soon_threadsafe(self._poke_here)

    def _poke_here(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def close(self) -> None:
        """End every stream (on the loop's thread)."""
        for queue in list(self._readers):
            _offer(queue, None)
        self._readers.clear()

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """The handler: ``200 text/event-stream`` until the job ended or the client left."""
        if len(self._readers) >= self._max_readers:
            raise web.HTTPServiceUnavailable(
                reason=f"{self._max_readers} live streams are open already; poll the REST API"
            )
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_UPDATES)
        response = web.StreamResponse(
            headers={
                "Content-Type": CONTENT_TYPE,
                "Cache-Control": "no-cache",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await response.prepare(request)
        self._readers.add(queue)
        if self._producer is None or self._producer.done():
            self._producer = asyncio.ensure_future(self._produce())
        else:
            self._poke_here()  # the newcomer gets the current state at once
        until = asyncio.get_running_loop().time() + self._max_stream_s
        try:
            while True:
                left = until - asyncio.get_running_loop().time()
                chunk = await asyncio.wait_for(queue.get(), left) if left > 0 else None
                if chunk is None:
                    break
                await response.write(chunk)
        except (ConnectionResetError, asyncio.TimeoutError):
            pass  # the client left, or had the stream long enough: nothing more to send
        finally:
            self._readers.discard(queue)
        return response

    async def _produce(self) -> None:
        self._wake = asyncio.Event()
        try:
            while self._readers:
                self._wake.clear()
                events, final = self._snapshot()
                self.updates += 1
                chunk = b"".join(frame(name, data) for name, data in events)
                for queue in list(self._readers):
                    if not _offer(queue, chunk):
                        log.info("a live stream fell %d updates behind: closed", QUEUE_UPDATES)
                        self._readers.discard(queue)
                        _drop_and_end(queue)
                if final:
                    self.close()
                    return
                try:
                    await asyncio.wait_for(self._wake.wait(), self._interval_s)
                except asyncio.TimeoutError:
                    pass
        except Exception:  # a view failed: end the streams rather than hang them
            log.exception("live updates failed")
            self.close()


def _offer(queue: asyncio.Queue[bytes | None], item: bytes | None) -> bool:
    try:
        queue.put_nowait(item)
        return True
    except asyncio.QueueFull:
        if item is None:
            _drop_and_end(queue)
        return False


def _drop_and_end(queue: asyncio.Queue[bytes | None]) -> None:
    """Empty a lagging reader's queue and tell it to end."""
    while not queue.empty():
        queue.get_nowait()
    queue.put_nowait(None)
