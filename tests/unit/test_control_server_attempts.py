"""The job master's control server closes the registration of a worker of an attempt older
than the one being launched (``admit_from``): a worker of a torn-down attempt that starts
late stops at once instead of waiting for a peer table beside the next attempt's workers.
Real loopback connections."""

from __future__ import annotations

import pickle
import queue

import pytest

from cairn.deploy import control_messages as p
from cairn.deploy.control_server import ControlServer
from cairn.ids import AttemptNumber
from cairn.runtime.network import connect, new_secret
from cairn.runtime.network.errors import ConnectionClosed


def _register(server: ControlServer, secret: bytes, attempt: int) -> object:
    hello = p.RegisterWorker(AttemptNumber(attempt), 0, ("127.0.0.1", 1), 4242, "host")
    return connect(server.address, secret, pickle.dumps(hello, protocol=5))


def test_a_registration_of_an_earlier_attempt_is_closed() -> None:
    secret = new_secret()
    server = ControlServer("127.0.0.1", secret)
    try:
        server.admit_from(AttemptNumber(3))
        stale = _register(server, secret, 2)
        with pytest.raises(ConnectionClosed):
            stale.recv()  # type: ignore[attr-defined]
        current = _register(server, secret, 3)
        envelope = server.inbox.get(timeout=5)
        assert (envelope.attempt, type(envelope.message)) == (3, p.RegisterWorker)
        with pytest.raises(queue.Empty):
            server.inbox.get(timeout=0.2)  # nothing of attempt 2 reached the job master
        assert server.connected(AttemptNumber(3)) == 1
        current.close()  # type: ignore[attr-defined]
    finally:
        server.close()
