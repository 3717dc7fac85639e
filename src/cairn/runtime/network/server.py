"""Accepting and opening authenticated framed connections.

Invariant: ``on_connection`` only ever sees peers that proved the job secret and then sent
a HELLO frame (with TLS, inside a TLS session whose client certificate the listener verified
before it sent or read anything else); the listener binds exactly the host it is given (no
wildcard default), and no peer can hold the accept thread or keep peers that prove the
secret out: the accept thread runs every handshake (TLS too) up to the client's proof
itself (non-blocking, no thread per peer), an unproven connection gets ``proof_timeout``
seconds, a full listener turns the oldest unproven one away (``admission``) with a BUSY
verdict that ``connect`` retries, and rejections are logged rate-limited.
"""

from __future__ import annotations

import contextlib
import logging
import random
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cairn.runtime.network.admission import (
    PendingHandshake,
    RejectionKind,
    RejectionLog,
    choose_victim,
)
from cairn.runtime.network.auth import (
    BUSY_VERDICT,
    CLIENT_PROOF_BYTES,
    DEFAULT_HANDSHAKE_TIMEOUT,
    MAGIC,
    REJECTED_VERDICT,
    check_client_proof,
    check_magic,
    check_secret,
    client_handshake,
    server_greeting,
)
from cairn.runtime.network.errors import AuthenticationError, ConnectionClosed, ListenerBusy
from cairn.runtime.network.frames import FrameKind
from cairn.runtime.network.framing import FramedConnection
from cairn.runtime.network.tls import TlsChannel

logger = logging.getLogger(__name__)

OnConnection = Callable[[FramedConnection, bytes], None]
"""Called with an authenticated connection and the peer's HELLO payload; owns the
connection from then on (runs in its own daemon thread, may block, e.g. as reader loop)."""

DEFAULT_PROOF_TIMEOUT = 2.0
"""Seconds an unproven peer gets to send its proof (a Cairn client sends it at once)."""
DEFAULT_MAX_PENDING = 512
"""Unproven connections a listener holds (each costs a file descriptor, no thread)."""
DEFAULT_BUSY_TIMEOUT = 60.0
"""Seconds ``connect`` keeps retrying a listener that turns it away."""
REJECTION_LOG_INTERVAL = 10.0

_MAX_RETRY_INTERVAL = 2.0
_MAX_BUSY_INTERVAL = 1.0
_ACCEPTS_PER_ROUND = 64  # then proofs that arrived meanwhile are read first
_MAX_SELECT_S = 1.0


@dataclass(eq=False)
class _Unproven:
    """A connection greeted by the accept thread, waiting for the client's proof."""

    sock: socket.socket
    peer: Any
    nonce: bytes
    accepted_at: float
    proof_deadline: float
    buffer: bytearray = field(default_factory=bytearray)
    channel: TlsChannel | None = None  # with TLS: the session, greeted once it is up

    @property
    def stream(self) -> socket.socket | TlsChannel:
        return self.channel if self.channel is not None else self.sock

    @property
    def facts(self) -> PendingHandshake:
        return PendingHandshake(_host(self.peer), len(self.buffer))


