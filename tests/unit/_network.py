"""Helpers for the wire-layer tests over real loopback sockets (``test_network*.py``).

Everything here is a plain function or constant; the fixtures built on them (``accepted``,
``server_log``) live in ``tests/unit/conftest.py``. No helper authenticates unless it says so.
"""

from __future__ import annotations

import logging
import queue
import socket
from typing import Any

import pytest

from cairn.runtime.network import FramedConnection, Listener, new_secret

__all__ = [
    "SECRET",
    "SERVER_LOG",
    "Accepted",
    "collecting_listener",
    "read_until_closed",
    "rejections",
    "tcp_pair",
]

SECRET = new_secret()
SERVER_LOG = "cairn.runtime.network.server"
Accepted = queue.Queue[tuple[FramedConnection, bytes]]


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two connected TCP sockets over 127.0.0.1 (no authentication)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    return client, accepted


def read_until_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the peer sends until it closes; fails if it does not close in time."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def rejections(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warning lines logged so far (the listener's rejections, with ``server_log``)."""
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def collecting_listener(accepted: Accepted, **options: Any) -> Listener:
    """A listener on 127.0.0.1 that queues every accepted ``(connection, hello)``."""
    return Listener("127.0.0.1", SECRET, lambda conn, hello: accepted.put((conn, hello)), **options)
