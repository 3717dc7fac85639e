"""The listener and ``connect`` under load, over real loopback sockets: a full listener
turns its oldest unproven connection away with BUSY, clients tell BUSY from a rejection and
retry it within a bound, and peers proving the secret get through a flood of 200 idle
connections that reopen as soon as they are closed, with a handful of warning lines."""

from __future__ import annotations

import queue
import socket
import threading
import time
from typing import Any

import pytest

from cairn.runtime.network import (
    AuthenticationError,
    ConnectionClosed,
    FramedConnection,
    FrameKind,
    ListenerBusy,
    client_handshake,
    connect,
    server_handshake,
)
from cairn.runtime.network.admission import RejectionKind
from cairn.runtime.network.auth import BUSY_VERDICT, MAGIC
from cairn.testing.processes import wait_for
from tests.connection_flood import ConnectionFlood
from tests.unit._network import (
    SECRET,
    Accepted,
    collecting_listener,
    read_until_closed,
    rejections,
)


def test_a_full_listener_turns_its_oldest_unproven_connection_away(
    accepted: Accepted,
) -> None:
    with (
        collecting_listener(accepted, max_pending_handshakes=1, proof_timeout=30) as lst,
        socket.create_connection(lst.address) as first,
    ):
        assert first.recv(len(MAGIC)) == MAGIC  # its handshake is pending
        with socket.create_connection(lst.address) as second:
            assert second.recv(len(MAGIC)) == MAGIC  # the newcomer is greeted ...
            # ... and the older one told BUSY (a byte a client tells from a rejection).
            assert read_until_closed(first, timeout=2)[-len(BUSY_VERDICT) :] == BUSY_VERDICT
            assert lst.pending_handshakes == 1
            assert lst.rejections.total[RejectionKind.TURNED_AWAY] == 1


def test_connect_retries_a_busy_listener_until_it_gets_in() -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy_twice:
        hellos: queue.Queue[bytes] = queue.Queue()

        def serve() -> None:
            for _ in range(2):
                sock, _ = busy_twice.accept()
                sock.sendall(MAGIC + bytes(32) + BUSY_VERDICT)
                sock.close()
            sock, _ = busy_twice.accept()
            server_handshake(sock, SECRET, timeout=5)
            hellos.put(FramedConnection(sock).recv()[2])

        threading.Thread(target=serve, daemon=True).start()
        conn = connect(busy_twice.getsockname(), SECRET, b"third time", retry_interval=0.05)
        assert hellos.get(timeout=5) == b"third time"
        conn.close()


def test_a_client_turned_away_is_told_busy_not_rejected(accepted: Accepted) -> None:
    with collecting_listener(accepted, max_pending_handshakes=1) as lst:
        raw = socket.create_connection(lst.address)
        result: queue.Queue[FramedConnection | BaseException] = queue.Queue()

        def slow_client() -> None:
            try:
                client_handshake(raw, SECRET, timeout=5)
            except BaseException as exc:
                result.put(exc)

        # The raw socket's greeting is waiting; the next connection displaces it before
        # the slow client even answers, so its handshake meets the BUSY verdict.
        assert raw.recv(len(MAGIC), socket.MSG_PEEK) == MAGIC
        conn = connect(lst.address, SECRET, hello=b"prompt")
        assert accepted.get(timeout=5)[1] == b"prompt"
        threading.Thread(target=slow_client, daemon=True).start()
        busy = result.get(timeout=5)
        assert isinstance(busy, ListenerBusy) and isinstance(busy, ConnectionClosed)
        assert not isinstance(busy, AuthenticationError)
        conn.close()


def test_connect_gives_up_on_a_listener_that_stays_busy() -> None:
    with socket.create_server(("127.0.0.1", 0)) as always_busy:
        turned_away = 0

        def serve() -> None:
            nonlocal turned_away
            while True:
                try:
                    sock, _ = always_busy.accept()
                except OSError:
                    return
                sock.sendall(MAGIC + bytes(32) + BUSY_VERDICT)
                sock.close()
                turned_away += 1

        threading.Thread(target=serve, daemon=True).start()
        start = time.monotonic()
        with pytest.raises(ListenerBusy, match=r"turned this connection away \d+ times in 0.8 s"):
            connect(always_busy.getsockname(), SECRET, retry_interval=0.05, busy_timeout=0.8)
        assert 0.4 < time.monotonic() - start < 3
        assert turned_away >= 3


def test_a_server_closing_before_its_verdict_counts_as_busy() -> None:
    with socket.create_server(("127.0.0.1", 0)) as closing:

        def serve() -> None:
            sock, _ = closing.accept()
            sock.close()

        threading.Thread(target=serve, daemon=True).start()
        with pytest.raises(ListenerBusy, match="closed the connection during the handshake"):
            connect(closing.getsockname(), SECRET, busy_timeout=0)


# -- under a flood of idle connections ------------------------------------------------------

FLOOD = 200


@pytest.mark.parametrize(
    "options",
    [{}, {"max_pending_handshakes": 32, "proof_timeout": 0.5}],
    ids=["defaults", "flood-exceeds-capacity"],
)
def test_peers_proving_the_secret_get_through_a_flood_of_idle_connections(
    accepted: Accepted, server_log: pytest.LogCaptureFixture, options: dict[str, Any]
) -> None:
    with (
        collecting_listener(accepted, **options) as lst,
        ConnectionFlood(lambda: [lst.address], count=FLOOD, max_seconds=60) as flood,
    ):
        flood.wait_started()
        if options:  # the peers register while the flood overflows the listener and comes back
            wait_for(
                lambda: lst.rejections.total[RejectionKind.TURNED_AWAY] > FLOOD - 32,
                10,
                0.01,
                "the flood overflowing the listener",
            )
        start = time.monotonic()
        for i in range(10):
            conn = connect(lst.address, SECRET, hello=f"worker-{i}".encode(), timeout=5)
            server, hello = accepted.get(timeout=5)
            assert hello == f"worker-{i}".encode()
            conn.send(FrameKind.DATA, 3, b"through")
            assert server.recv() == (FrameKind.DATA, 3, b"through")
            conn.close()
            server.close()
        assert time.monotonic() - start < 10, "ten registrations must take seconds at most"
        assert lst.pending_handshakes <= lst._max_pending
        turned_away = lst.rejections.total[RejectionKind.TURNED_AWAY]
    if options:
        assert turned_away > FLOOD - 32  # the flood overflowed the listener, and came back
    # Thousands of rejections, a handful of lines: one per kind and interval, one summary.
    assert len(rejections(server_log)) <= 2 * len(RejectionKind)
