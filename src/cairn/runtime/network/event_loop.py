"""One thread's event loop over its connections, timers' deadline and a wake-up signal: the
worker's task thread waits here, so a batch moves from socket to operator (and from operator
to socket) on that one thread, without a hand-off per frame.

Invariants: only the owner thread calls ``register``, ``poll`` and ``close``; other threads
only call ``wake`` and ``call_soon`` (the functions it queues run on the owner thread, in
order, at its next ``poll``). A ``wake`` is never lost: one that comes while the owner sleeps
in ``poll`` ends the sleep, one that comes before makes the next ``poll`` not sleep; and it
costs a system call only when the owner sleeps. Each registered connection's handler sees
its frames in arrival order; a connection whose read or write fails is closed and
unregistered, and its error handler is told once. Output a connection could not write at
once is written as the socket drains (the loop watches for writability only then).

Example:
    >>> import socket, threading
    >>> from cairn.runtime.network.framing import FramedConnection
    >>> a, b = map(FramedConnection, socket.socketpair())
    >>> loop, got = EventLoop(), []
    >>> sender = LoopConnection.adopt(a)
    >>> loop.register(LoopConnection.adopt(b), got.extend, print)
    >>> sender.queue(1, 0, b"x"); _ = sender.flush()
    >>> while not got: _ = loop.poll(1.0)
    >>> got
    [(1, 0, b'x')]
    >>> threading.Thread(target=loop.wake).start(); loop.poll(5.0)  # woken, no frame
    True
    >>> sender.close(); loop.close()
"""

from __future__ import annotations

import contextlib
import os
import selectors
from collections import deque
from collections.abc import Callable

from cairn.runtime.network.errors import ConnectionClosed
from cairn.runtime.network.loop_connection import Frame, LoopConnection

__all__ = ["EventLoop", "FrameHandler"]


FrameHandler = Callable[[list[Frame]], None]
ErrorHandler = Callable[[BaseException], None]

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


class _Registration:
    __slots__ = ("conn", "fd", "on_error", "on_frames", "writing")

    def __init__(self, conn: LoopConnection, on_frames: FrameHandler, on_error: ErrorHandler):
        self.conn, self.on_frames, self.on_error = conn, on_frames, on_error
        self.fd = conn.fileno()  # kept: a closed socket's fileno() is -1
        self.writing = False  # registered for writability (output waits for the socket)


class EventLoop:
    """See the module's invariants."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = _wake_pipe()
        self._selector.register(self._wake_read, _READ, None)
        self._wake_only = selectors.DefaultSelector()  # a sleep that input does not end
        self._wake_only.register(self._wake_read, _READ, None)
        self._sleeping = False
        self._woken = False
        self._calls: deque[Callable[[], None]] = deque()
        self._registrations: dict[int, _Registration] = {}
        self._closed = False

    # -- any thread ------------------------------------------------------------------------

    def wake(self) -> None:
        """End the owner's current or next sleep in ``poll`` (any thread)."""
        self._woken = True
        if self._sleeping:
            with contextlib.suppress(OSError):  # the pipe is full (woken already) or closed
                os.write(self._wake_write, b"\0")

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the owner thread at its next ``poll`` (any thread)."""
        self._calls.append(fn)
        self.wake()

    # -- the owner thread ------------------------------------------------------------------

    def register(
        self, conn: LoopConnection, on_frames: FrameHandler, on_error: ErrorHandler
    ) -> None:
        """Watch ``conn``: its frames go to ``on_frames``, a failure to ``on_error``."""
        registration = _Registration(conn, on_frames, on_error)
        self._registrations[registration.fd] = registration
        self._selector.register(registration.fd, _READ, registration)
        try:
            frames = conn.buffered_frames()
        except (ConnectionClosed, OSError) as exc:
            self._fail(registration, exc)
            return
        if frames:
            on_frames(frames)
        if conn.has_output:
            self.flush(conn)

    def flush(self, conn: LoopConnection) -> None:
        """Write ``conn``'s queued output now; what the socket does not take is written as
        it drains."""
        registration = None if conn.closed else self._registrations.get(conn.fileno())
        if registration is None or registration.conn is not conn:
            return
        self._write(registration)

    def poll(self, timeout: float, wake_on_input: bool = True) -> bool:
        """Handle what is ready, waiting up to ``timeout`` seconds for something to be (with
        ``wake_on_input`` false, only a ``wake`` or the timeout ends the wait: input waits
        for the end of it); True if any frame, queued call or wake-up was handled."""
        did = False
        while self._calls:
            self._calls.popleft()()
            did = True
        if did or self._woken:
            timeout = 0.0
        if timeout > 0:
            self._sleeping = True
            if self._woken:  # a wake between the check above and here: do not sleep
                timeout = 0.0
        try:
            if not wake_on_input and timeout > 0:
                if self._wake_only.select(timeout):
                    _drain(self._wake_read)
                timeout = 0.0
            ready = self._selector.select(timeout)
        finally:
            self._sleeping = False
        if self._woken:
            self._woken = False
            did = True
        for key, events in ready:
            registration = key.data
            if registration is None:
                _drain(self._wake_read)
                continue
            if events & _WRITE:
                self._write(registration)
            if events & _READ and not registration.conn.closed:
                did = self._read(registration) or did
        while self._calls:
            self._calls.popleft()()
            did = True
        return did

    def _read(self, registration: _Registration) -> bool:
        conn = registration.conn
        try:
            frames = conn.read_frames()
            if frames:
                registration.on_frames(frames)
            if conn.has_output:  # e.g. a TLS session's answer
                self._write(registration)
        except (ConnectionClosed, OSError) as exc:
            self._fail(registration, exc)
            return True
        return bool(frames)

    def _write(self, registration: _Registration) -> None:
        conn = registration.conn
        try:
            done = conn.flush()
        except (ConnectionClosed, OSError) as exc:
            self._fail(registration, exc)
            return
        if registration.writing == (not done):
            return  # watched for writability exactly when output waits: no change
        registration.writing = not done
        events = _READ if done else _READ | _WRITE
        self._selector.modify(registration.fd, events, registration)

    def _fail(self, registration: _Registration, exc: BaseException) -> None:
        conn = registration.conn
        if self._registrations.get(registration.fd) is registration:
            del self._registrations[registration.fd]
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(registration.fd)
        conn.close()
        registration.on_error(exc)

    def close(self) -> None:
        """Run the calls queued so far, close every registered connection and the loop
        (idempotent)."""
        if self._closed:
            return
        self._closed = True
        while self._calls:  # queued before the close (a connection to adopt, say): they
            self._calls.popleft()()  # see their owner stopping and clean up after themselves
        for registration in list(self._registrations.values()):
            registration.conn.close()
        self._registrations.clear()
        self._selector.close()
        self._wake_only.close()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


def _wake_pipe() -> tuple[int, int]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    return read, write


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
        while os.read(fd, 4096):
            pass
