"""Channels between subtasks: bounded input queues, local and remote output channels.

Invariants:
- Records travel in batches (Python lists); a local channel hands the list over without
  pickling, a remote one pickles the whole batch once.
- A remote channel ships no batch that fails to pickle or pickles to more than the frame cap:
  it raises in the task thread instead, naming the producing operator and the edge
  (``edge_errors``), so the job fails with that message rather than a broken connection.
- A channel never holds more than ``capacity`` record batches that the consumer has not taken
  (credit-based flow control: a remote sender may only send a data batch for which the
  receiver granted a credit; the receiver returns one credit per batch it consumed). Events
  (barriers, end of partition) need no credit and keep their position behind earlier batches.
- A priority barrier (unaligned, or aligned with a timeout) is announced to the consumer the
  moment it reaches the channel, together with its position (the number of entries sent before
  it); every entry before it is already in the queue then (a remote sender ships the data in
  front of a priority barrier without waiting for credit). The consumer either overtakes the
  queued entries (unaligned) or takes the barrier when it reaches that position (aligned).
"""

from __future__ import annotations

import logging
import pickle
from collections import deque
from collections.abc import Callable
from typing import Any

from cairn.events import CheckpointBarrier, is_priority_event
from cairn.runtime.edge_errors import EdgeLabel, batch_too_large_error, unpicklable_batch_error
from cairn.runtime.network.errors import ConnectionClosed
from cairn.runtime.network.frames import FrameKind, pack_credit, unpack_credit
from cairn.runtime.network.loop_connection import Frame, LoopConnection
from cairn.settings import DEFAULT_MAX_FRAME_SIZE

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 4  # record batches in flight per channel (Flink: 2 exclusive + floating)
# Credits go back to a remote sender in pairs: one frame (and one wake-up of the sender) per
# two batches. A sender without credit always has at least capacity - 1 batches queued or
# owed here, so the pair completes as those are taken: no stall.
CREDIT_BATCH = 2


class PrioritySignal:
    """Set by producers when a priority barrier was announced on one of a gate's channels."""

    __slots__ = ("raised",)

    def __init__(self) -> None:
        self.raised = False


