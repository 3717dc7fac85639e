"""Length-prefixed frames over an already authenticated TCP socket (or TLS stream).

Invariant: every frame is written by one ``sendmsg``/``sendall`` sequence under the send
lock, so frames of concurrent senders never interleave; the single reader sees frames
whole and in the order they were sent. Wrap a socket only after ``auth`` succeeded on it.
No frame longer than ``max_frame_size`` is sent, and a peer's header announcing one closes
the connection before any memory is allocated for its payload; below the cap, a payload's
buffer grows with the bytes received, never ahead of them (even authenticated peers must not
make this process allocate what its header claims).

Frame = header ``!BiI`` (kind uint8, channel int32, payload length uint32) + payload.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import struct
import threading
from collections.abc import Iterable
from typing import Any

from cairn.runtime.network.errors import ConnectionClosed, FrameRefused, FrameTooLarge
from cairn.runtime.network.liveness import detect_dead_peer
from cairn.runtime.network.tls import TlsChannel
from cairn.settings import DEFAULT_MAX_FRAME_SIZE, MAX_FRAME_SIZE_KEY

logger = logging.getLogger(__name__)

Payload = bytes | bytearray | memoryview
"""Anything exposing contiguous bytes; sent without copying."""

HEADER = struct.Struct("!BiI")
MAX_PAYLOAD = 0xFFFFFFFF
DEFAULT_RECV_BUFFER = 256 * 1024
PICKLE_PROTOCOL = 5

_HAS_SENDMSG = hasattr(socket.socket, "sendmsg")
try:
    _IOV_MAX = max(16, min(os.sysconf("SC_IOV_MAX"), 1024))
except (AttributeError, ValueError, OSError):
    _IOV_MAX = 16


class FramedConnection:
    """A bidirectional stream of ``(kind, channel, payload)`` frames over one socket.

    Any number of threads may send; exactly one thread may receive. ``close()`` may be
    called from any thread, and wakes a reader blocked in ``recv()``. ``max_frame_size``
    (bytes, both directions) may be changed by the connection's owner before it sends or
    receives the frames it applies to.

    Example:
        >>> left, right = map(FramedConnection, socket.socketpair())  # connect() in real use
        >>> left.send_many([(1, 0, b"batch"), (2, 0, b"barrier")])  # FrameKind.DATA, .EVENT
        >>> right.recv(), right.recv()
        ((1, 0, b'batch'), (2, 0, b'barrier'))
        >>> left.close(); right.close()
    """

    def __init__(
        self,
        sock: socket.socket | TlsChannel,
        *,
        recv_buffer_size: int = DEFAULT_RECV_BUFFER,
        socket_buffer_size: int | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        if recv_buffer_size < HEADER.size:
            raise ValueError(f"recv_buffer_size must be >= {HEADER.size}")
        self._max_frame_size = _checked_frame_cap(max_frame_size)
        self._sock = sock
        self._send_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._closed = False
        try:
            self.peer_address: tuple[Any, ...] = tuple(sock.getpeername())
        except OSError:
            self.peer_address = ()
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # Headers of small frames must not wait for Nagle's delayed ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            detect_dead_peer(sock.raw if isinstance(sock, TlsChannel) else sock)
        if socket_buffer_size is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, socket_buffer_size)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, socket_buffer_size)
        # Frames are parsed out of one reusable buffer: one recv_into often yields many
        # small frames, and compaction copies at most one partial frame per refill.
        self._buffer = bytearray(recv_buffer_size)
        self._view = memoryview(self._buffer)
        self._start = 0  # first unread byte
        self._end = 0  # one past the last received byte

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def max_frame_size(self) -> int:
        """The longest payload (bytes) this connection sends or accepts."""
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        self._max_frame_size = _checked_frame_cap(size)

    # -- sending ---------------------------------------------------------------------------

    def send(self, kind: int, channel: int, payload: Payload = b"") -> None:
        """Send one frame; blocks while the peer's receive window is full (backpressure).

        Raises ``FrameTooLarge`` (nothing sent) if ``payload`` exceeds ``max_frame_size``.
        """
        self._send_buffers(_frame_buffers(kind, channel, payload, self._max_frame_size))

    def send_many(self, frames: Iterable[tuple[int, int, Payload]]) -> None:
        """Send several frames with as few system calls as possible, contiguously.

        Example::

            conn.send_many([(FrameKind.DATA, ch, b) for ch, b in batches])
        """
        buffers: list[Payload] = []
        cap = self._max_frame_size
        for kind, channel, payload in frames:
            buffers.extend(_frame_buffers(kind, channel, payload, cap))
        if buffers:
            self._send_buffers(buffers)

    def send_object(self, kind: int, channel: int, obj: object) -> None:
        """Pickle ``obj`` (protocol 5) and send it as one frame."""
        self.send(kind, channel, pickle.dumps(obj, protocol=PICKLE_PROTOCOL))

    def _send_buffers(self, buffers: list[Payload]) -> None:
        with self._send_lock:
            if self._closed:
                raise ConnectionClosed("connection is closed")
            try:
                if isinstance(self._sock, TlsChannel):
                    self._sock.send_buffers(buffers)
                elif _HAS_SENDMSG:
                    self._sendmsg_all(buffers)
                else:
                    self._sock.sendall(b"".join(buffers))
            except OSError as exc:
                raise ConnectionClosed(f"send failed: {exc}") from exc

    def _sendmsg_all(self, buffers: list[Payload]) -> None:
        assert isinstance(self._sock, socket.socket)
        index = 0
        while index < len(buffers):
            sent = self._sock.sendmsg(buffers[index : index + _IOV_MAX])
            # A blocking sendmsg may still stop short (signal, huge vector): skip the
            # buffers written entirely and resume inside the partly written one.
            while sent > 0:
                size = len(buffers[index])
                if sent >= size:
                    sent -= size
                    index += 1
                else:
                    buffers[index] = memoryview(buffers[index])[sent:]
                    sent = 0

    # -- receiving -------------------------------------------------------------------------

    def recv(self) -> tuple[int, int, bytes]:
        """Return the next frame ``(kind, channel, payload)``; only one thread may call it.

        Raises ``ConnectionClosed`` on EOF, reset, or after ``close()``; ``FrameRefused``
        (closing the connection) when the header announces more than ``max_frame_size``
        bytes. A ``TimeoutError`` (only possible if the caller set a socket timeout) leaves
        the connection unusable.
        """
        try:
            self._fill(HEADER.size, in_frame=False)
            kind, channel, length = HEADER.unpack_from(self._buffer, self._start)
            self._start += HEADER.size
            if length > self._max_frame_size:
                self._refuse(length)
            if length <= len(self._buffer):
                self._fill(length, in_frame=True)
                payload = bytes(self._view[self._start : self._start + length])
                self._start += length
            else:
                payload = self._recv_large(length)
        except TimeoutError:
            raise
        except OSError as exc:
            if isinstance(exc, ConnectionClosed):
                raise
            raise ConnectionClosed(f"receive failed: {exc}") from exc
        return kind, channel, payload

    def recv_object(self) -> tuple[int, int, Any]:
        """Receive one frame and unpickle its payload.

        Safe only because the connection was authenticated before it was wrapped: pickle
        executes arbitrary code chosen by the sender, so the sender must hold the secret.
        """
        kind, channel, payload = self.recv()
        return kind, channel, pickle.loads(payload)

    def _fill(self, size: int, *, in_frame: bool) -> None:
        """Make at least ``size`` unread bytes available contiguously in the buffer."""
        available = self._end - self._start
        if available >= size:
            return
        if self._start + size > len(self._buffer):
            # bytes() because source and target may overlap within the same buffer.
            self._buffer[:available] = bytes(self._view[self._start : self._end])
            self._start, self._end = 0, available
        while self._end - self._start < size:
            mid_frame = in_frame or self._end > self._start
            count = self._recv_into(self._view[self._end :], mid_frame)
            self._end += count

    def _refuse(self, length: int) -> None:
        self.close()
        raise refused_frame(self.peer_address, length, self._max_frame_size)

    def _recv_large(self, length: int) -> bytes:
        # The payload grows with what arrives (through the reusable buffer), not with what
        # the header claims: a peer announcing 64 MiB and sending nothing costs no memory.
        payload = bytearray(self._view[self._start : self._end])
        self._start = self._end = 0
        while len(payload) < length:
            want = min(len(self._buffer), length - len(payload))
            count = self._recv_into(self._view[:want], True)
            payload += self._view[:count]
        return bytes(payload)

    def _recv_into(self, target: memoryview, mid_frame: bool) -> int:
        if self._closed:
            raise ConnectionClosed("connection is closed")
        count = self._sock.recv_into(target)
        if count == 0:
            if self._closed:
                raise ConnectionClosed("connection was closed locally")
            where = " mid-frame" if mid_frame else ""
            raise ConnectionClosed(f"peer closed the connection{where}")
        return count

    # -- lifecycle -------------------------------------------------------------------------

    def detach(self) -> tuple[socket.socket | TlsChannel, bytes]:
        """Hand the socket over to another owner (an event loop's ``LoopConnection``) with the
        bytes already read past the last frame returned; this object is closed afterwards
        (its ``close()`` no longer touches the socket). Only the reading thread may call it.
        """
        with self._close_lock:
            if self._closed:
                raise ConnectionClosed("connection is closed")
            self._closed = True
        leftover = bytes(self._view[self._start : self._end])
        self._start = self._end = 0
        return self._sock, leftover

    def close(self) -> None:
        """Close the connection; idempotent, safe from any thread, wakes a blocked reader."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        # shutdown() first: close() alone does not wake a thread blocked in recv/send.
        with contextlib.suppress(OSError):  # already reset by the peer
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def __enter__(self) -> FramedConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<FramedConnection peer={self.peer_address} {state}>"


def refused_frame(peer: tuple[Any, ...], length: int, cap: int) -> FrameRefused:
    """The error (logged) for a peer's header announcing ``length`` bytes over ``cap``."""
    message = (
        f"peer {_fmt_peer(peer)} announced a frame of {length:,} bytes, over this "
        f"connection's cap of {cap:,} bytes ({MAX_FRAME_SIZE_KEY}); closed the connection "
        "without reading it"
    )
    logger.warning("%s", message)
    return FrameRefused(message)


def _checked_frame_cap(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_PAYLOAD:
        raise ValueError(f"max_frame_size must be an int in 1..{MAX_PAYLOAD}, got {size!r}")
    return size


def _fmt_peer(peer: tuple[Any, ...]) -> str:
    return f"{peer[0]}:{peer[1]}" if len(peer) >= 2 else "(unknown address)"


def _frame_buffers(kind: int, channel: int, payload: Payload, cap: int) -> list[Payload]:
    if isinstance(payload, memoryview) and (payload.ndim != 1 or payload.itemsize != 1):
        payload = payload.cast("B")  # so that len() counts bytes
    length = len(payload)
    if length > cap:
        raise FrameTooLarge(
            f"frame of {length:,} bytes exceeds the connection's cap of {cap:,} bytes "
            f"({MAX_FRAME_SIZE_KEY})"
        )
    try:
        header = HEADER.pack(kind, channel, length)
    except struct.error as exc:
        raise ValueError(f"invalid frame header kind={kind} channel={channel}: {exc}") from exc
    return [header, payload] if length else [header]
