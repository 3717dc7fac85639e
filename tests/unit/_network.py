"""Helpers for the wire-layer tests over real loopback sockets (``test_network*.py``).

Everything here is a plain function or constant; the fixtures built on them (``accepted``,
``server_log``) live in ``tests/unit/conftest.py``. No helper authenticates unless it says so.
"""

from __future__ import annotations

import linecache
import logging
import queue
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn.runtime.network import FramedConnection, Listener, new_secret

__all__ = [
    "SECRET",
    "SERVER_LOG",
    "Accepted",
    "blocked_in",
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


def blocked_in(thread: threading.Thread, call: str) -> bool:
    """Whether ``thread`` sleeps in the kernel inside ``call`` (e.g. ``"recv_into("``): its
    innermost Python line makes that call, and (where Linux's ``/proc`` shows it) the thread
    waits in the kernel for something else than a lock, such as the GIL."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None or call not in linecache.getline(frame.f_code.co_filename, frame.f_lineno):
        return False
    try:
        wchan = Path(f"/proc/self/task/{thread.native_id}/wchan").read_text().strip()
    except OSError:
        return True  # no /proc: the line is all there is to see
    return wchan not in ("", "0") and "futex" not in wchan