class Listener:
    """Accept authenticated connections on ``host:port`` (``port=0``: an ephemeral port).

    Binding happens in the constructor, so ``address`` is valid on return. ``close()``
    stops accepting; connections already handed to ``on_connection`` stay open.
    ``handshake_timeout`` bounds a peer's whole handshake up to its HELLO frame, and
    ``proof_timeout`` (if shorter) the part before it proved the secret; at most
    ``max_pending_handshakes`` unproven connections are held. With ``tls`` (a server
    context, ``tls.server_context``) a peer first completes a TLS handshake with a client
    certificate the context verifies, within ``proof_timeout`` like its proof.

    Example::

        listener = Listener("10.0.0.5", secret, on_connection=serve)
        conn = connect(listener.address, secret, hello=b"task-7")
    """

    def __init__(
        self,
        host: str,
        secret: bytes,
        on_connection: OnConnection,
        port: int = 0,
        *,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        proof_timeout: float = DEFAULT_PROOF_TIMEOUT,
        max_pending_handshakes: int = DEFAULT_MAX_PENDING,
        backlog: int = 128,
        log_interval: float = REJECTION_LOG_INTERVAL,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if not host:
            # "" means every interface to the socket module; exposure must be explicit.
            raise ValueError("Listener needs an explicit host address to bind")
        check_secret(secret)
        if max_pending_handshakes < 1:
            raise ValueError(f"max_pending_handshakes must be >= 1, got {max_pending_handshakes}")
        if handshake_timeout <= 0 or proof_timeout <= 0:
            raise ValueError("handshake_timeout and proof_timeout must be > 0")
        self._secret = secret
        self._tls = tls
        self._on_connection = on_connection
        self._handshake_timeout = handshake_timeout
        self._proof_timeout = min(proof_timeout, handshake_timeout)
        self._max_pending = max_pending_handshakes
        self._lock = threading.Lock()
        self._closed = False
        self._unproven: dict[socket.socket, _Unproven] = {}  # accept thread only; oldest first
        self._proven: set[socket.socket] = set()  # awaiting HELLO in their own threads
        self.rejections = RejectionLog(log_interval)

        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        self._sock = socket.create_server((host, port), family=family, backlog=backlog)
        # Non-blocking: a peer that resets between select() and accept() must not block us.
        self._sock.setblocking(False)
        self._address: tuple[str, int] = tuple(self._sock.getsockname()[:2])
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._selector = selectors.DefaultSelector()
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

    @property
    def pending_handshakes(self) -> int:
        """Unproven connections held right now (read from any thread: a snapshot)."""
        return len(self._unproven)

    def close(self) -> None:
        """Stop accepting and abort pending handshakes; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            proven = list(self._proven)
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"\0")
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self._sock.close()
        self._wake_reader.close()
        self._wake_writer.close()
        for sock in proven:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # its handshake thread closes it

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "listening"
        return f"<Listener {self._address[0]}:{self._address[1]} {state}>"

    # ------------------------------------------------------------------ the accept thread

    def _accept_loop(self) -> None:
        selector = self._selector
        selector.register(self._sock, selectors.EVENT_READ)
        selector.register(self._wake_reader, selectors.EVENT_READ)
        try:
            while not self._closed:
                ready = selector.select(self._select_timeout())
                accept = False
                for key, _ in ready:
                    if key.fileobj is self._wake_reader:
                        return
                    if key.fileobj is self._sock:
                        accept = True
                    else:
                        self._read_proof(key.data)
                if accept:  # after the proofs: a flood of newcomers must not delay them
                    self._accept_some()
                now = time.monotonic()
                self._expire(now)
                summary = self.rejections.summary(now)
                if summary is not None:
                    logger.warning("%s: %s", self, summary)
        finally:
            for pending in list(self._unproven.values()):
                self._drop(pending)
            summary = self.rejections.summary(time.monotonic(), force=True)
            if summary is not None:
                logger.warning("%s: %s", self, summary)
            selector.close()

    def _select_timeout(self) -> float:
        timeout = _MAX_SELECT_S
        if self._unproven:
            oldest = next(iter(self._unproven.values()))
            timeout = min(timeout, max(oldest.proof_deadline - time.monotonic(), 0.0))
        return timeout

    def _accept_some(self) -> None:
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                sock, peer = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                # Typically EMFILE: back off instead of spinning on a ready socket.
                self._reject(None, RejectionKind.ACCEPT_FAILED, f"accept() failed: {exc}")
                time.sleep(0.05)
                return
            self._greet(sock, peer)

    def _greet(self, sock: socket.socket, peer: Any) -> None:
        if len(self._unproven) >= self._max_pending:
            held = list(self._unproven.values())
            victim = held[choose_victim([p.facts for p in held])]
            reason = f"listener full ({len(held)} handshakes pending), this one the oldest"
            self._turn_away(victim, reason)
        nonce, greeting = server_greeting()
        now = time.monotonic()
        pending = _Unproven(sock, peer, nonce, now, now + self._proof_timeout)
        # Held before greeted: whoever sees the greeting sees the handshake pending.
        self._unproven[sock] = pending
        self._selector.register(sock, selectors.EVENT_READ, pending)
        try:
            sock.setblocking(False)
            if self._tls is not None:
                # The greeting waits for the TLS session: the client speaks first.
                pending.channel = TlsChannel(sock, self._tls, server_side=True)
                return
            # A fresh socket's send buffer always takes the 40-byte greeting whole.
            complete = sock.send(greeting) == len(greeting)
        except OSError:
            complete = False
        if not complete:
            self._drop(pending)

    def _tls_step(self, pending: _Unproven, channel: TlsChannel) -> None:
        try:
            if not channel.handshake_step():
                return
            channel.sendall(MAGIC + pending.nonce)  # the greeting, now encrypted
        except (ssl.SSLError, OSError) as exc:
            self._drop(pending)
            self._reject(pending.peer, RejectionKind.UNAUTHENTICATED, f"TLS handshake: {exc}")

    def _read_proof(self, pending: _Unproven) -> None:
        channel = pending.channel
        if channel is not None and not channel.handshake_done:
            self._tls_step(pending, channel)
            return
        wanted = CLIENT_PROOF_BYTES - len(pending.buffer)
        try:
            if channel is not None:
                chunk = channel.recv_available(wanted)
            else:
                chunk = pending.sock.recv(wanted)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._drop(pending)
            self._reject(pending.peer, RejectionKind.UNAUTHENTICATED, f"connection lost: {exc}")
            return
        if not chunk:
            self._drop(pending)
            self._reject(
                pending.peer,
                RejectionKind.UNAUTHENTICATED,
                "peer closed the connection during the handshake",
            )
            return
        before = len(pending.buffer)
        pending.buffer += chunk
        try:
            if before < len(MAGIC) <= len(pending.buffer):  # garbage is refused at once
                check_magic(bytes(pending.buffer[: len(MAGIC)]))
            if len(pending.buffer) < CLIENT_PROOF_BYTES:
                return
            verdict = check_client_proof(self._secret, pending.nonce, bytes(pending.buffer))
        except AuthenticationError as exc:
            if len(pending.buffer) == CLIENT_PROOF_BYTES:
                _send_quietly(pending, REJECTED_VERDICT)
            self._drop(pending)
            self._reject(pending.peer, RejectionKind.UNAUTHENTICATED, exc)
            return
        self._release(pending)
        with self._lock:
            if self._closed:
                pending.sock.close()
                return
            self._proven.add(pending.sock)
        deadline = pending.accepted_at + self._handshake_timeout
        threading.Thread(
            target=self._serve,
            args=(pending.stream, pending.peer, verdict, deadline),
            name=f"cairn-conn-{_fmt(pending.peer)}",
            daemon=True,
        ).start()

    def _expire(self, now: float) -> None:
        while self._unproven:
            oldest = next(iter(self._unproven.values()))
            if oldest.proof_deadline > now:
                return
            self._turn_away(
                oldest,
                f"handshake not completed within {self._proof_timeout:g} s",
                RejectionKind.TIMED_OUT,
            )

    def _turn_away(
        self, pending: _Unproven, reason: str, kind: RejectionKind = RejectionKind.TURNED_AWAY
    ) -> None:
        # BUSY, not a silent close: a slow Cairn client tells it from a wrong secret, retries.
        _send_quietly(pending, BUSY_VERDICT)
        self._drop(pending)
        self._reject(pending.peer, kind, reason)

    def _release(self, pending: _Unproven) -> None:
        """Stop tracking ``pending`` (its socket stays open)."""
        del self._unproven[pending.sock]
        self._selector.unregister(pending.sock)

    def _drop(self, pending: _Unproven) -> None:
        self._release(pending)
        pending.sock.close()

    # ------------------------------------------------------------------ proven peers

    def _serve(
        self, sock: socket.socket | TlsChannel, peer: Any, verdict: bytes, deadline: float
    ) -> None:
        accepted = self._await_hello(sock, peer, verdict, deadline)
        with self._lock:
            self._proven.discard(sock.raw if isinstance(sock, TlsChannel) else sock)
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

    def _await_hello(
        self, sock: socket.socket | TlsChannel, peer: Any, verdict: bytes, deadline: float
    ) -> tuple[FramedConnection, bytes] | None:
        conn = FramedConnection(sock)
        try:
            # The verdict and the HELLO share the handshake's deadline: authenticated but
            # silent peers must not pin a thread either.
            sock.setblocking(True)
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.sendall(verdict)
            kind, _, hello = conn.recv()
            sock.settimeout(None)
        except (TimeoutError, OSError) as exc:
            conn.close()
            reason = f"no HELLO frame after the handshake ({exc or 'timeout'})"
            self._reject(peer, RejectionKind.TIMED_OUT, reason)
            return None
        if kind != FrameKind.HELLO:
            conn.close()
            reason = f"first frame has kind {kind}, expected HELLO"
            self._reject(peer, RejectionKind.BAD_HELLO, reason)
            return None
        return conn, hello

    def _reject(self, peer: Any, kind: RejectionKind, reason: object) -> None:
        message = f"rejected connection from {_fmt(peer)}: {reason}"
        if self._closed:
            logger.debug("aborted handshake with %s on close: %s", _fmt(peer), reason)
            return
        for line in self.rejections.record(kind, message, time.monotonic()):
            logger.warning("%s", line)


def connect(
    address: tuple[str, int],
    secret: bytes,
    hello: bytes = b"",
    *,
    timeout: float = 10.0,
    retries: int = 5,
    retry_interval: float = 0.2,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    tls: ssl.SSLContext | None = None,
) -> FramedConnection:
    """Open an authenticated connection to a ``Listener`` and send ``hello`` as HELLO frame.

    Failures to establish TCP (e.g. the listener is not up yet) are retried ``retries``
    times with exponential backoff from ``retry_interval``; ``AuthenticationError`` is
    never retried, since a wrong secret does not heal. A listener that turns the
    connection away before its verdict (``ListenerBusy``: full, e.g. flooded by other
    local processes) is tried again with jittered backoff (from ``retry_interval``, at
    most 1 s apart) for up to ``busy_timeout`` seconds in all, then ``ListenerBusy`` is
    raised. ``timeout`` bounds the TCP connect and, separately, each handshake. With
    ``tls`` (a client context, ``tls.client_context``) the connection is a TLS session
    first; a listener refusing this side's certificate raises ``AuthenticationError``.

    Example::

        conn = connect(("10.0.0.5", 41234), secret, hello=b"task-7")
    """
    check_secret(secret)
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    give_up_at = time.monotonic() + busy_timeout
    delay = retry_interval
    turned_away = 0
    while True:
        raw = _open(address, timeout, retries, retry_interval)
        sock: socket.socket | TlsChannel = raw
        try:
            if tls is not None:
                sock = _start_tls(raw, tls, timeout)
            client_handshake(sock, secret, timeout=timeout)
            break
        except ListenerBusy as exc:
            turned_away += 1
            pause = random.uniform(delay / 2, delay)
            if time.monotonic() + pause > give_up_at:
                raise ListenerBusy(
                    f"{_fmt(address)} turned this connection away {turned_away} times in "
                    f"{busy_timeout:g} s (the last time: {exc})"
                ) from exc
            logger.debug("%s is busy (%s); retrying in %.2f s", _fmt(address), exc, pause)
            time.sleep(pause)
            delay = min(delay * 2, _MAX_BUSY_INTERVAL)
    if turned_away:
        logger.info("connected to %s after it was busy %d times", _fmt(address), turned_away)
    sock.settimeout(None)
    conn = FramedConnection(sock)
    try:
        conn.send(FrameKind.HELLO, 0, hello)
    except ConnectionClosed:
        conn.close()
        raise
    return conn


def _start_tls(sock: socket.socket, context: ssl.SSLContext, timeout: float) -> TlsChannel:
    channel = TlsChannel(sock, context)
    try:
        channel.handshake(timeout)
    except ssl.SSLError as exc:
        sock.close()
        if isinstance(exc, ssl.SSLEOFError):  # closed mid-handshake: turned away
            raise ListenerBusy(f"the listener closed the TLS handshake: {exc}") from exc
        raise AuthenticationError(f"TLS handshake failed: {exc}") from exc
    except OSError as exc:
        sock.close()
        raise ListenerBusy(f"connection lost during the TLS handshake: {exc}") from exc
    return channel


def _open(
    address: tuple[str, int], timeout: float, retries: int, retry_interval: float
) -> socket.socket:
    delay = retry_interval
    for attempt in range(retries + 1):
        try:
            return socket.create_connection(address, timeout=timeout)
        except OSError as exc:
            if attempt == retries:
                raise
            logger.debug("connect to %s failed (%s); retrying in %.2f s", address, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_INTERVAL)
    raise AssertionError("unreachable")


def _send_quietly(pending: _Unproven, data: bytes) -> None:
    """Best effort on a non-blocking socket about to be closed (a verdict of 33 bytes);
    nothing before a TLS session is up (the client takes the close as busy)."""
    with contextlib.suppress(OSError):
        if pending.channel is None:
            pending.sock.send(data)
        elif pending.channel.handshake_done:
            pending.channel.sendall(data)


def _host(peer: Any) -> str:
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


def _fmt(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
