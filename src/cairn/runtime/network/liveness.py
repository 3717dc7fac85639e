"""Dead-peer detection on every TCP connection Cairn opens: a partitioned peer is noticed by
the kernel within ``PEER_TIMEOUT_S`` instead of TCP's default of 15 minutes of retransmits.

Invariant: a connection whose peer stops acknowledging — data sent, or keepalive probes on an
idle connection — fails with an ``OSError`` (``ETIMEDOUT``) after about ``PEER_TIMEOUT_S``
seconds, on both ends; a peer that is only slow (a busy or paused process: its kernel still
acknowledges) is never cut. The worker treats its lost control connection as the end of its
attempt (it stops processing and never commits), the job master treats it as a lost worker
and restarts the attempt on the workers it can reach.

>>> import socket
>>> a, b = socket.socketpair()
>>> detect_dead_peer(a)  # not TCP: nothing to set
>>> a.close(); b.close()
"""

from __future__ import annotations

import socket

__all__ = ["PEER_TIMEOUT_S", "detect_dead_peer"]

PEER_TIMEOUT_S = 10.0
_KEEPALIVE_IDLE_S = 2
_KEEPALIVE_INTERVAL_S = 2
_KEEPALIVE_PROBES = 4


def detect_dead_peer(sock: socket.socket, timeout_s: float = PEER_TIMEOUT_S) -> None:
    """Keepalive probes on an idle connection and ``TCP_USER_TIMEOUT`` on unacknowledged
    data, so a peer cut off by the network fails the connection in about ``timeout_s``."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", _KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", _KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", _KEEPALIVE_PROBES),
        ("TCP_USER_TIMEOUT", int(timeout_s * 1000)),
    ):
        option = getattr(socket, name, None)  # Linux has all four; others keep defaults
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
