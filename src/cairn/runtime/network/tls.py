"""TLS under Cairn's wire: mutual authentication with certificates, then the HMAC handshake.

Invariant: with internal TLS on, a peer must complete a TLS handshake presenting a
certificate signed by the truststore before a single byte of application data is read from
it (the job's HMAC handshake then runs inside TLS, and frames after it); the ``SSLObject`` of
a connection is only ever touched under its lock while socket I/O happens outside it, so one
reader thread and any number of sender threads may use a connection at once (an event loop's
owner uses ``recv_available``, ``encrypt`` and ``take_output`` and writes the socket itself;
OpenSSL does not allow two threads into one ``SSL`` object, which a plain ``SSLSocket``
would do).

Records leave in the order the ``SSLObject`` produced them: whoever drains the outgoing
buffer holds the write lock until those bytes are on the socket (lock order: write, then
the ``SSLObject``'s).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn.runtime.network.errors import ConnectionClosed
from cairn.settings import TlsFiles

__all__ = ["InternalTls", "TlsChannel", "client_context", "server_context"]

_READ_CHUNK = 256 * 1024  # raw bytes pulled from the socket per read
_HANDSHAKE_CHUNK = 16 * 1024  # ... while the handshake runs (no buffer kept per connection)
_WRITE_CHUNK = 256 * 1024  # plaintext encrypted per step, so a big frame is not doubled in memory
_COALESCE = 16 * 1024  # smaller buffers (frame headers) share a TLS record with their neighbours


def _context(files: TlsFiles, purpose: int, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(purpose)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.keystore, password=files.key_password)
        context.load_verify_locations(cafile=files.truststore)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"cannot load the TLS files (keystore {files.keystore}, truststore "
            f"{files.truststore}): {exc}"
        ) from exc
    # Peers are addressed by IP and share one certificate (Flink's internal model): trust
    # comes from the truststore, not from names.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
    return context


def server_context(files: TlsFiles, *, require_client_cert: bool = True) -> ssl.SSLContext:
    """A server-side context: present ``files.keystore``, and require a client certificate
    signed by ``files.truststore`` unless ``require_client_cert`` is false (REST without
    mutual authentication).

    Example::

        context = server_context(TlsFiles("/etc/cairn/internal.pem", "/etc/cairn/ca.pem"))
    """
    context = _context(files, ssl.PROTOCOL_TLS_SERVER, require_client_cert)
    context.num_tickets = 0  # no session resumption: nothing to write after the handshake
    return context


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """A client-side context: present ``files.keystore``, require the server's certificate
    to be signed by ``files.truststore``."""
    context = _context(files, ssl.PROTOCOL_TLS_CLIENT, True)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


@dataclass(frozen=True)
class InternalTls:
    """Both contexts of one process on the internal wire (None, None: TLS is off).

    >>> InternalTls.of(None)
    InternalTls(server=None, client=None)
    """

    server: ssl.SSLContext | None = None  # for its ``Listener``
    client: ssl.SSLContext | None = None  # for ``connect``

    @classmethod
    def of(cls, files: TlsFiles | None) -> InternalTls:
        """The contexts of ``security.ssl.internal.*`` (``files``; None: TLS off)."""
        if files is None:
            return cls()
        return cls(server_context(files), client_context(files))


class TlsChannel:
    """A TLS stream over a connected TCP socket with the socket methods Cairn's wire uses.

    ``recv_into``/``sendall`` carry plaintext; everything else (timeouts, ``shutdown``,
    ``close``, ``fileno``) applies to the TCP socket. Build it with ``handshake`` (blocking,
    a deadline for the whole handshake) or drive ``handshake_step`` from a selector.

    Example::

        channel = TlsChannel(socket.create_connection(addr), client_context(files))
        channel.handshake(timeout=10.0)
        conn = FramedConnection(channel)
    """

    def __init__(
        self, sock: socket.socket, context: ssl.SSLContext, *, server_side: bool = False
    ) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side)
        self._lock = threading.Lock()  # the SSLObject and both BIOs
        self._write_lock = threading.Lock()  # the socket's outgoing byte order
        self._eof = False
        self.handshake_done = False
        # Raw bytes from the socket, reused by the one reader once the session is up (not
        # before: a listener may hold hundreds of pending handshakes).
        self._raw: memoryview | None = None

    @property
    def raw(self) -> socket.socket:
        """The TCP socket under the TLS stream."""
        return self._sock

    @property
    def family(self) -> int:
        return int(self._sock.family)

    # -- the handshake -----------------------------------------------------------------------

    def handshake(self, timeout: float) -> None:
        """Complete the TLS handshake within ``timeout`` seconds (blocking).

        Raises ``ssl.SSLError`` when the peer's certificate is refused or the peer refused
        ours (an alert), ``ConnectionClosed`` when the peer went away, ``TimeoutError``.
        """
        end = time.monotonic() + timeout
        previous = self._sock.gettimeout()
        while not self._advance():
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("TLS handshake not completed in time")
            self._sock.settimeout(remaining)
            self._pull(blocking=True)
        self._sock.settimeout(previous)

    def handshake_step(self) -> bool:
        """Feed what the (non-blocking) socket holds to the handshake; True once complete.

        Raises like ``handshake``; ``BlockingIOError`` never escapes.
        """
        self._pull(blocking=False)
        return self._advance()

    def _advance(self) -> bool:
        with self._write_lock:
            with self._lock:
                try:
                    self._tls.do_handshake()
                    done = True
                except ssl.SSLWantReadError:
                    done = False
                except ssl.SSLError:
                    # The alert (unknown CA, bad certificate) still goes out before we fail.
                    self._send_quietly(self._outgoing.read())
                    raise
                out = self._outgoing.read()
            if out:
                self._sock.sendall(out)
        if done:
            self.handshake_done = True
        return done

    def _pull(self, *, blocking: bool) -> None:
        """Move raw bytes from the socket into the TLS input (``blocking``: wait for some)."""
        if self._raw is None and self.handshake_done:
            self._raw = memoryview(bytearray(_READ_CHUNK))
        try:
            if self._raw is None:
                data: bytes | memoryview = self._sock.recv(_HANDSHAKE_CHUNK)
            else:
                data = self._raw[: self._sock.recv_into(self._raw)]
        except (BlockingIOError, InterruptedError):
            if blocking:
                raise
            return
        if not data:
            self._eof = True
            if not self.handshake_done:
                raise ConnectionClosed("peer closed the connection during the TLS handshake")
            with self._lock:
                self._incoming.write_eof()
            return
        with self._lock:
            self._incoming.write(data)

    # -- plaintext -----------------------------------------------------------------------------

    def recv_into(self, target: memoryview | bytearray, nbytes: int = 0) -> int:
        """Read up to ``len(target)`` plaintext bytes into ``target``; 0 when the peer closed."""
        view = memoryview(target)
        size = nbytes or len(view)
        while True:
            with self._lock:
                try:
                    # With a buffer, read() returns the count (typeshed says bytes).
                    count: int = self._tls.read(size, view)  # type: ignore[assignment]
                except ssl.SSLWantReadError:
                    count = -1
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    count = 0
                pending = self._outgoing.pending
            if pending:
                self._flush_if_free()
            if count >= 0:
                return count
            if self._eof:
                return 0
            self._pull(blocking=True)

    def recv_available(self, size: int) -> bytes:
        """Up to ``size`` plaintext bytes already received, without blocking (a non-blocking
        socket): ``b""`` when the peer closed, ``BlockingIOError`` when nothing is there."""
        self._pull(blocking=False)
        with self._lock:
            try:
                return self._tls.read(size)
            except ssl.SSLWantReadError:
                if self._eof:
                    return b""
                raise BlockingIOError("no TLS record complete yet") from None
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send all of ``data``."""
        self.send_buffers([data])

    def send_buffers(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        """Encrypt and send ``buffers`` in order; small neighbours share a TLS record."""
        with self._write_lock:
            small: list[bytes | bytearray | memoryview] = []
            small_size = 0
            for buffer in buffers:
                view = memoryview(buffer).cast("B")
                if len(view) < _COALESCE:
                    small.append(view)
                    small_size += len(view)
                    if small_size < _COALESCE:
                        continue
                if small:
                    joined = b"".join(small)
                    small, small_size = [], 0
                    self._encrypt_and_send(memoryview(joined))
                if len(view) >= _COALESCE:
                    self._encrypt_and_send(view)
            if small:
                self._encrypt_and_send(memoryview(b"".join(small)))

    def encrypt(self, buffers: Sequence[bytes | bytearray | memoryview]) -> bytes:
        """The TLS records of ``buffers`` (in order) plus anything the session had to send,
        without touching the socket: for an owner that writes the socket itself, without
        blocking (an event loop). Small neighbours share a record, as in ``send_buffers``."""
        with self._lock:
            joined = b"".join(buffers)
            view = memoryview(joined)
            for offset in range(0, len(view), _WRITE_CHUNK):
                self._tls.write(view[offset : offset + _WRITE_CHUNK])
            return self._outgoing.read()

    def take_output(self) -> bytes:
        """What the session produced while reading (e.g. a key update's answer), to be sent
        by an owner that writes the socket itself (``b""`` mostly)."""
        with self._lock:
            return self._outgoing.read() if self._outgoing.pending else b""

    def _encrypt_and_send(self, view: memoryview) -> None:
        for offset in range(0, len(view), _WRITE_CHUNK):
            with self._lock:
                self._tls.write(view[offset : offset + _WRITE_CHUNK])
                out = self._outgoing.read()
            self._sock.sendall(out)

    def _flush_if_free(self) -> None:
        # What reading produced (e.g. a key update's answer) goes out now unless a sender
        # holds the write lock: it drains the whole outgoing buffer with its next record,
        # and waiting for it could deadlock a reader behind a sender blocked on the peer.
        if not self._write_lock.acquire(blocking=False):
            return
        try:
            with self._lock:
                out = self._outgoing.read()
            if out:
                self._sock.sendall(out)
        finally:
            self._write_lock.release()

    def _send_quietly(self, data: bytes) -> None:
        if data:
            with contextlib.suppress(OSError):
                self._sock.send(data)

    # -- the TCP socket ------------------------------------------------------------------------

    def fileno(self) -> int:
        return self._sock.fileno()

    def getpeername(self) -> Any:
        return self._sock.getpeername()

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self._sock.setsockopt(level, option, value)

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self._sock.gettimeout()

    def setblocking(self, flag: bool) -> None:
        self._sock.setblocking(flag)

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()

    def __repr__(self) -> str:
        return f"<TlsChannel {self._sock!r}>"
