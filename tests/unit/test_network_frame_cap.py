"""The frame size cap (``cairn.network.max-frame-size``) over real loopback sockets: a peer's
header is checked before anything is allocated for it, senders refuse oversized frames, and a
remote channel names the operator and the edge of a batch it cannot ship."""

from __future__ import annotations

import fcntl
import pickle
import queue
import socket
import struct
import termios
import threading
import tracemalloc
from typing import Any

import psutil
import pytest

from cairn.common.exceptions import ConfigurationError
from cairn.datastream import StreamExecutionEnvironment
from cairn.graph.transformations import PartitionKind
from cairn.runtime.channels import ConnectionSender, RemoteOutputChannel
from cairn.runtime.edge_errors import BatchTooLarge, EdgeLabel, RecordSerializationError
from cairn.runtime.network import (
    FramedConnection,
    FrameKind,
    Listener,
    client_handshake,
    connect,
)
from cairn.runtime.network.errors import ConnectionClosed, FrameRefused, FrameTooLarge
from cairn.runtime.network.event_loop import EventLoop
from cairn.runtime.network.loop_connection import LoopConnection
from cairn.settings import DEFAULT_MAX_FRAME_SIZE
from cairn.testing.processes import holds_for, wait_for

from ._network import SECRET, tcp_pair

MiB = 1024 * 1024


def header(kind: int, channel: int, length: int) -> bytes:
    return struct.pack("!BiI", kind, channel, length)


def test_authenticated_peer_announcing_2_gib_is_refused_without_allocating_it() -> None:
    outcome: queue.Queue[BaseException | tuple[int, int, bytes]] = queue.Queue()

    def serve(conn: FramedConnection, hello: bytes) -> None:
        try:
            outcome.put(conn.recv())
        except BaseException as exc:
            outcome.put(exc)

    tracemalloc.start()
    try:
        with Listener("127.0.0.1", SECRET, serve) as listener:
            sock = socket.create_connection(listener.address)
            client_handshake(sock, SECRET, timeout=5)
            sock.settimeout(5)
            sock.sendall(header(FrameKind.HELLO, 0, 5) + b"hello")
            sock.sendall(header(FrameKind.DATA, 0, 2**31) + b"x" * 1000)
            result = outcome.get(timeout=10)
            _, peak = tracemalloc.get_traced_memory()
            assert sock.recv(1) == b""  # the receiver closed the connection
            sock.close()
    finally:
        tracemalloc.stop()
    assert isinstance(result, FrameRefused), result
    assert isinstance(result, ConnectionClosed)  # reader loops treat it as a lost peer
    message = str(result)
    assert "2,147,483,648 bytes" in message
    assert f"{DEFAULT_MAX_FRAME_SIZE:,} bytes" in message
    assert "cairn.network.max-frame-size" in message
    assert peak < 16 * MiB, f"{peak:,} bytes allocated while refusing the frame"


