"""A remote channel's frames go out on the task thread when nothing waits before them
(``ConnectionSender.enqueue``): no send-thread wake-up per batch below saturation. Frames
that lack a credit, or would overtake queued ones, wait in the backlog for the send thread,
and the connection keeps each channel's order either way. Real loopback connections."""

from __future__ import annotations

import pickle
import queue
import time
from typing import Any

from cairn.events import EndOfPartition
from cairn.runtime.channels import ConnectionSender, RemoteOutputChannel
from cairn.runtime.network import FramedConnection, Listener, connect
from cairn.runtime.network.frames import FrameKind, pack_credit

from ._network import SECRET

Frame = tuple[int, int, bytes]


class Peer:
    """The receiving end: every frame it reads, and its connection to send credits back."""

    def __init__(self) -> None:
        self.frames: queue.Queue[Frame] = queue.Queue()
        self.conns: queue.Queue[FramedConnection] = queue.Queue()
        self.listener = Listener("127.0.0.1", SECRET, self._serve)

    def _serve(self, conn: FramedConnection, hello: bytes) -> None:
        self.conns.put(conn)
        try:
            while True:
                self.frames.put(conn.recv())
        except Exception:
            pass

    def take(self, n: int, timeout: float = 10.0) -> list[Frame]:
        return [self.frames.get(timeout=timeout) for _ in range(n)]

    def nothing_more(self, wait_s: float = 0.2) -> bool:
        time.sleep(wait_s)
        return self.frames.empty()


def _sender(peer: Peer, credits: int) -> tuple[ConnectionSender, RemoteOutputChannel]:
    sender = ConnectionSender(
        connect(peer.listener.address, SECRET, b"data"), lambda: None, _raise, "test"
    )
    channel = RemoteOutputChannel(7, sender, initial_credits=credits)
    sender.register(channel)
    return sender, channel


def _raise(exc: BaseException) -> None:
    raise AssertionError(f"sender error: {exc!r}")


def _batch(frame: Frame) -> Any:
    kind, channel, payload = frame
    assert (kind, channel) == (FrameKind.DATA, 7)
    return pickle.loads(payload)


def test_a_batch_with_credit_goes_out_on_the_calling_thread() -> None:
    peer = Peer()
    sender, channel = _sender(peer, credits=2)  # the send thread is never started
    try:
        channel.send_batch([1, 2])
        channel.send_batch([3])
        assert [_batch(f) for f in peer.take(2)] == [[1, 2], [3]]
        assert channel.credits == 0 and not channel.backlog
    finally:
        sender.close()
        peer.listener.close()


def test_without_credit_batches_and_the_events_behind_them_wait_in_order() -> None:
    peer = Peer()
    sender, channel = _sender(peer, credits=1)
    try:
        channel.send_batch(["a"])  # direct: the one credit
        channel.send_batch(["b"])  # no credit: queued
        channel.send_event(EndOfPartition())  # needs no credit, but must not overtake "b"
        assert [_batch(f) for f in peer.take(1)] == [["a"]]
        assert len(channel.backlog) == 2 and peer.nothing_more()
        sender.start()
        assert peer.nothing_more()  # the send thread still waits for a credit
        back = peer.conns.get(timeout=5)
        back.send(FrameKind.CREDIT, 7, pack_credit(1))
        second, third = peer.take(2)
        assert _batch(second) == ["b"]
        assert third[0] == FrameKind.EVENT and isinstance(pickle.loads(third[2]), EndOfPartition)
        assert not channel.backlog and channel.credits == 0
        # A credit to an empty backlog: the next batch goes out directly again.
        back.send(FrameKind.CREDIT, 7, pack_credit(1))
        deadline = time.monotonic() + 5
        while channel.credits < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        channel.send_batch(["c"])
        assert not channel.backlog
        assert [_batch(f) for f in peer.take(1)] == [["c"]]
    finally:
        sender.close()
        peer.listener.close()
