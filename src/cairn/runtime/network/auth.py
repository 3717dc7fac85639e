"""Mutual HMAC-SHA256 challenge-response on a raw socket, before any frame is exchanged.

Invariant: only fixed-size raw fields are read until the peer has proven the job secret,
so an unauthenticated peer can never make this process unpickle anything; a failed or
timed-out handshake raises ``AuthenticationError`` and leaves the socket closed.

Wire exchange (``MAGIC`` = ``b"CAIRN\\0"`` + wire version as ``!H``, nonces 32 random bytes):

    server -> client   MAGIC | server_nonce                                (40 bytes)
    client -> server   MAGIC | client_nonce | HMAC(secret, "client" ...)   (72 bytes)
    server -> client   status | HMAC(secret, "server" ...)                 (33 bytes)

Both MACs cover the role label, ``MAGIC`` and both nonces; distinct role labels keep a
peer from reflecting one side's proof back as the other's. Without TLS, traffic is
authenticated, not encrypted; with internal TLS (``tls``) the exchange runs inside a TLS
session whose peers already proved their certificates, and a TLS alert from the peer (it
refused this side's certificate) is an ``AuthenticationError``, never retried.

The status byte is OK, REJECTED (wrong secret: never retried) or BUSY (a listener turned
the connection away before checking it, e.g. it was full: ``ListenerBusy``, retried). A
client also takes a connection the server closes or resets before its verdict as busy.
The server's side is also offered as steps without I/O (``server_greeting``,
``check_client_proof``) for a listener that multiplexes many handshakes on one thread.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import ssl
import struct
import time
from typing import TYPE_CHECKING

from cairn.runtime.network.errors import AuthenticationError, HandshakeTimeout, ListenerBusy

if TYPE_CHECKING:
    from cairn.runtime.network.tls import TlsChannel

WIRE_VERSION = 1
"""Bump when the handshake or the frame format changes incompatibly."""

DEFAULT_HANDSHAKE_TIMEOUT = 10.0
"""Seconds a peer gets to complete the whole handshake (not per read)."""

MIN_SECRET_BYTES = 16

_MAGIC_PREFIX = b"CAIRN\x00"
_VERSION = struct.Struct("!H")
MAGIC = _MAGIC_PREFIX + _VERSION.pack(WIRE_VERSION)
_NONCE_BYTES = 32
_MAC_BYTES = hashlib.sha256().digest_size
_CLIENT_LABEL = b"cairn-auth client"
_SERVER_LABEL = b"cairn-auth server"
_STATUS_OK = b"\x01"
_STATUS_REJECTED = b"\x00"
_STATUS_BUSY = b"\x02"

CLIENT_PROOF_BYTES = len(MAGIC) + _NONCE_BYTES + _MAC_BYTES
"""What the client sends after the greeting: ``MAGIC | client_nonce | MAC`` (72 bytes)."""
REJECTED_VERDICT = _STATUS_REJECTED + bytes(_MAC_BYTES)
"""The server's answer to a client that failed to prove the secret."""
BUSY_VERDICT = _STATUS_BUSY + bytes(_MAC_BYTES)
"""The server's answer to a client it turns away unchecked: try again later."""


def new_secret() -> bytes:
    """Return a fresh random per-job secret (32 bytes) to hand to every worker.

    Example:
        >>> len(new_secret())
        32
    """
    return secrets.token_bytes(32)


def server_handshake(
    sock: socket.socket | TlsChannel,
    secret: bytes,
    *,
    timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
) -> None:
    """Authenticate the client on an accepted socket; the client proves the secret first.

    Returns with the socket's previous timeout restored; on failure closes the socket and
    raises ``AuthenticationError`` (``HandshakeTimeout`` if the peer was too slow).

    Example::

        server_handshake(accepted_sock, job_secret)
    """
    check_secret(secret)
    with _Deadline(sock, timeout, lost=AuthenticationError) as deadline:
        server_nonce, greeting = server_greeting()
        deadline.sendall(greeting)
        check_magic(deadline.recv_exact(len(MAGIC)))
        proof = MAGIC + deadline.recv_exact(CLIENT_PROOF_BYTES - len(MAGIC))
        try:
            verdict = check_client_proof(secret, server_nonce, proof)
        except AuthenticationError:
            deadline.sendall(REJECTED_VERDICT)
            raise
        deadline.sendall(verdict)


def server_greeting() -> tuple[bytes, bytes]:
    """A fresh server nonce and the greeting that carries it (the server speaks first).

    >>> nonce, greeting = server_greeting()
    >>> greeting == MAGIC + nonce and len(nonce) == 32
    True
    """
    server_nonce = secrets.token_bytes(_NONCE_BYTES)
    return server_nonce, MAGIC + server_nonce


