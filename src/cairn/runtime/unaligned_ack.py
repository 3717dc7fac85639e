"""The acknowledgement of an unaligned checkpoint: operator state and channel state joined.

Invariant: an unaligned checkpoint of a task is acknowledged exactly once, and only after both
parts are done: the asynchronous snapshot of its operators (snapshot thread) and the channel
state, which is complete only when every input delivered its barrier (task thread) and was
then written (snapshot thread). A failed or cancelled part makes the other one silent.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cairn.checkpoint.handles import InputChannelStateHandle, OperatorSubtaskState
from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskAcknowledgement, TaskKey
from cairn.ids import CheckpointId

_MISSING: Any = object()


class UnalignedAcknowledgement:
    """Collects the two parts of one unaligned checkpoint and sends the acknowledgement.

    >>> sent = []
    >>> ack = UnalignedAcknowledgement(CheckpointId(3), TaskKey(1, 0), "head", sent.append)
    >>> ack.operators_done({}, SubtaskCheckpointMetrics())
    >>> sent
    []
    >>> ack.channels_done(None)
    >>> sent[0].metrics.unaligned
    True
    """

    def __init__(
        self,
        checkpoint_id: CheckpointId,
        task: TaskKey,
        head_uid: Any,
        send: Callable[[TaskAcknowledgement], None],
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self._task = task
        self._head_uid = head_uid
        self._send = send
        self._lock = threading.Lock()
        self._states: Mapping[Any, OperatorSubtaskState] | None = None
        self._metrics: SubtaskCheckpointMetrics | None = None
        self._channels: InputChannelStateHandle | None = _MISSING
        self._closed = False

    def operators_done(
        self, states: Mapping[Any, OperatorSubtaskState], metrics: SubtaskCheckpointMetrics
    ) -> None:
        with self._lock:
            self._states, self._metrics = states, metrics
            self._maybe_send()

    def channels_done(self, handle: InputChannelStateHandle | None) -> None:
        with self._lock:
            self._channels = handle
            self._maybe_send()

    def cancel(self) -> None:
        """The checkpoint failed or was aborted: never acknowledge it."""
        with self._lock:
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def _maybe_send(self) -> None:
        if self._closed or self._states is None or self._channels is _MISSING:
            return
        self._closed = True
        states = dict(self._states)
        handle = self._channels
        persisted = 0
        if handle is not None:
            head = states.get(self._head_uid, OperatorSubtaskState())
            states[self._head_uid] = dataclasses.replace(head, input_channels=handle)
            persisted = handle.size
        assert self._metrics is not None
        metrics = dataclasses.replace(self._metrics, persisted_bytes=persisted, unaligned=True)
        self._send(TaskAcknowledgement(self.checkpoint_id, self._task, states, metrics))


class SliceBudget:
    """How many records the task hands its operators at once, so that it comes back to its
    priority events (unaligned barriers, timeouts) about every ``budget_s`` seconds.

    >>> b = SliceBudget(budget_s=0.005)
    >>> b.learn(records=10, seconds=0.010)  # 1 ms per record
    >>> b.records
    5
    """

    __slots__ = ("_per_record_s", "budget_s", "records")

    def __init__(self, budget_s: float = 0.005, initial: int = 64) -> None:
        self.budget_s = budget_s
        self.records = initial
        self._per_record_s = 0.0

    def learn(self, records: int, seconds: float) -> None:
        if records <= 0:
            return
        per = seconds / records
        prev = self._per_record_s
        self._per_record_s = per if prev == 0.0 else 0.7 * prev + 0.3 * per
        self.records = max(1, min(1 << 20, int(self.budget_s / max(self._per_record_s, 1e-9))))
