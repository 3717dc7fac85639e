"""A framed connection owned by one event loop: reads that never block and return whole
frames, writes that never block and keep what the socket did not take yet.

Invariants: one thread (the loop's owner) reads, queues and flushes; frames leave whole and
in the order they were queued; a peer's header announcing more than ``max_frame_size``
closes the connection before any memory is allocated for its payload, and below the cap a
payload's buffer grows with the bytes received, never ahead of them (as ``framing``'s
blocking reader); bytes the blocking handshake had already read past the HELLO frame are
parsed first, so nothing is lost between the handshake and the loop. With TLS, everything the
session decrypted is taken at each read (plaintext never waits inside the session for a
socket event that will not come) and frames are encrypted at flush, in queue order.

Example:
    >>> import socket
    >>> from cairn.runtime.network.framing import FramedConnection
    >>> a, b = map(FramedConnection, socket.socketpair())
    >>> left, right = LoopConnection.adopt(a), LoopConnection.adopt(b)
    >>> left.queue(1, 7, b"batch"); left.queue(2, 7, b"barrier")
    >>> left.flush()
    True
    >>> right.read_frames()
    [(1, 7, b'batch'), (2, 7, b'barrier')]
    >>> left.close(); right.close()
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque

from cairn.runtime.network.errors import ConnectionClosed, FrameTooLarge
from cairn.runtime.network.framing import (
    DEFAULT_RECV_BUFFER,
    HEADER,
    FramedConnection,
    Payload,
    refused_frame,
)
from cairn.runtime.network.tls import TlsChannel
from cairn.settings import MAX_FRAME_SIZE_KEY

__all__ = ["Frame", "LoopConnection"]


Frame = tuple[int, int, bytes]
"""``(kind, channel, payload)``"""

_MAX_READS = 8  # per read_frames call on a plain socket (level-triggered: the loop returns)
_IOV_MAX = 512


class _LargeFrame:
    """A frame longer than the read buffer, collected as its bytes arrive."""

    __slots__ = ("channel", "kind", "length", "payload")

    def __init__(self, kind: int, channel: int, length: int, first: memoryview) -> None:
        self.kind, self.channel, self.length = kind, channel, length
        self.payload = bytearray(first)


class LoopConnection:
    """A non-blocking framed connection (see the module's invariants)."""

    __slots__ = (
        "_buffer",
        "_closed",
        "_end",
        "_large",
        "_max_frame_size",
        "_out",
        "_plain",
        "_sock",
        "_start",
        "_tls",
        "_view",
        "name",
        "peer_address",
    )

    def __init__(
        self,
        sock: socket.socket | TlsChannel,
        leftover: bytes = b"",
        *,
        max_frame_size: int,
        peer_address: tuple[object, ...] = (),
        recv_buffer_size: int = DEFAULT_RECV_BUFFER,
    ) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._tls = sock if isinstance(sock, TlsChannel) else None
        self._max_frame_size = max_frame_size
        self.peer_address = peer_address
        self.name = _fmt_peer(peer_address)
        self._buffer = bytearray(max(recv_buffer_size, len(leftover), HEADER.size))
        self._view = memoryview(self._buffer)
        self._buffer[: len(leftover)] = leftover
        self._start, self._end = 0, len(leftover)
        self._large: _LargeFrame | None = None
        self._out: deque[memoryview] = deque()  # bytes for the socket (encrypted with TLS)
        self._plain: list[Payload] = []  # with TLS: queued plaintext, encrypted at flush
        self._closed = False

    @classmethod
    def adopt(cls, conn: FramedConnection) -> LoopConnection:
        """Take over ``conn``'s socket (and the bytes it read ahead); ``conn`` is closed."""
        peer, cap = conn.peer_address, conn.max_frame_size
        sock, leftover = conn.detach()
        return cls(sock, leftover, max_frame_size=cap, peer_address=peer)

    @property
    def closed(self) -> bool:
        return self._closed

    def fileno(self) -> int:
        return self._sock.fileno()

    # -- reading ---------------------------------------------------------------------------

    def read_frames(self) -> list[Frame]:
        """The frames completed by what the socket holds now (maybe none).

        Raises ``ConnectionClosed`` when the peer closed or the connection broke,
        ``FrameRefused`` (closing the connection) for a header over ``max_frame_size``.
        """
        frames: list[Frame] = []
        tls = self._tls
        for _ in range(_MAX_READS if tls is None else 1 << 30):
            if self._end == len(self._buffer):
                self._compact()
            try:
                if tls is None:
                    count = self._sock.recv_into(self._view[self._end :])
                else:
                    chunk = tls.recv_available(len(self._buffer) - self._end)
                    count = len(chunk)
                    self._buffer[self._end : self._end + count] = chunk
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                raise ConnectionClosed(f"receive failed: {exc}") from exc
            if count == 0:
                mid = " mid-frame" if self._end > self._start or self._large else ""
                raise ConnectionClosed(f"peer closed the connection{mid}")
            self._end += count
            self._parse(frames)
            if tls is None and self._end < len(self._buffer):
                break  # the socket had less than the buffer's room: it is drained
        if tls is not None:
            answer = tls.take_output()
            if answer:
                self._out.append(memoryview(answer))
        return frames

    def buffered_frames(self) -> list[Frame]:
        """The whole frames among the bytes read ahead before adoption (the socket may never
        signal them: they left it already)."""
        frames: list[Frame] = []
        self._parse(frames)
        return frames

    def _parse(self, frames: list[Frame]) -> None:
        view, size = self._view, HEADER.size
        while True:
            large = self._large
            if large is not None:
                take = min(large.length - len(large.payload), self._end - self._start)
                large.payload += view[self._start : self._start + take]
                self._start += take
                if len(large.payload) < large.length:
                    break
                frames.append((large.kind, large.channel, bytes(large.payload)))
                self._large = None
                continue
            available = self._end - self._start
            if available < size:
                break
            kind, channel, length = HEADER.unpack_from(self._buffer, self._start)
            if length > self._max_frame_size:
                self._refuse(length)
            if available - size >= length:
                start = self._start + size
                frames.append((kind, channel, bytes(view[start : start + length])))
                self._start = start + length
                continue
            if size + length > len(self._buffer):  # longer than the buffer: collect it
                self._start += size
                self._large = _LargeFrame(kind, channel, length, view[self._start : self._end])
                self._start = self._end
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _compact(self) -> None:
        """Move the unread bytes (part of one frame) to the buffer's front."""
        rest = bytes(self._view[self._start : self._end])
        self._buffer[: len(rest)] = rest
        self._start, self._end = 0, len(rest)

    def _refuse(self, length: int) -> None:
        self.close()
        raise refused_frame(self.peer_address, length, self._max_frame_size)

    # -- writing ---------------------------------------------------------------------------

    def queue(self, kind: int, channel: int, payload: Payload = b"") -> None:
        """Queue one frame (sent by the next ``flush``); ``FrameTooLarge`` over the cap.
        Dropped once the connection is closed (its peer is gone: failover handles it)."""
        if self._closed:
            return
        if isinstance(payload, memoryview) and (payload.ndim != 1 or payload.itemsize != 1):
            payload = payload.cast("B")
        length = len(payload)
        if length > self._max_frame_size:
            raise FrameTooLarge(
                f"frame of {length:,} bytes exceeds the connection's cap of "
                f"{self._max_frame_size:,} bytes ({MAX_FRAME_SIZE_KEY})"
            )
        header = HEADER.pack(kind, channel, length)
        if self._tls is not None:
            self._plain.append(header)
            if length:
                self._plain.append(payload)
            return
        out = self._out
        out.append(memoryview(header))
        if length:
            out.append(memoryview(payload))

    @property
    def has_output(self) -> bool:
        return bool(self._out or self._plain)

    def flush(self) -> bool:
        """Write what the socket takes now; True when nothing is left queued.

        Raises ``ConnectionClosed`` when the connection broke.
        """
        if self._plain:
            tls = self._tls
            assert tls is not None
            encrypted = tls.encrypt(self._plain)
            self._plain = []
            if encrypted:
                self._out.append(memoryview(encrypted))
        out = self._out
        raw = self._tls.raw if self._tls is not None else self._sock
        assert isinstance(raw, socket.socket)
        while out:
            try:
                sent = raw.sendmsg(_head(out))
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as exc:
                raise ConnectionClosed(f"send failed: {exc}") from exc
            while sent:
                first = out[0]
                if sent >= len(first):
                    sent -= len(first)
                    out.popleft()
                else:
                    out[0] = first[sent:]
                    sent = 0
        return True

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the socket (idempotent; queued output is dropped)."""
        if self._closed:
            return
        self._closed = True
        self._out.clear()
        self._plain = []
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def __repr__(self) -> str:
        return f"<LoopConnection peer={self.name} {'closed' if self._closed else 'open'}>"


def _head(out: deque[memoryview]) -> list[memoryview]:
    if len(out) <= _IOV_MAX:
        return list(out)
    return [out[i] for i in range(_IOV_MAX)]


def _fmt_peer(peer: tuple[object, ...]) -> str:
    return f"{peer[0]}:{peer[1]}" if len(peer) >= 2 else "(unknown address)"
