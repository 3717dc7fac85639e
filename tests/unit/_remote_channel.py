"""A remote output channel over a real loopback connection, with its receiving input channel,
for tests of credits, backlogs, buffer sizes and wake-ups (``test_runtime_*.py``).

The sender's wake-up sets ``woken``; errors of either side land in ``errors``, which a test
asserts empty at its end. Use it as a context manager: leaving closes sender and listener.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from cairn.runtime.channels import (
    ConnectionSender,
    InputChannel,
    RemoteOutputChannel,
    receive_loop,
)
from cairn.runtime.input_gate import InputGate
from cairn.runtime.network import Listener, connect, new_secret
from cairn.testing.processes import wait_for

__all__ = ["RemoteChannel", "take_batches"]


class RemoteChannel:
    """``channel`` (sending side, ``initial_credits`` and ``max_backlog``) feeds ``input``
    (receiving side, channel ``channel_id``) over an authenticated loopback connection."""

    def __init__(self, channel_id: int, *, initial_credits: int = 1, max_backlog: int = 2) -> None:
        secret = new_secret()
        self.input = InputChannel(channel_id)
        inputs = {channel_id: self.input}
        self.errors: list[BaseException] = []
        self.woken = threading.Event()  # the task's wake-up, as the sender sees it

        def on_connection(conn: Any, hello: bytes) -> None:
            self.input.attach_remote(conn)
            receive_loop(conn, inputs, threading.Event(), self.errors.append)

        self.listener = Listener("127.0.0.1", secret, on_connection)
        self.sender = ConnectionSender(
            connect(self.listener.address, secret, b"data"),
            self.woken.set,
            self.errors.append,
            "test",
        )
        self.channel = RemoteOutputChannel(
            channel_id, self.sender, initial_credits=initial_credits, max_backlog=max_backlog
        )
        self.sender.register(self.channel)
        self.sender.start()

    def close(self) -> None:
        self.sender.close()
        self.listener.close()

    def __enter__(self) -> RemoteChannel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def take_batches(gate: InputGate, count: int, timeout: float = 5.0) -> list[Any]:
    """The next ``count`` batches the gate hands out, waiting up to ``timeout`` seconds for
    them (each one taken returns a credit to the sender)."""
    batches: list[Any] = []

    def got_all() -> bool:
        while len(batches) < count and (item := gate.poll()) is not None:
            batches.append(item[1])
        return len(batches) >= count

    wait_for(got_all, timeout, 0.01, lambda: f"{count} batches (got {len(batches)})")
    return batches