def check_client_proof(secret: bytes, server_nonce: bytes, proof: bytes) -> bytes:
    """The server's verdict (status OK and its own proof) on the client's ``proof``, the
    ``CLIENT_PROOF_BYTES`` the client sent after the greeting carrying ``server_nonce``.

    Raises ``AuthenticationError`` when the client failed to prove the secret (the server
    then answers ``REJECTED_VERDICT``). No I/O: a listener may call it from its event loop.

    >>> key, (nonce, _) = new_secret(), server_greeting()
    >>> check_client_proof(key, nonce, MAGIC + bytes(64))
    Traceback (most recent call last):
    ...
    cairn.runtime.network.errors.AuthenticationError: peer failed to prove the job secret
    """
    if len(proof) != CLIENT_PROOF_BYTES:
        raise ValueError(f"a client proof has {CLIENT_PROOF_BYTES} bytes, got {len(proof)}")
    check_magic(proof[: len(MAGIC)])
    client_nonce = proof[len(MAGIC) : len(MAGIC) + _NONCE_BYTES]
    client_mac = proof[len(MAGIC) + _NONCE_BYTES :]
    expected = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce)
    # A client echoing our own nonce is attempting reflection; the labels already
    # defeat it, refusing it outright keeps the intent obvious.
    if client_nonce == server_nonce or not hmac.compare_digest(client_mac, expected):
        raise AuthenticationError("peer failed to prove the job secret")
    return _STATUS_OK + _mac(secret, _SERVER_LABEL, client_nonce, server_nonce)


def client_handshake(
    sock: socket.socket | TlsChannel,
    secret: bytes,
    *,
    timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
) -> None:
    """Authenticate to the server on a connected socket and require its proof in return.

    Returns with the socket's previous timeout restored; on failure closes the socket and
    raises ``AuthenticationError`` (``HandshakeTimeout`` if the server was too slow), or
    ``ListenerBusy`` if the server turned the connection away or closed it before its
    verdict (worth another try, unlike a wrong secret).

    Example::

        client_handshake(socket.create_connection(addr), job_secret)
    """
    check_secret(secret)
    with _Deadline(sock, timeout, lost=ListenerBusy) as deadline:
        check_magic(deadline.recv_exact(len(MAGIC)))
        server_nonce = deadline.recv_exact(_NONCE_BYTES)
        client_nonce = secrets.token_bytes(_NONCE_BYTES)
        proof = _mac(secret, _CLIENT_LABEL, server_nonce, client_nonce)
        deadline.sendall(MAGIC + client_nonce + proof)
        status = deadline.recv_exact(1)
        if status == _STATUS_BUSY:
            raise ListenerBusy("the listener turned this connection away (busy)")
        server_mac = deadline.recv_exact(_MAC_BYTES)
        if status != _STATUS_OK:
            raise AuthenticationError("server rejected this side's proof: wrong job secret?")
        expected = _mac(secret, _SERVER_LABEL, client_nonce, server_nonce)
        if not hmac.compare_digest(server_mac, expected):
            raise AuthenticationError("server failed to prove the job secret")


def _mac(secret: bytes, label: bytes, first_nonce: bytes, second_nonce: bytes) -> bytes:
    return hmac.new(secret, label + MAGIC + first_nonce + second_nonce, hashlib.sha256).digest()


def check_secret(secret: bytes) -> None:
    """Raise ``ValueError`` unless ``secret`` is bytes long enough to resist guessing."""
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        raise ValueError(
            f"the job secret must be at least {MIN_SECRET_BYTES} bytes; use new_secret()"
        )


def check_magic(received: bytes) -> None:
    """Raise ``AuthenticationError`` unless ``received`` (the first ``len(MAGIC)`` bytes a
    peer sent) is this wire version's ``MAGIC``, naming what the peer is instead."""
    if received[: len(_MAGIC_PREFIX)] != _MAGIC_PREFIX:
        raise AuthenticationError(f"peer is not a Cairn endpoint (it sent {received!r})")
    (version,) = _VERSION.unpack(received[len(_MAGIC_PREFIX) :])
    if version != WIRE_VERSION:
        raise AuthenticationError(
            f"peer speaks Cairn wire protocol v{version}, this side speaks v{WIRE_VERSION}"
        )


class _Deadline:
    """Socket I/O bounded by one deadline for the whole handshake.

    A per-read timeout would let a peer dribbling one byte per period hold a server thread
    forever; the deadline bounds the total.
    """

    def __init__(
        self, sock: socket.socket | TlsChannel, timeout: float, lost: type[Exception]
    ) -> None:
        self._sock = sock
        self._timeout = timeout
        self._lost = lost  # raised when the peer closes or resets the connection
        self._end = time.monotonic() + timeout
        self._previous_timeout = sock.gettimeout()

    def __enter__(self) -> _Deadline:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        if exc_type is None:
            self._sock.settimeout(self._previous_timeout)
            return
        self._sock.close()
        if isinstance(exc, AuthenticationError | ListenerBusy | ValueError):
            return  # propagates unchanged
        if isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError):
            raise AuthenticationError(f"TLS: the peer refused this side ({exc})") from exc
        if isinstance(exc, TimeoutError):
            raise HandshakeTimeout(f"handshake not completed within {self._timeout:g} s") from exc
        if isinstance(exc, OSError):
            raise self._lost(f"connection lost during the handshake: {exc}") from exc

    def _arm(self) -> None:
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("handshake deadline passed")
        self._sock.settimeout(remaining)

    def sendall(self, data: bytes) -> None:
        self._arm()
        self._sock.sendall(data)

    def recv_exact(self, size: int) -> bytes:
        buffer = bytearray(size)
        view = memoryview(buffer)
        received = 0
        while received < size:
            self._arm()
            count = self._sock.recv_into(view[received:])
            if count == 0:
                raise self._lost("peer closed the connection during the handshake")
            received += count
        return bytes(buffer)