def test_a_frame_at_the_cap_passes_and_one_byte_more_is_refused() -> None:
    a, b = tcp_pair()
    with FramedConnection(a) as sender, FramedConnection(b, max_frame_size=MiB) as receiver:
        payload = bytes(range(256)) * (MiB // 256)
        sender.send(FrameKind.DATA, 3, payload)
        sender.send(FrameKind.DATA, 4, payload[:-1])
        assert receiver.recv() == (FrameKind.DATA, 3, payload)
        assert receiver.recv() == (FrameKind.DATA, 4, payload[:-1])
        sender.send(FrameKind.DATA, 5, payload + b"!")
        with pytest.raises(FrameRefused, match=r"frame of 1,048,577 bytes.* cap of 1,048,576"):
            receiver.recv()
        assert receiver.closed


def _unread_bytes(sock: socket.socket) -> int:
    """Bytes in ``sock``'s receive queue, not yet read by anyone (``FIONREAD``)."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0])


def test_frames_announced_under_the_cap_cost_memory_as_their_bytes_arrive() -> None:
    # 8 peers each announce a frame just under the 64 MiB cap and send 1 KiB of it: the
    # receivers must hold about what arrived, not 8 x 64 MiB (one such frame's worth of
    # RSS growth in total is the bound; allocating ahead would add 512 MiB).
    process = psutil.Process()
    pairs = [tcp_pair() for _ in range(8)]
    receivers = [FramedConnection(b) for _, b in pairs]
    results: queue.Queue[BaseException | tuple[int, int, bytes]] = queue.Queue()

    def read(conn: FramedConnection) -> None:
        try:
            results.put(conn.recv())
        except BaseException as exc:
            results.put(exc)

    before = process.memory_info().rss
    threads = [threading.Thread(target=read, args=(r,), daemon=True) for r in receivers]
    for thread in threads:
        thread.start()
    for a, _ in pairs:
        a.sendall(header(FrameKind.DATA, 0, DEFAULT_MAX_FRAME_SIZE - 1) + b"x" * 1024)
    # Every reader has taken its header and 1 KiB off its socket: it waits for the rest.
    wait_for(
        lambda: all(_unread_bytes(b) == 0 for _, b in pairs),
        10,
        0.01,
        lambda: f"readers took what arrived: {[_unread_bytes(b) for _, b in pairs]} unread",
    )
    assert all(thread.is_alive() for thread in threads), list(results.queue)
    growth = process.memory_info().rss - before
    for a, _ in pairs:
        a.close()
    for thread in threads:
        thread.join(timeout=5)
    outcomes = [results.get(timeout=1) for _ in pairs]
    for r in receivers:
        r.close()
    assert all(isinstance(o, ConnectionClosed) for o in outcomes), outcomes
    assert "mid-frame" in str(outcomes[0])
    assert growth < 32 * MiB, f"RSS grew {growth / MiB:.0f} MiB for 8 KiB received"


def test_a_large_frame_arriving_in_pieces_is_received_whole() -> None:
    a, b = tcp_pair()
    with FramedConnection(a) as sender, FramedConnection(b, recv_buffer_size=4096) as receiver:
        payload = bytes(range(251)) * 4000  # ~1 MB: many refills of a 4 KiB buffer
        thread = threading.Thread(target=sender.send, args=(FrameKind.DATA, 9, payload))
        thread.start()
        assert receiver.recv() == (FrameKind.DATA, 9, payload)
        thread.join()


def test_a_sender_refuses_a_frame_over_its_cap_and_sends_nothing() -> None:
    a, b = tcp_pair()
    with FramedConnection(a, max_frame_size=2048) as sender, FramedConnection(b) as receiver:
        with pytest.raises(FrameTooLarge, match=r"2,049 bytes exceeds .* 2,048 bytes"):
            sender.send(FrameKind.DATA, 0, b"x" * 2049)
        with pytest.raises(FrameTooLarge, match=r"cairn\.network\.max-frame-size"):
            sender.send_many([(FrameKind.DATA, 0, b"a"), (FrameKind.DATA, 0, b"x" * 4096)])
        sender.send(FrameKind.DATA, 1, b"y" * 2048)  # at the cap: sent
        assert receiver.recv() == (FrameKind.DATA, 1, b"y" * 2048)  # nothing came before it


def test_the_cap_is_validated_and_can_be_changed_by_the_owner() -> None:
    a, b = tcp_pair()
    with FramedConnection(a) as conn, FramedConnection(b):
        assert conn.max_frame_size == DEFAULT_MAX_FRAME_SIZE == 64 * MiB
        conn.max_frame_size = 1024
        with pytest.raises(FrameTooLarge):
            conn.send(FrameKind.DATA, 0, b"x" * 1025)
        for bad in (0, -1, 2**32, "64 mb"):
            with pytest.raises(ValueError, match="max_frame_size"):
                conn.max_frame_size = bad  # type: ignore[assignment]
        assert conn.max_frame_size == 1024


def settings_max_frame_size(conf: dict[str, Any] | None = None) -> int:
    env = StreamExecutionEnvironment(conf)
    env.from_collection([1]).print()
    return env.prepare_job().settings.network.max_frame_size


def test_the_cap_is_a_typed_option_carried_in_the_job_settings() -> None:
    assert settings_max_frame_size() == 64 * MiB
    assert settings_max_frame_size({"cairn.network.max-frame-size": "256 mb"}) == 256 * MiB
    assert settings_max_frame_size({"cairn.network.max-frame-size": "1048576"}) == MiB
    for bad, why in (
        ("1023 kb", "between 1048576 and"),
        ("lots", "memory size"),
        ("4 gb", "between"),
        ("-1", "memory size"),
    ):
        with pytest.raises(ConfigurationError, match=f"max-frame-size.*{why}"):
            StreamExecutionEnvironment().configure({"cairn.network.max-frame-size": bad})


# -- a remote channel names what it cannot ship ---------------------------------------------

EDGE = EdgeLabel("to-lock", "lock-uid", "Sink: out", PartitionKind.REBALANCE)


def _remote_channel(**options: Any) -> tuple[RemoteOutputChannel, list[bytes], Any]:
    received: list[bytes] = []

    def serve(conn: FramedConnection, hello: bytes) -> None:
        try:
            while True:
                received.append(conn.recv()[2])
        except ConnectionClosed:
            pass

    listener = Listener("127.0.0.1", SECRET, serve)
    conn = LoopConnection.adopt(connect(listener.address, SECRET, b"data"))
    loop = EventLoop()
    sender = ConnectionSender(conn, loop.flush, "test")
    loop.register(conn, sender.on_frames, lambda exc: None)
    channel = RemoteOutputChannel(1, sender, initial_credits=10, edge=EDGE, **options)
    sender.register(channel)

    def close() -> None:
        loop.close()
        listener.close()

    return channel, received, close


def test_an_unpicklable_record_names_operator_edge_and_type_with_the_cause_chained() -> None:
    channel, _received, close = _remote_channel()
    try:
        with pytest.raises(RecordSerializationError) as info:
            channel.send_batch([1, 2, (3, threading.Lock()), 4])
        assert not channel.backlog  # nothing was queued
    finally:
        close()
    message = str(info.value)
    assert "A record of type tuple" in message
    assert "operator 'to-lock' (uid 'lock-uid') on the rebalance edge to 'Sink: out'" in message
    assert "cannot pickle '_thread.lock' object" in message
    assert isinstance(info.value.__cause__, TypeError)


def records(n: int) -> list[str]:
    return [f"{i:0100d}" for i in range(n)]  # distinct strings: pickle memoizes repeats


def test_a_batch_over_the_cap_fails_in_the_task_naming_the_edge() -> None:
    channel, received, close = _remote_channel(max_frame_size=4096)
    try:
        channel.send_batch(records(10))  # well under the cap: sent
        with pytest.raises(BatchTooLarge) as info:
            channel.send_batch(records(100))
        assert not channel.backlog
        wait_for(lambda: received, 5, 0.01, "the small batch")
        holds_for(lambda: len(received) == 1, 0.1, 0.01, "only the small batch")
        assert pickle.loads(received[0]) == records(10)
    finally:
        close()
    message = str(info.value)
    assert "A batch of 100 records emitted by operator 'to-lock' (uid 'lock-uid')" in message
    assert "over the frame size cap of 4,096 bytes (cairn.network.max-frame-size)" in message
    assert len(pickle.dumps(records(100), protocol=5)) > 4096
