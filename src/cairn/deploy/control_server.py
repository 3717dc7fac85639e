"""The job master's control endpoint: authenticated connections from workers (over TLS
with ``security.ssl.internal.enabled``).

Invariant: every message that reaches the job master's queue is tagged with the attempt and
worker that sent it, and a lost connection becomes an explicit ``ConnectionLost`` message, so
the job master's single thread sees every event in one ordered stream.
"""

from __future__ import annotations

import logging
import pickle
import queue
import threading
from dataclasses import dataclass
from typing import Any

from cairn.deploy import control_messages as p
from cairn.ids import AttemptNumber
from cairn.runtime.network.errors import ConnectionClosed
from cairn.runtime.network.frames import FrameKind
from cairn.runtime.network.framing import FramedConnection
from cairn.runtime.network.server import Listener
from cairn.runtime.network.tls import InternalTls
from cairn.settings import DEFAULT_MAX_FRAME_SIZE, TlsFiles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLost:
    attempt: AttemptNumber
    worker_index: int


@dataclass(frozen=True)
class Envelope:
    attempt: AttemptNumber
    worker_index: int
    message: Any


class ControlServer:
    """``max_frame_size``: the largest control frame (bytes) either way on a registered
    worker's connection (the job's ``cairn.network.max-frame-size``); ``tls``: the files of
    ``security.ssl.internal.*`` (None: no TLS)."""

    def __init__(
        self,
        host: str,
        secret: bytes,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        tls: TlsFiles | None = None,
    ) -> None:
        self._max_frame_size = max_frame_size
        self.inbox: queue.Queue[Envelope] = queue.Queue()
        self._lock = threading.Lock()
        self._workers: dict[tuple[int, int], FramedConnection] = {}
        self._oldest_admitted = 0  # registrations of earlier attempts are closed at once
        self._listener = Listener(host, secret, self._on_connection, tls=InternalTls.of(tls).server)

    @property
    def address(self) -> tuple[str, int]:
        return self._listener.address

    def _on_connection(self, conn: FramedConnection, hello: bytes) -> None:
        reg = pickle.loads(hello)
        if not isinstance(reg, p.RegisterWorker):
            conn.close()
            return
        conn.max_frame_size = self._max_frame_size
        key = (reg.attempt, reg.worker_index)
        with self._lock:
            stale = reg.attempt < self._oldest_admitted
            if not stale:
                self._workers[key] = conn
        if stale:  # a worker of a torn-down attempt, only now started: it stops
            conn.close()
            return
        self.inbox.put(Envelope(reg.attempt, reg.worker_index, reg))
        try:
            while True:
                _kind, _ch, payload = conn.recv()
                self.inbox.put(Envelope(reg.attempt, reg.worker_index, pickle.loads(payload)))
        except (ConnectionClosed, OSError):
            pass
        finally:
            with self._lock:
                if self._workers.get(key) is conn:
                    del self._workers[key]
            self.inbox.put(
                Envelope(
                    reg.attempt, reg.worker_index, ConnectionLost(reg.attempt, reg.worker_index)
                )
            )

    def send(self, attempt: AttemptNumber, worker_index: int, message: Any) -> bool:
        with self._lock:
            conn = self._workers.get((attempt, worker_index))
        if conn is None:
            return False
        try:
            conn.send(FrameKind.CONTROL, 0, pickle.dumps(message, protocol=5))
            return True
        except (ConnectionClosed, OSError):
            return False

    def broadcast(self, attempt: AttemptNumber, message: Any) -> None:
        with self._lock:
            targets = [w for (a, w) in self._workers if a == attempt]
        for w in targets:
            self.send(attempt, w, message)

    def admit_from(self, attempt: AttemptNumber) -> None:
        """Close, from now on, the registration of any worker of an attempt before
        ``attempt`` (it lost its master: it stops instead of waiting for a peer table)."""
        with self._lock:
            self._oldest_admitted = max(self._oldest_admitted, int(attempt))

    def disconnect_attempt(self, attempt: AttemptNumber) -> None:
        with self._lock:
            conns = [c for (a, _w), c in self._workers.items() if a == attempt]
        for c in conns:
            c.close()

    def connected(self, attempt: AttemptNumber) -> int:
        with self._lock:
            return sum(1 for (a, _w) in self._workers if a == attempt)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            conns = list(self._workers.values())
        for c in conns:
            c.close()
