"""The savepoint and stop operations of a job's control endpoint, Flink's asynchronous
operations: ``POST /jobs/<id>/savepoints`` or ``/stop`` answers a trigger id at once, ``GET
/jobs/<id>/savepoints/<trigger id>`` the operation's outcome when it has one.

Invariant: a request's body is read and checked whole before the job is touched (a bad one is
a ``BadRequest``, answered 400, and triggers nothing); every operation gets a new trigger id and
the newest ``MAX_OPERATIONS`` are kept (the oldest forgotten); a stop's outcome is unfetched
until a client has read it done, and a client that read its stop succeed then awaits the job's
end: while either holds, ``Operations.awaited`` asks the endpoint to keep serving (up to its
linger time), since the job's process may exit right after the job ended.

>>> stop_request({"targetDirectory": "/sp/a", "drain": True})
SavepointRequest(target='/sp/a', format_type=<SavepointFormatType.CANONICAL: 'canonical'>,
                 cancel_job=False, drain=True)
>>> stop_request({"drain": "yes"})
Traceback (most recent call last):
cairn.rest.savepoint_operations.BadRequest: drain must be true or false, got 'yes'
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from concurrent.futures import Future
from typing import Any

from aiohttp import web

from cairn.events import SavepointFormatType

__all__ = [
    "MAX_OPERATIONS",
    "BadRequest",
    "Operations",
    "SavepointRequest",
    "read_body",
    "savepoint_request",
    "stop_request",
]

MAX_OPERATIONS = 256  # savepoint/stop requests whose outcome the endpoint remembers


class BadRequest(Exception):
    """A request refused before it touched the job (the message is the 400's)."""


@dataclasses.dataclass(frozen=True)
class SavepointRequest:
    """What a savepoint or stop request asks: its target directory (None: the job's default),
    its format, a cancel after the savepoint (Flink's cancel-with-savepoint), the final
    watermark ahead of a stop's barrier (``drain``)."""

    target: str | None
    format_type: SavepointFormatType
    cancel_job: bool = False
    drain: bool = False


async def read_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object (``{}`` without a body)."""
    if not request.can_read_body:
        return {}
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"request body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def savepoint_request(body: dict[str, Any]) -> SavepointRequest:
    """``POST /jobs/<id>/savepoints``: ``target-directory``, ``formatType``, ``cancel-job``.

    >>> savepoint_request({"formatType": "native", "cancel-job": True}).format_type
    <SavepointFormatType.NATIVE: 'native'>
    """
    return SavepointRequest(
        _target(body, "target-directory"),
        _format_type(body),
        cancel_job=body.get("cancel-job") is True,
    )


def stop_request(body: dict[str, Any]) -> SavepointRequest:
    """``POST /jobs/<id>/stop``: ``targetDirectory``, ``formatType``, ``drain`` (Flink's: the
    final watermark before the barrier)."""
    target, format_type = _target(body, "targetDirectory"), _format_type(body)
    drain = body.get("drain", False)
    if not isinstance(drain, bool):
        raise BadRequest(f"drain must be true or false, got {drain!r}")
    return SavepointRequest(target, format_type, drain=drain)


def _target(body: dict[str, Any], key: str) -> str | None:
    target = body.get(key)
    if target is not None and (not isinstance(target, str) or not target.strip()):
        raise BadRequest(f"{key} must be a non-empty string")
    return target


def _format_type(body: dict[str, Any]) -> SavepointFormatType:
    """Flink's ``formatType``: ``"CANONICAL"`` (the default) or ``"NATIVE"``."""
    value = body.get("formatType", "CANONICAL")
    try:
        return SavepointFormatType[str(value).upper()]
    except KeyError:
        raise BadRequest(f"formatType must be CANONICAL or NATIVE, got {value!r}") from None


class Operations:
    """The operations of one endpoint by trigger id (used on its event loop; ``awaited`` is
    read by the thread that closes it).

    >>> ops, stop = Operations(), Future()
    >>> trigger_id = ops.add(stop, stop=True)
    >>> ops.get(trigger_id) is stop, ops.awaited  # its outcome is not fetched yet
    (True, True)
    >>> stop.set_result("/sp/a/savepoint-1")
    >>> ops.fetched(trigger_id)
    >>> ops.awaited  # its client now awaits the job's end
    True
    >>> ops.end_seen()
    >>> ops.awaited
    False
    """

    def __init__(self, limit: int = MAX_OPERATIONS) -> None:
        self._limit = limit
        self._futures: dict[str, Future[str]] = {}
        # Stops whose outcome no client has fetched yet.
        self._unfetched: set[str] = set()
        # A client saw its stop's savepoint complete and now waits to see the job end.
        self._end_awaited = False

    @property
    def awaited(self) -> bool:
        """Whether a client still waits for a stop's outcome or for the job's end."""
        return bool(self._unfetched) or self._end_awaited

    def add(self, future: Future[str], *, stop: bool = False) -> str:
        """Keep ``future`` under a new trigger id (the oldest are forgotten)."""
        trigger_id = uuid.uuid4().hex
        self._futures[trigger_id] = future
        while len(self._futures) > self._limit:
            self._futures.pop(next(iter(self._futures)))
        if stop:
            self._unfetched.add(trigger_id)
        return trigger_id

    def get(self, trigger_id: str) -> Future[str] | None:
        """The operation ``trigger_id`` (None: unknown or forgotten)."""
        return self._futures.get(trigger_id)

    def fetched(self, trigger_id: str) -> None:
        """A client read the outcome of ``trigger_id``, done: if it is a stop's, its client now
        awaits the job's end, unless the stop failed."""
        if trigger_id in self._unfetched:
            self._unfetched.discard(trigger_id)
            future = self._futures.get(trigger_id)
            self._end_awaited = future is not None and future.exception() is None

    def end_seen(self) -> None:
        """A client read the job's status after it ended."""
        self._end_awaited = False
