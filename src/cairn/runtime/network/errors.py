"""Errors of Cairn's wire layer.

Invariant: a peer that went away always surfaces as ``ConnectionClosed`` (an ``OSError``,
possibly retryable by the caller); a peer that failed to prove the job secret always
surfaces as ``AuthenticationError`` (never an ``OSError``, so that retry loops written
as ``except OSError`` do not retry a wrong secret); a listener that turned a connection
away before checking it surfaces as ``ListenerBusy``, a ``ConnectionClosed``. A frame over the
size cap is refused before a byte of it is sent (``FrameTooLarge``, a ``ValueError``: the
caller's data is at fault) or, announced by the peer, before memory is allocated for it
(``FrameRefused``, the connection is closed).
"""

from __future__ import annotations


class ConnectionClosed(ConnectionError):
    """The connection is closed: EOF from the peer, a reset, or a local ``close()``."""


class ListenerBusy(ConnectionClosed):
    """The listener turned the connection away before its verdict (it had too many pending
    handshakes, or this one took too long): another attempt may succeed."""


class AuthenticationError(Exception):
    """The peer is not a Cairn endpoint of this job: wrong secret, garbage or wrong version."""


class HandshakeTimeout(AuthenticationError):
    """The peer did not complete the handshake within the allowed time."""


class FrameRefused(ConnectionClosed):
    """The peer announced a frame longer than this side's cap; the connection was closed
    without reading (or allocating memory for) the frame."""


class FrameTooLarge(ValueError):
    """A frame to send is longer than the connection's cap; nothing was sent."""
