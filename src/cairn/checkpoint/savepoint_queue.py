"""Savepoint requests of the checkpoint coordinator: queued, then in flight under their id.

Invariant: requests start in the order they came, one at a time and only when
``protocol.decide_savepoint`` allows it (no unaligned checkpoint or other savepoint pending);
each request's future is resolved exactly once, by the coordinator through :meth:`finish` or
:meth:`fail`, or here by :meth:`fail_queued`. Single-threaded, like the coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from cairn.checkpoint.errors import CheckpointFailedError
from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.checkpoint.protocol import Blocked, decide_savepoint
from cairn.events import CheckpointOptions, SavepointFormatType
from cairn.ids import CheckpointId


@dataclass(frozen=True)
class SavepointRequest:
    target_dir: str
    terminate: bool  # stop-with-savepoint: sinks commit it, the job master then ends sources
    future: Future[CompletedCheckpoint]
    format_type: SavepointFormatType = SavepointFormatType.CANONICAL
    drain: bool = False  # with terminate: sources send the final watermark before the barrier


class SavepointQueue:
    """The coordinator's savepoint requests, queued and in flight."""

    def __init__(self) -> None:
        # Savepoints waiting for an unaligned checkpoint or another savepoint to end.
        self._queued: list[SavepointRequest] = []
        self._in_flight: dict[CheckpointId, SavepointRequest] = {}

    def __bool__(self) -> bool:
        """Whether a savepoint is queued or in flight (periodic checkpoints wait then)."""
        return bool(self._queued or self._in_flight)

    def enqueue(self, request: SavepointRequest) -> None:
        self._queued.append(request)

    def start_next(
        self, pending: Iterable[CheckpointOptions], checkpoint_id: CheckpointId
    ) -> SavepointRequest | None:
        """The oldest queued request, now in flight as ``checkpoint_id``, if
        :func:`decide_savepoint` allows one next to the ``pending`` checkpoints."""
        decision = decide_savepoint(pending)
        if not self._queued or isinstance(decision, Blocked):
            return None
        request = self._queued.pop(0)
        self._in_flight[checkpoint_id] = request
        return request

    def target_dir(self, checkpoint_id: CheckpointId) -> str:
        return self._in_flight[checkpoint_id].target_dir

    def finish(self, checkpoint_id: CheckpointId) -> SavepointRequest:
        """The completed request, no longer in flight (the caller resolves its future)."""
        return self._in_flight.pop(checkpoint_id)

    def fail(self, checkpoint_id: CheckpointId, reason: str, message: str) -> None:
        error = CheckpointFailedError(checkpoint_id, reason, message, "savepoint")
        self._in_flight.pop(checkpoint_id).future.set_exception(error)

    def fail_queued(self, reason: CheckpointFailureReason, message: str) -> None:
        queued, self._queued = self._queued, []
        for request in queued:
            error = CheckpointFailedError(None, reason.value, message, "savepoint")
            request.future.set_exception(error)
