"""A remote output channel over a real loopback connection, with its receiving input channel,
for tests of credits, backlogs and buffer sizes (``test_runtime_*.py``).

Both ends live on one event loop owned by the test's thread, as a worker's task thread owns
its loop: ``poll`` moves frames (the test calls it, directly or through ``wait``/``holds``).
Errors of either side land in ``errors``, which a test asserts empty at its end. Use it as a
context manager: leaving closes the loop and the listener.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from cairn.runtime.channels import (
    ConnectionSender,
    InputChannel,
    RemoteOutputChannel,
    frame_receiver,
)
from cairn.runtime.input_gate import InputGate
from cairn.runtime.network import Listener, connect, new_secret
from cairn.runtime.network.event_loop import EventLoop
from cairn.runtime.network.loop_connection import LoopConnection
from cairn.testing.processes import holds_for, wait_for

__all__ = ["RemoteChannel", "take_batches"]


class RemoteChannel:
    """``channel`` (sending side, ``initial_credits`` and ``max_backlog``) feeds ``input``
    (receiving side, channel ``channel_id``) over an authenticated loopback connection."""

    def __init__(self, channel_id: int, *, initial_credits: int = 1, max_backlog: int = 2) -> None:
        secret = new_secret()
        self.loop = EventLoop()
        self.input = InputChannel(channel_id, capacity=initial_credits)
        inputs = {channel_id: self.input}
        self.errors: list[BaseException] = []

        def adopt(conn: Any) -> None:  # on the loop's thread, as the worker does
            incoming = LoopConnection.adopt(conn)
            self.input.attach_remote(incoming, self.loop.flush)
            self.loop.register(incoming, frame_receiver(inputs), self.errors.append)

        def on_connection(conn: Any, hello: bytes) -> None:
            self.loop.call_soon(lambda: adopt(conn))

        self.listener = Listener("127.0.0.1", secret, on_connection)
        outgoing = LoopConnection.adopt(connect(self.listener.address, secret, b"data"))
        self.sender = ConnectionSender(outgoing, self.loop.flush, "test")
        self.loop.register(outgoing, self.sender.on_frames, self.errors.append)
        self.channel = RemoteOutputChannel(
            channel_id, self.sender, initial_credits=initial_credits, max_backlog=max_backlog
        )
        self.sender.register(self.channel)

    def poll(self) -> bool:
        """One turn of the loop (frames in and out); True if it handled any."""
        return self.loop.poll(0.002)

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 5.0) -> None:
        """Turn the loop until ``condition`` holds."""
        wait_for(lambda: (self.poll(), condition())[1], timeout, 0.0, what)

    def holds(self, condition: Callable[[], Any], seconds: float, what: str) -> None:
        """Turn the loop for ``seconds``; ``condition`` must hold throughout."""
        holds_for(lambda: (self.poll(), condition())[1], seconds, 0.0, what)

    def close(self) -> None:
        self.loop.close()
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


def take_batches(
    remote: RemoteChannel, gate: InputGate, count: int, timeout: float = 5.0
) -> list[Any]:
    """The next ``count`` batches the gate hands out, turning the loop for up to ``timeout``
    seconds (each batch taken counts a credit for the sender)."""
    batches: list[Any] = []

    def got_all() -> bool:
        remote.poll()
        while len(batches) < count and (item := gate.poll()) is not None:
            batches.append(item[1])
        return len(batches) >= count

    wait_for(got_all, timeout, 0.0, lambda: f"{count} batches (got {len(batches)})")
    return batches
