"""The task thread's event loop and its non-blocking framed connections: frames arrive whole
however the bytes are cut, the frame cap holds, output the socket refuses waits and goes as it
drains, a wake-up is never lost, and a lingering sleep is not ended by input."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from cairn.runtime.network.errors import ConnectionClosed, FrameRefused
from cairn.runtime.network.event_loop import EventLoop
from cairn.runtime.network.framing import HEADER, FramedConnection
from cairn.runtime.network.loop_connection import LoopConnection
from cairn.testing.processes import wait_for


def _pair(cap: int = 1 << 20, buffer: int = 256 * 1024) -> tuple[socket.socket, LoopConnection]:
    raw, theirs = socket.socketpair()  # AF_UNIX: what one side sent, the other can read now
    return raw, LoopConnection(theirs, max_frame_size=cap, recv_buffer_size=buffer)


def _frame(kind: int, channel: int, payload: bytes) -> bytes:
    return HEADER.pack(kind, channel, len(payload)) + payload


def test_frames_cut_at_every_byte_arrive_whole_and_in_order() -> None:
    raw, conn = _pair(buffer=64)
    frames = [(1, i, bytes([i]) * (i * 7)) for i in range(12)]  # some longer than the buffer
    wire = b"".join(_frame(*f) for f in frames)
    got = []
    try:
        for i in range(len(wire)):
            raw.sendall(wire[i : i + 1])
            got += conn.read_frames()  # what this byte completed
        assert got == frames
    finally:
        raw.close()
        conn.close()


def test_bytes_read_ahead_by_the_handshake_are_parsed_first() -> None:
    mine, theirs = socket.socketpair()
    framed = FramedConnection(theirs)
    mine.sendall(_frame(5, 0, b"hello") + _frame(1, 3, b"batch") + _frame(2, 3, b"ev")[:4])
    assert framed.recv() == (5, 0, b"hello")  # the blocking reader buffered what followed
    conn = LoopConnection.adopt(framed)
    assert framed.closed
    assert conn.buffered_frames() == [(1, 3, b"batch")]
    mine.sendall(_frame(2, 3, b"ev")[4:])
    assert wait_for(conn.read_frames, 1, 0.0) == [(2, 3, b"ev")]
    mine.close()
    conn.close()


def test_a_header_over_the_cap_is_refused_and_closes_the_connection() -> None:
    raw, conn = _pair(cap=1000)
    raw.sendall(HEADER.pack(1, 0, 1001))
    with pytest.raises(FrameRefused, match="1,001 bytes, over this connection's cap of 1,000"):
        wait_for(conn.read_frames, 1, 0.0)
    assert conn.closed
    raw.close()


def test_a_closed_peer_is_a_closed_connection() -> None:
    raw, conn = _pair()
    raw.sendall(_frame(1, 0, b"abc")[:5])
    raw.close()
    with pytest.raises(ConnectionClosed, match="mid-frame"):
        wait_for(conn.read_frames, 1, 0.0)
    conn.close()


def test_output_the_socket_refuses_waits_and_goes_as_the_peer_drains() -> None:
    mine, theirs = socket.socketpair()
    for s in (mine, theirs):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sender = LoopConnection(mine, max_frame_size=1 << 22)
    receiver = LoopConnection(theirs, max_frame_size=1 << 22)
    loop = EventLoop()
    got: list[tuple[int, int, bytes]] = []
    payload = bytes(range(256)) * 4096  # 1 MiB: far more than both socket buffers
    sender.queue(1, 9, payload)
    assert not sender.flush(), "the socket took part of it; the rest waits"
    loop.register(sender, got.extend, pytest.fail)
    loop.register(receiver, got.extend, pytest.fail)
    wait_for(lambda: (loop.poll(0.01), got)[1], 10, 0.0, "the whole frame")
    assert got == [(1, 9, payload)] and not sender.has_output
    loop.close()


def test_a_wake_from_another_thread_ends_a_sleep_and_one_before_skips_it() -> None:
    loop = EventLoop()
    waker = threading.Timer(0.05, loop.wake)
    started = time.monotonic()
    waker.start()
    assert loop.poll(30.0)
    assert time.monotonic() - started < 10
    loop.wake()  # before the sleep: the next poll does not sleep
    started = time.monotonic()
    assert loop.poll(30.0)
    assert time.monotonic() - started < 10
    calls: list[str] = []
    threading.Thread(target=lambda: loop.call_soon(lambda: calls.append("ran"))).start()
    wait_for(lambda: (loop.poll(1.0), calls)[1], 10, 0.0, "the queued call")
    assert calls == ["ran"]
    loop.close()


def test_a_lingering_sleep_is_not_ended_by_input_but_a_wake_ends_it() -> None:
    raw, conn = _pair()
    loop, got = EventLoop(), []
    loop.register(conn, got.extend, pytest.fail)
    raw.sendall(_frame(1, 0, b"x"))  # input waiting before the sleep starts
    started = time.monotonic()
    assert loop.poll(0.2, wake_on_input=False)  # the frame is read when the sleep ends
    assert time.monotonic() - started >= 0.19, "input did not end the lingering sleep"
    assert got == [(1, 0, b"x")]
    threading.Timer(0.01, loop.wake).start()
    started = time.monotonic()
    loop.poll(30.0, wake_on_input=False)
    assert time.monotonic() - started < 10, "a wake ends it"
    raw.close()
    loop.close()
