"""Cairn's wire layer: authenticated, framed TCP connections between workers and master.

Layers, bottom up: ``tls`` (optional) makes a connection a TLS session with mutual
certificate authentication (``certificates`` makes a job's own CA for it); ``auth`` proves
the per-job secret in both directions on a raw socket (nothing is unpickled before that);
``framing`` carries ``(kind, channel, payload)`` frames; ``admission`` decides which
unproven connection a full listener turns away; ``server`` binds a ``Listener`` to one
explicit address and ``connect``s to it.
"""

from cairn.runtime.network.auth import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    WIRE_VERSION,
    client_handshake,
    new_secret,
    server_handshake,
)
from cairn.runtime.network.errors import (
    AuthenticationError,
    ConnectionClosed,
    FrameRefused,
    FrameTooLarge,
    HandshakeTimeout,
    ListenerBusy,
)
from cairn.runtime.network.frames import FrameKind, pack_credit, unpack_credit
from cairn.runtime.network.framing import HEADER, MAX_PAYLOAD, FramedConnection, Payload
from cairn.runtime.network.server import Listener, OnConnection, connect

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "HEADER",
    "MAX_PAYLOAD",
    "WIRE_VERSION",
    "AuthenticationError",
    "ConnectionClosed",
    "FrameKind",
    "FrameRefused",
    "FrameTooLarge",
    "FramedConnection",
    "HandshakeTimeout",
    "Listener",
    "ListenerBusy",
    "OnConnection",
    "Payload",
    "client_handshake",
    "connect",
    "new_secret",
    "pack_credit",
    "server_handshake",
    "unpack_credit",
]
