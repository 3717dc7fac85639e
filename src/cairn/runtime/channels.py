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
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from cairn.events import CheckpointBarrier, is_priority_event
from cairn.runtime.edge_errors import EdgeLabel, batch_too_large_error, unpicklable_batch_error
from cairn.runtime.network.errors import ConnectionClosed, FrameTooLarge
from cairn.runtime.network.frames import FrameKind, pack_credit, unpack_credit
from cairn.runtime.network.framing import FramedConnection
from cairn.runtime.wakeup import Wakeup
from cairn.settings import DEFAULT_MAX_FRAME_SIZE

log = logging.getLogger(__name__)

_ONE_CREDIT = pack_credit(1)
DEFAULT_CAPACITY = 4  # record batches in flight per channel (Flink: 2 exclusive + floating)


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
        "announced",
        "channel_id",
        "consumed",
        "finished",
        "local_sender",
        "queue",
        "received",
        "signal",
    )

    def __init__(self, channel_id: int) -> None:
        self.channel_id = channel_id
        # Entries: list (record batch), bytes (pickled remote batch), HeldBatch or an event.
        self.queue: deque[Any] = deque()
        self.received = 0
        self.consumed = 0
        # Priority barriers with their positions, oldest first.
        self.announced: deque[tuple[int, CheckpointBarrier]] = deque()
        self.signal = PrioritySignal()
        self.local_sender: LocalOutputChannel | None = None
        self.finished = False
        self._conn: FramedConnection | None = None

    def push(self, entry: Any) -> None:
        """Producer side: append a batch or an in-order event."""
        self.queue.append(entry)
        self.received += 1

    def announce(self, barrier: CheckpointBarrier) -> None:
        """Producer side: a priority barrier arrived behind ``received`` entries."""
        self.announced.append((self.received, barrier))
        self.signal.raised = True

    def attach_remote(self, conn: FramedConnection) -> None:
        self._conn = conn

    def request_buffer_size(self, records: int) -> None:
        """Buffer debloating: ask the sender for buffers of ``records`` records."""
        if self.local_sender is not None:
            self.local_sender.batch_size = records
            return
        conn = self._conn
        if conn is None:
            return
        try:
            conn.send(FrameKind.BUFFER_SIZE, self.channel_id, pack_credit(records))
        except (ConnectionClosed, OSError):
            pass  # the sender is gone; failover handles it

    def consumed_remote_batch(self) -> None:
        """Give the sender one credit back for the batch just taken from the queue."""
        conn = self._conn
        if conn is None:
            return
        try:
            conn.send(FrameKind.CREDIT, self.channel_id, _ONE_CREDIT)
        except (ConnectionClosed, OSError):
            pass  # the sender is gone; failover handles it


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

    def hold(self) -> None:
        """The writer kept a partly filled batch back (``accepts_partial`` was False)."""

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
        "holding",
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
        # The writer holds records back until a credit comes (set by hold(), cleared by the
        # next send): only then must a credit reaching an empty backlog wake the task.
        self.holding = False

    def available(self) -> bool:
        return len(self.backlog) < self.max_backlog

    def accepts_partial(self) -> bool:
        # Without a credit the batch would only wait in the backlog; kept in the writer it
        # grows instead (like a flushed Flink buffer that is still being written), so a
        # congested channel carries more records per credit rather than starving on tiny
        # batches. The sender wakes the task when a credit reaches an empty backlog.
        return self.credits > 0 and not self.backlog

    def hold(self) -> None:
        self.holding = True

    def send_batch(self, batch: list[Any]) -> None:
        self.holding = False
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
    """One thread per outgoing connection: sends frames of its channels as credit allows,
    and reads the credits the receiver announces on the same connection."""

    def __init__(
        self,
        conn: FramedConnection,
        on_progress: Callable[[], None],
        on_error: Callable[[BaseException], None],
        name: str,
    ) -> None:
        self.conn = conn
        self._channels: dict[int, RemoteOutputChannel] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._on_progress = on_progress
        self._on_error = on_error
        self._send_thread = threading.Thread(
            target=self._send_loop, name=f"{name}-send", daemon=True
        )
        self._credit_thread = threading.Thread(
            target=self._credit_loop, name=f"{name}-credits", daemon=True
        )

    def register(self, channel: RemoteOutputChannel) -> None:
        self._channels[channel.channel_id] = channel

    def start(self) -> None:
        self._send_thread.start()
        self._credit_thread.start()

    def enqueue(self, channel: RemoteOutputChannel, kind: int, payload: bytes) -> None:
        with self._cond:
            if kind == _PRIORITY_EVENT:
                channel.priority_pending += 1
            channel.backlog.append((kind, payload))
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.conn.close()

    def _sendable(self) -> tuple[list[tuple[int, int, bytes]], bool]:
        """The frames that may go now, and whether sending them matters to the task thread:
        a full backlog (the writer is backpressured) gets room, or the backlog of a channel
        whose writer holds a partial batch back empties. Other sends wake nobody: at
        moderate rates a wake-up per frame would cost the task thread more than the frame."""
        frames: list[tuple[int, int, bytes]] = []
        wake = False
        for ch in self._channels.values():
            backlog = ch.backlog
            before = len(backlog)
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
                frames.append((kind, ch.channel_id, payload))
            after = len(backlog)
            if after < before and (
                (before >= ch.max_backlog > after) or (ch.holding and not after)
            ):
                wake = True
        return frames, wake

    def _send_loop(self) -> None:
        try:
            while True:
                with self._cond:
                    frames, wake = self._sendable()
                    while not frames and not self._closed:
                        self._cond.wait()
                        frames, wake = self._sendable()
                    if self._closed and not frames:
                        return
                self.conn.send_many(frames)
                if wake:
                    self._on_progress()
        except (ConnectionClosed, OSError, FrameTooLarge) as exc:
            if not self._closed:
                self._on_error(exc)

    def _credit_loop(self) -> None:
        try:
            while True:
                kind, channel, payload = self.conn.recv()
                if kind == FrameKind.BUFFER_SIZE:
                    self._channels[channel].batch_size = max(1, unpack_credit(payload))
                    continue
                if kind != FrameKind.CREDIT:
                    raise ConnectionClosed(f"unexpected frame kind {kind} on a data connection")
                with self._cond:
                    ch = self._channels[channel]
                    ch.credits += unpack_credit(payload)
                    waiting = ch.holding and not ch.backlog
                    if ch.backlog:  # frames waiting for this credit; else nothing to send
                        self._cond.notify()
                if waiting:  # records the writer held back for this credit can go now
                    self._on_progress()
        except (ConnectionClosed, OSError) as exc:
            if not self._closed:
                self._on_error(exc)


def receive_loop(
    conn: FramedConnection,
    channels: dict[int, InputChannel],
    wakeup: Wakeup | threading.Event,
    on_error: Callable[[BaseException], None],
) -> None:
    """Body of the thread reading one incoming data connection into input channel queues."""
    loads = pickle.loads
    try:
        while True:
            kind, channel, payload = conn.recv()
            target = channels[channel]
            if kind == FrameKind.DATA:
                target.queue.append(payload)  # unpickled lazily by the consuming task
                target.received += 1
            elif kind == FrameKind.EVENT:
                event = loads(payload)
                if is_priority_event(event):
                    target.announce(event)
                else:
                    target.push(event)
            else:
                raise ConnectionClosed(f"unexpected frame kind {kind} from a data sender")
            wakeup.set()
    except (ConnectionClosed, OSError) as exc:
        on_error(exc)
