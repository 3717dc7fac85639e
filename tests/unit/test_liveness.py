"""Dead-peer detection: every TCP connection Cairn frames fails within the peer timeout when
the peer's host stops acknowledging (a partition), instead of after TCP's 15 minutes."""

from __future__ import annotations

import socket

from cairn.runtime.network.framing import FramedConnection
from cairn.runtime.network.liveness import PEER_TIMEOUT_S, detect_dead_peer


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    return client, accepted


def test_framed_tcp_connections_give_up_on_a_silent_peer_within_the_timeout() -> None:
    client, accepted = _tcp_pair()
    try:
        for sock in (client, accepted):
            FramedConnection(sock)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            timeout_ms = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            assert timeout_ms == int(PEER_TIMEOUT_S * 1000)
            idle = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
            interval = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)
            probes = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)
            # An idle connection is probed and dropped within the same bound.
            assert idle + interval * probes <= PEER_TIMEOUT_S
    finally:
        client.close()
        accepted.close()


def test_other_sockets_are_left_alone() -> None:
    a, b = socket.socketpair()
    try:
        detect_dead_peer(a)
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
    finally:
        a.close()
        b.close()
