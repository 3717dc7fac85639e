"""A bounded flood of idle loopback connections, as any local process could open them.

Invariant: the flood connects only to loopback addresses, never sends a byte, holds at most
``count`` connections and ends after ``max_seconds`` at the latest; a connection the listener
closes is reopened at once (to one of the targets of that moment, round robin).
"""

from __future__ import annotations

import contextlib
import itertools
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType

from cairn.testing.processes import wait_for

Address = tuple[str, int]
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class ConnectionFlood:
    """``with ConnectionFlood(lambda: [listener.address], count=200):`` floods while open.

    ``targets`` is called for every (re)connection, so a test can follow listeners that
    appear (the workers of a new attempt). ``opened`` counts connections made, ``closed``
    those the listeners closed.
    """

    def __init__(
        self,
        targets: Callable[[], Sequence[Address]],
        count: int = 200,
        max_seconds: float = 60.0,
    ) -> None:
        if not 0 < count <= 1000:
            raise ValueError("a test flood holds 1 to 1000 connections")
        self._targets = targets
        self._count = count
        self._max_seconds = max_seconds
        self._stop = threading.Event()
        self._turn = itertools.count()
        self.opened = 0
        self.closed = 0
        self.held = 0
        self._thread = threading.Thread(target=self._run, name="connection-flood", daemon=True)

    def __enter__(self) -> ConnectionFlood:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(10)

    def wait_started(self, timeout: float = 10.0) -> None:
        """Wait until the flood opened ``count`` connections (a listener that turns them
        away as fast as they come may never see all of them open at once)."""
        wait_for(
            lambda: self.opened >= self._count,
            timeout,
            0.01,
            lambda: f"the flood's {self._count} connections (it opened only {self.opened})",
        )

    def _open(self) -> socket.socket | None:
        targets = list(self._targets())
        if not targets:
            return None
        host, port = targets[next(self._turn) % len(targets)]
        if host not in LOOPBACK:
            raise ValueError(f"a test flood stays on loopback, not {host}")
        try:
            sock = socket.create_connection((host, port), timeout=1.0)
        except OSError:
            return None
        sock.setblocking(False)
        self.opened += 1
        return sock

    def _run(self) -> None:
        end = time.monotonic() + self._max_seconds
        with selectors.DefaultSelector() as selector:
            try:
                while not self._stop.is_set() and time.monotonic() < end:
                    while self.held < self._count and not self._stop.is_set():
                        sock = self._open()
                        if sock is None:
                            break
                        selector.register(sock, selectors.EVENT_READ)
                        self.held += 1
                    for key, _ in selector.select(0.05):
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        try:
                            alive = bool(sock.recv(4096))  # the greeting; never answered
                        except BlockingIOError:
                            continue
                        except OSError:
                            alive = False
                        if not alive:
                            selector.unregister(sock)
                            sock.close()
                            self.held -= 1
                            self.closed += 1
            finally:
                for key in list(selector.get_map().values()):
                    with contextlib.suppress(OSError):
                        key.fileobj.close()  # type: ignore[union-attr]
                self.held = 0