class InputChannel:
    """Receiving end of one channel; consumed by exactly one task thread.

    ``received`` (written by the producer) and ``consumed`` (by the consumer) count queue
    entries; an announced barrier's position is ``received`` when it arrived.
    """

    __slots__ = (
        "_conn",
        "_credit_batch",
        "_flush",
        "_owed",
        "announced",
        "channel_id",
        "consumed",
        "finished",
        "local_sender",
        "queue",
        "received",
        "signal",
    )

    def __init__(self, channel_id: int, capacity: int = DEFAULT_CAPACITY) -> None:
        self.channel_id = channel_id
        # Credits go back in pairs, or one by one when the sender has fewer than four.
        self._credit_batch = max(1, min(CREDIT_BATCH, capacity // 2))
        # Entries: list (record batch), bytes (pickled remote batch), HeldBatch or an event.
        self.queue: deque[Any] = deque()
        self.received = 0
        self.consumed = 0
        # Priority barriers with their positions, oldest first.
        self.announced: deque[tuple[int, CheckpointBarrier]] = deque()
        self.signal = PrioritySignal()
        self.local_sender: LocalOutputChannel | None = None
        self.finished = False
        self._conn: LoopConnection | None = None
        self._flush: Callable[[LoopConnection], None] | None = None
        self._owed = 0  # credits for batches taken, not yet sent back

    def push(self, entry: Any) -> None:
        """Producer side: append a batch or an in-order event."""
        self.queue.append(entry)
        self.received += 1

    def announce(self, barrier: CheckpointBarrier) -> None:
        """Producer side: a priority barrier arrived behind ``received`` entries."""
        self.announced.append((self.received, barrier))
        self.signal.raised = True

    def attach_remote(self, conn: LoopConnection, flush: Callable[[LoopConnection], None]) -> None:
        """The connection the channel's batches arrive on; ``flush`` writes what was queued
        on it (the worker's event loop's)."""
        self._conn, self._flush = conn, flush

    def request_buffer_size(self, records: int) -> None:
        """Buffer debloating: ask the sender for buffers of ``records`` records."""
        if self.local_sender is not None:
            self.local_sender.batch_size = records
            return
        self._send(FrameKind.BUFFER_SIZE, records)

    def consumed_remote_batch(self) -> None:
        """Count a credit for the batch just taken; send them back in pairs."""
        self._owed += 1
        if self._owed >= self._credit_batch:
            owed, self._owed = self._owed, 0
            self._send(FrameKind.CREDIT, owed)

    def _send(self, kind: FrameKind, count: int) -> None:
        conn, flush = self._conn, self._flush
        if conn is None or flush is None or conn.closed:
            return  # the sender is gone; failover handles it
        conn.queue(kind, self.channel_id, pack_credit(count))
        flush(conn)


class OutputChannel:
    """Sending end of one channel; ``batch_size`` is the records per buffer the record writer
    flushes at (the receiver may change it: buffer debloating); ``bytes_out`` counts the
    pickled bytes of the batches it sent (a local channel pickles nothing: always 0)."""

    channel_id: int
    batch_size: int = 1024
    bytes_out: int = 0

    def available(self) -> bool:
        raise NotImplementedError

    def accepts_partial(self) -> bool:
        """Whether a partly filled batch (buffer timeout, idle flush) can go out now."""
        return True

    def send_batch(self, batch: list[Any]) -> None:
        raise NotImplementedError

    def send_event(self, event: Any) -> None:
        raise NotImplementedError


class LocalOutputChannel(OutputChannel):
    __slots__ = ("batch_size", "capacity", "channel_id", "target")

    def __init__(self, target: InputChannel, capacity: int = DEFAULT_CAPACITY) -> None:
        self.channel_id = target.channel_id
        self.target = target
        self.capacity = capacity
        self.batch_size = OutputChannel.batch_size
        target.local_sender = self

    def available(self) -> bool:
        return len(self.target.queue) < self.capacity

    def send_batch(self, batch: list[Any]) -> None:
        target = self.target
        target.queue.append(batch)
        target.received += 1

    def send_event(self, event: Any) -> None:
        if is_priority_event(event):
            self.target.announce(event)
        else:
            self.target.push(event)


class RemoteOutputChannel(OutputChannel):
    """Queues pickled frames for a ``ConnectionSender``; never blocks the task thread.

    ``edge`` names the producer and the edge in errors; ``max_frame_size`` is the largest
    pickled batch it ships (the receiver refuses longer frames)."""

    __slots__ = (
        "backlog",
        "batch_size",
        "bytes_out",
        "channel_id",
        "credits",
        "edge",
        "max_backlog",
        "max_frame_size",
        "priority_pending",
        "sender",
    )

    def __init__(
        self,
        channel_id: int,
        sender: ConnectionSender,
        initial_credits: int,
        max_backlog: int = 2,
        *,
        edge: EdgeLabel | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.channel_id = channel_id
        self.edge = edge
        self.max_frame_size = max_frame_size
        self.sender = sender
        self.credits = initial_credits
        self.backlog: deque[tuple[int, bytes]] = deque()
        self.max_backlog = max_backlog
        # Priority barriers in the backlog: the data in front of them goes without credit.
        self.priority_pending = 0
        self.batch_size = OutputChannel.batch_size
        self.bytes_out = 0  # Flink's numBytesOut: counted once per pickled batch

    def available(self) -> bool:
        return len(self.backlog) < self.max_backlog

    def accepts_partial(self) -> bool:
        # Without a credit the batch would only wait in the backlog; kept in the writer it
        # grows instead (like a flushed Flink buffer that is still being written), so a
        # congested channel carries more records per credit rather than starving on tiny
        # batches. A credit arrives on the task thread's event loop, whose turn makes the
        # worker look at its partly filled batches again.
        return self.credits > 0 and not self.backlog

    def send_batch(self, batch: list[Any]) -> None:
        try:
            payload = pickle.dumps(batch, protocol=5)
        except Exception as exc:
            raise unpicklable_batch_error(batch, self.edge, exc) from exc
        if len(payload) > self.max_frame_size:
            raise batch_too_large_error(len(payload), len(batch), self.max_frame_size, self.edge)
        self.bytes_out += len(payload)
        self.sender.enqueue(self, FrameKind.DATA, payload)

    def send_event(self, event: Any) -> None:
        kind = _PRIORITY_EVENT if is_priority_event(event) else FrameKind.EVENT
        self.sender.enqueue(self, kind, pickle.dumps(event, protocol=5))


# Backlog marker of a priority barrier frame (sent as a plain EVENT frame).
_PRIORITY_EVENT = -int(FrameKind.EVENT)


class ConnectionSender:
    """The frames of one outgoing connection's channels, sent as credit allows; takes the
    credits and buffer sizes the receiver sends back on the same connection.

    Runs on the worker's task thread: the record writers call ``enqueue``, the worker's
    event loop hands the receiver's frames to ``on_frames``, and ``flush`` (the loop's)
    writes what was queued on the connection, the rest as the socket drains."""

    def __init__(
        self, conn: LoopConnection, flush: Callable[[LoopConnection], None], name: str
    ) -> None:
        self.conn = conn
        self.name = name
        self._flush = flush
        self._channels: dict[int, RemoteOutputChannel] = {}

    def register(self, channel: RemoteOutputChannel) -> None:
        self._channels[channel.channel_id] = channel

    def enqueue(self, channel: RemoteOutputChannel, kind: int, payload: bytes) -> None:
        if kind == _PRIORITY_EVENT:
            channel.priority_pending += 1
        channel.backlog.append((kind, payload))
        if self._pump(channel):
            self._flush(self.conn)

    def _pump(self, ch: RemoteOutputChannel) -> bool:
        """Move ``ch``'s sendable frames to the connection; True if any moved."""
        backlog, queue, moved = ch.backlog, self.conn.queue, False
        while backlog:
            kind, payload = backlog[0]
            if kind == FrameKind.DATA:
                if ch.credits <= 0 and not ch.priority_pending:
                    break
                ch.credits -= 1  # may go negative: data in front of a priority barrier
            elif kind == _PRIORITY_EVENT:
                ch.priority_pending -= 1
                kind = FrameKind.EVENT
            backlog.popleft()
            queue(kind, ch.channel_id, payload)
            moved = True
        return moved

    def on_frames(self, frames: list[Frame]) -> None:
        """The receiver's credits and buffer sizes (on the event loop's turn)."""
        moved = False
        for kind, channel, payload in frames:
            ch = self._channels.get(channel)
            if ch is None:
                raise ConnectionClosed(f"{self.name}: a frame for unknown channel {channel}")
            if kind == FrameKind.BUFFER_SIZE:
                ch.batch_size = max(1, unpack_credit(payload))
            elif kind == FrameKind.CREDIT:
                ch.credits += unpack_credit(payload)
                if ch.backlog and self._pump(ch):
                    moved = True
            else:
                raise ConnectionClosed(f"unexpected frame kind {kind} on a data connection")
        if moved:
            self._flush(self.conn)

    def close(self) -> None:
        self.conn.close()


def frame_receiver(channels: dict[int, InputChannel]) -> Callable[[list[Frame]], None]:
    """The handler of one incoming data connection's frames: each into its input channel
    (record batches stay pickled: the consuming task unpickles them)."""
    loads = pickle.loads

    def deliver(frames: list[Frame]) -> None:
        for kind, channel, payload in frames:
            target = channels.get(channel)
            if target is None:
                raise ConnectionClosed(f"a frame for unknown channel {channel}")
            if kind == FrameKind.DATA:
                target.queue.append(payload)
                target.received += 1
            elif kind == FrameKind.EVENT:
                event = loads(payload)
                if is_priority_event(event):
                    target.announce(event)
                else:
                    target.push(event)
            else:
                raise ConnectionClosed(f"unexpected frame kind {kind} from a data sender")

    return deliver
