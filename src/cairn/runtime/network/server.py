"""Accepting and opening authenticated framed connections.

Invariant: ``on_connection`` only ever sees peers that proved the job secret and then sent
a HELLO frame; the listener binds exactly the host it is given (no wildcard default), and
no peer can hold the accept thread: handshakes run in their own threads under a deadline.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from cairn.runtime.network.auth import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    check_secret,
    client_handshake,
    server_handshake,
)
from cairn.runtime.network.errors import AuthenticationError, ConnectionClosed
from cairn.runtime.network.frames import FrameKind
from cairn.runtime.network.framing import FramedConnection

logger = logging.getLogger(__name__)

OnConnection = Callable[[FramedConnection, bytes], None]
"""Called with an authenticated connection and the peer's HELLO payload; owns the
connection from then on (runs in its own daemon thread, may block, e.g. as reader loop)."""

_MAX_RETRY_INTERVAL = 2.0


class Listener:
    """Accept authenticated connections on ``host:port`` (``port=0``: an ephemeral port).

    Binding happens in the constructor, so ``address`` is valid on return. ``close()``
    stops accepting; connections already handed to ``on_connection`` stay open.

    Example:
        >>> listener = Listener("10.0.0.5", secret, on_connection=serve)  # doctest: +SKIP
        >>> conn = connect(listener.address, secret, hello=b"task-7")  # doctest: +SKIP
    """

    def __init__(
        self,
        host: str,
        secret: bytes,
        on_connection: OnConnection,
        port: int = 0,
        *,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        max_pending_handshakes: int = 64,
        backlog: int = 128,
    ) -> None:
        if not host:
            # "" means every interface to the socket module; exposure must be explicit.
            raise ValueError("Listener needs an explicit host address to bind")
        check_secret(secret)
        self._secret = secret
        self._on_connection = on_connection
        self._handshake_timeout = handshake_timeout
        self._max_pending = max_pending_handshakes
        self._lock = threading.Lock()
        self._closed = False
        self._pending: set[socket.socket] = set()

        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        self._sock = socket.create_server((host, port), family=family, backlog=backlog)
        # Non-blocking: a peer that resets between select() and accept() must not block us.
        self._sock.setblocking(False)
        self._address: tuple[str, int] = tuple(self._sock.getsockname()[:2])
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"cairn-listener-{self._address[1]}", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``, with the real port when ``port=0`` was asked."""
        return self._address

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop accepting and abort pending handshakes; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = list(self._pending)
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"\0")
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self._sock.close()
        self._wake_reader.close()
        self._wake_writer.close()
        for sock in pending:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # its handshake thread closes it

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "listening"
        return f"<Listener {self._address[0]}:{self._address[1]} {state}>"

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            selector.register(self._wake_reader, selectors.EVENT_READ)
            while not self._closed:
                for key, _ in selector.select():
                    if key.fileobj is self._wake_reader:
                        return
                    try:
                        sock, peer = self._sock.accept()
                    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                        continue
                    except OSError as exc:
                        # Typically EMFILE: back off instead of spinning on a ready socket.
                        logger.error("accept() failed on %s: %s", self, exc)
                        time.sleep(0.1)
                        continue
                    self._hand_off(sock, peer)

    def _hand_off(self, sock: socket.socket, peer: Any) -> None:
        with self._lock:
            admitted = not self._closed and len(self._pending) < self._max_pending
            if admitted:
                self._pending.add(sock)
        if not admitted:
            logger.warning("dropping connection from %s: too many pending handshakes", _fmt(peer))
            sock.close()
            return
        threading.Thread(
            target=self._serve, args=(sock, peer), name=f"cairn-conn-{_fmt(peer)}", daemon=True
        ).start()

    def _serve(self, sock: socket.socket, peer: Any) -> None:
        accepted = self._authenticate(sock, peer)
        with self._lock:
            self._pending.discard(sock)
            if accepted is not None and self._closed:
                accepted[0].close()
                return
        if accepted is None:
            return
        conn, hello = accepted
        try:
            self._on_connection(conn, hello)
        except Exception:
            logger.exception("on_connection failed for peer %s; closing it", _fmt(peer))
            conn.close()

    def _authenticate(
        self, sock: socket.socket, peer: Any
    ) -> tuple[FramedConnection, bytes] | None:
        deadline = time.monotonic() + self._handshake_timeout
        try:
            server_handshake(sock, self._secret, timeout=self._handshake_timeout)
        except AuthenticationError as exc:
            self._log_rejection(peer, exc)
            return None
        conn = FramedConnection(sock)
        try:
            # The HELLO shares the handshake's deadline: authenticated but silent peers
            # must not pin a thread either.
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            kind, _, hello = conn.recv()
            sock.settimeout(None)
        except (TimeoutError, ConnectionClosed) as exc:
            conn.close()
            self._log_rejection(peer, f"no HELLO frame after the handshake ({exc or 'timeout'})")
            return None
        if kind != FrameKind.HELLO:
            conn.close()
            self._log_rejection(peer, f"first frame has kind {kind}, expected HELLO")
            return None
        return conn, hello

    def _log_rejection(self, peer: Any, reason: object) -> None:
        if self._closed:
            logger.debug("aborted handshake with %s on close: %s", _fmt(peer), reason)
        else:
            logger.warning("rejected connection from %s: %s", _fmt(peer), reason)


def connect(
    address: tuple[str, int],
    secret: bytes,
    hello: bytes = b"",
    *,
    timeout: float = 10.0,
    retries: int = 5,
    retry_interval: float = 0.2,
) -> FramedConnection:
    """Open an authenticated connection to a ``Listener`` and send ``hello`` as HELLO frame.

    Failures to establish TCP (e.g. the listener is not up yet) are retried ``retries``
    times with exponential backoff from ``retry_interval``; ``AuthenticationError`` is
    never retried, since a wrong secret does not heal. ``timeout`` bounds the TCP connect
    and, separately, the whole handshake.

    Example:
        >>> conn = connect(("10.0.0.5", 41234), secret, hello=b"task-7")  # doctest: +SKIP
    """
    check_secret(secret)
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    delay = retry_interval
    for attempt in range(retries + 1):
        try:
            sock = socket.create_connection(address, timeout=timeout)
            break
        except OSError as exc:
            if attempt == retries:
                raise
            logger.debug("connect to %s failed (%s); retrying in %.2f s", address, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_INTERVAL)
    client_handshake(sock, secret, timeout=timeout)
    sock.settimeout(None)
    conn = FramedConnection(sock)
    try:
        conn.send(FrameKind.HELLO, 0, hello)
    except ConnectionClosed:
        conn.close()
        raise
    return conn


def _fmt(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
