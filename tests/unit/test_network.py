"""Wire layer over real loopback sockets: framing, mutual authentication, listener."""

from __future__ import annotations

import array
import logging
import os
import pickle
import queue
import shlex
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.events import CheckpointBarrier
from cairn.ids import CheckpointId
from cairn.runtime.network import (
    AuthenticationError,
    ConnectionClosed,
    FramedConnection,
    FrameKind,
    HandshakeTimeout,
    Listener,
    client_handshake,
    connect,
    new_secret,
    pack_credit,
    server_handshake,
    unpack_credit,
)
from cairn.runtime.network.admission import RejectionKind
from cairn.runtime.network.auth import MAGIC
from cairn.testing.processes import holds_for, wait_for

from ._network import (
    SECRET,
    SERVER_LOG,
    Accepted,
    blocked_in,
    collecting_listener,
    read_until_closed,
    rejections,
    tcp_pair,
)

# -- helpers -------------------------------------------------------------------------------


class Exploit:
    """A pickle that runs a shell command when loaded: what an attacker would send."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {shlex.quote(str(self.path))}",)


def frame(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack("!BiI", kind, channel, len(payload)) + payload


@pytest.fixture
def listener(accepted: Accepted) -> Iterator[Listener]:
    with collecting_listener(accepted) as lst:
        yield lst


@pytest.fixture
def pair(listener: Listener, accepted: Accepted) -> Iterator[tuple[FramedConnection, ...]]:
    client = connect(listener.address, SECRET, hello=b"worker-1")
    server, hello = accepted.get(timeout=5)
    assert hello == b"worker-1"
    yield client, server
    client.close()
    server.close()


# -- framing -------------------------------------------------------------------------------


def test_round_trip_many_frames_with_large_and_empty_payloads(
    pair: tuple[FramedConnection, FramedConnection],
) -> None:
    client, server = pair
    big = os.urandom(10 * 1024 * 1024)
    frames = [(FrameKind.DATA, i, os.urandom(i * 37 % 5000)) for i in range(2000)]
    frames += [(FrameKind.CREDIT, -5, b""), (FrameKind.EVENT, 2**31 - 1, big)]
    frames += [(FrameKind.CONTROL, 0, b"")]

    def send() -> None:
        client.send_many(frames[:1000])
        for kind, channel, payload in frames[1000:]:
            client.send(kind, channel, payload)

    sender = threading.Thread(target=send)
    sender.start()  # the 10 MB frame blocks until the reader drains it
    received = [server.recv() for _ in frames]
    sender.join(timeout=5)
    assert received == [(int(k), c, p) for k, c, p in frames]

    server.send_many([(FrameKind.CONTROL, 9, b"pong"), (FrameKind.CONTROL, 9, b"")])
    assert client.recv() == (FrameKind.CONTROL, 9, b"pong")
    assert client.recv() == (FrameKind.CONTROL, 9, b"")


def test_tiny_receive_buffer_handles_every_boundary() -> None:
    a, b = tcp_pair()
    with FramedConnection(a) as sender, FramedConnection(b, recv_buffer_size=16) as receiver:
        # Payloads below, at and above the buffer size exercise compaction and the
        # large-frame path; all sent in one burst so frames straddle refills.
        frames = [(1, n, bytes(range(n % 256)) * 2) for n in range(60)]
        sender.send_many(frames)
        assert [receiver.recv() for _ in frames] == frames


def test_concurrent_senders_never_interleave_frames(
    pair: tuple[FramedConnection, FramedConnection],
) -> None:
    client, server = pair
    threads, per_thread = 8, 60
    sizes = [0, 10, 1000, 70_000, 300_000]

    def payload(thread: int, seq: int) -> bytes:
        return struct.pack("!II", thread, seq) + bytes([thread]) * sizes[seq % len(sizes)]

    def send(thread: int) -> None:
        for seq in range(0, per_thread, 2):
            if seq % 4:
                client.send(FrameKind.DATA, thread, payload(thread, seq))
                client.send(FrameKind.DATA, thread, payload(thread, seq + 1))
            else:
                batch = [(FrameKind.DATA, thread, payload(thread, s)) for s in (seq, seq + 1)]
                client.send_many(batch)

    workers = [threading.Thread(target=send, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    next_seq = [0] * threads
    for _ in range(threads * per_thread):
        _, channel, data = server.recv()
        thread, seq = struct.unpack_from("!II", data)
        assert (channel, seq) == (thread, next_seq[thread])
        assert data == payload(thread, seq)
        next_seq[thread] += 1
    for worker in workers:
        worker.join(timeout=5)
    assert next_seq == [per_thread] * threads


def test_objects_round_trip_with_pickle_after_authentication(
    pair: tuple[FramedConnection, FramedConnection],
) -> None:
    client, server = pair
    barrier = CheckpointBarrier(CheckpointId(7), timestamp_ms=123)
    client.send_object(FrameKind.EVENT, 3, barrier)
    assert server.recv_object() == (FrameKind.EVENT, 3, barrier)


def test_frame_fields_are_validated_and_memoryviews_count_bytes() -> None:
    a, b = tcp_pair()
    with FramedConnection(a) as sender, FramedConnection(b) as receiver:
        with pytest.raises(ValueError, match="kind=256"):
            sender.send(256, 0)
        with pytest.raises(ValueError, match="channel"):
            sender.send(1, 2**31)
        ints = array.array("i", [1, 2, 3])
        sender.send(FrameKind.DATA, 0, memoryview(ints))
        assert receiver.recv() == (FrameKind.DATA, 0, ints.tobytes())
    assert unpack_credit(pack_credit(2**32 - 1)) == 2**32 - 1
    with pytest.raises(ValueError):
        pack_credit(-1)
    with pytest.raises(ValueError):
        unpack_credit(b"\0\0")


def test_eof_raises_connection_closed(pair: tuple[FramedConnection, FramedConnection]) -> None:
    client, server = pair
    client.send(FrameKind.DATA, 1, b"last")
    client.close()
    assert server.recv() == (FrameKind.DATA, 1, b"last")
    with pytest.raises(ConnectionClosed):
        server.recv()
    with pytest.raises(ConnectionClosed):  # the peer is gone: writes fail once reset
        for _ in range(1000):
            server.send(FrameKind.DATA, 1, bytes(65536))


@pytest.mark.parametrize("cut", [3, 9, 20], ids=["in-header", "after-header", "in-payload"])
def test_eof_mid_frame_raises_connection_closed(cut: int) -> None:
    a, b = tcp_pair()
    with FramedConnection(b) as receiver:
        a.sendall(frame(1, 0, b"x" * 100)[:cut])
        a.close()
        with pytest.raises(ConnectionClosed, match="mid-frame"):
            receiver.recv()


def test_close_is_idempotent_and_wakes_a_blocked_reader() -> None:
    a, b = tcp_pair()
    conn = FramedConnection(b)
    outcome: queue.Queue[BaseException] = queue.Queue()

    def read() -> None:
        try:
            conn.recv()
        except BaseException as exc:
            outcome.put(exc)

    reader = threading.Thread(target=read)
    reader.start()
    wait_for(lambda: blocked_in(reader, "recv_into("), 5, 0.005, "the reader blocked in recv")
    conn.close()
    conn.close()
    reader.join(timeout=5)
    woken = outcome.get(timeout=1)
    assert isinstance(woken, ConnectionClosed)
    assert "closed locally" in str(woken), "the reader was woken in recv, not refused before"
    assert conn.closed
    with pytest.raises(ConnectionClosed):
        conn.send(FrameKind.DATA, 0, b"late")
    a.close()


# -- authentication ------------------------------------------------------------------------


def run_handshakes(server_secret: bytes, client_secret: bytes) -> dict[str, BaseException | None]:
    a, b = tcp_pair()
    outcome: dict[str, BaseException | None] = {}

    def side(name: str, handshake: Callable[..., None], sock: socket.socket, key: bytes) -> None:
        try:
            handshake(sock, key, timeout=5)
            outcome[name] = None
        except BaseException as exc:
            outcome[name] = exc

    threads = [
        threading.Thread(target=side, args=("server", server_handshake, b, server_secret)),
        threading.Thread(target=side, args=("client", client_handshake, a, client_secret)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    outcome["sockets_closed"] = None if a.fileno() == b.fileno() == -1 else AssertionError()
    return outcome


def test_handshake_succeeds_with_the_same_secret() -> None:
    outcome = run_handshakes(SECRET, SECRET)
    assert outcome["server"] is None and outcome["client"] is None


def test_wrong_secret_fails_on_both_sides_and_closes_both_sockets() -> None:
    outcome = run_handshakes(SECRET, new_secret())
    assert isinstance(outcome["server"], AuthenticationError)
    assert isinstance(outcome["client"], AuthenticationError)
    assert "wrong job secret" in str(outcome["client"])
    assert outcome["sockets_closed"] is None


def test_wrong_secret_is_rejected_by_listener(
    listener: Listener, accepted: Accepted, server_log: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(AuthenticationError, match="wrong job secret"):
        connect(listener.address, new_secret(), hello=b"intruder")
    wait_for(
        lambda: any("failed to prove" in m for m in rejections(server_log)),
        5.0,
        0.01,
        "a 'failed to prove' warning",
    )
    assert "127.0.0.1:" in rejections(server_log)[0]
    assert accepted.empty()


def test_client_rejects_a_server_that_does_not_know_the_secret() -> None:
    with socket.create_server(("127.0.0.1", 0)) as fake:

        def impostor() -> None:
            sock, _ = fake.accept()
            sock.sendall(MAGIC + os.urandom(32))
            sock.recv(72)
            sock.sendall(b"\x01" + os.urandom(32))  # claims success, cannot prove it
            read_until_closed(sock)
            sock.close()

        threading.Thread(target=impostor, daemon=True).start()
        with pytest.raises(AuthenticationError, match="server failed to prove"):
            connect(fake.getsockname(), SECRET, retries=0)


def test_unauthenticated_pickle_is_never_unpickled(tmp_path: Path) -> None:
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(Exploit(control)))
    assert control.exists(), "the exploit must be live for this test to mean anything"

    def consume(conn: FramedConnection, hello: bytes) -> None:
        # Behaves like a real peer handler: unpickles everything it receives.
        pickle.loads(hello)
        while True:
            conn.recv_object()

    target = tmp_path / "pwned"
    exploit = pickle.dumps(Exploit(target), protocol=5)
    with Listener("127.0.0.1", SECRET, consume, handshake_timeout=2) as lst:
        attacks = [
            frame(FrameKind.HELLO, 0, exploit) + frame(FrameKind.DATA, 0, exploit),
            MAGIC + os.urandom(64) + frame(FrameKind.HELLO, 0, exploit),
            MAGIC + bytes(64) + frame(FrameKind.DATA, 0, exploit),
        ]
        for attack in attacks:
            with socket.create_connection(lst.address) as sock:
                sock.sendall(attack)
                read_until_closed(sock)
        holds_for(lambda: not target.exists(), 0.1, 0.01, "no attack ran its command")

        # Positive control: the same bytes from a peer holding the secret do run.
        conn = connect(lst.address, SECRET, hello=pickle.dumps(None))
        conn.send(FrameKind.DATA, 0, exploit)
        wait_for(target.exists, 5.0, 0.01, "the positive control's file")
        conn.close()


def test_non_cairn_client_is_rejected_quickly(
    listener: Listener, accepted: Accepted, server_log: pytest.LogCaptureFixture
) -> None:
    start = time.monotonic()
    with socket.create_connection(listener.address) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: cairn\r\n\r\n")
        greeting = read_until_closed(sock)
    assert time.monotonic() - start < 2  # far below the 10 s handshake timeout
    assert greeting.startswith(b"CAIRN\0")
    wait_for(
        lambda: any("not a Cairn endpoint" in m for m in rejections(server_log)),
        5.0,
        0.01,
        "a 'not a Cairn endpoint' warning",
    )
    assert accepted.empty()


def test_other_wire_version_is_named_in_the_rejection(
    listener: Listener, server_log: pytest.LogCaptureFixture
) -> None:
    with socket.create_connection(listener.address) as sock:
        sock.sendall(b"CAIRN\0" + struct.pack("!H", 99) + bytes(64))
        read_until_closed(sock)
    wait_for(lambda: any("v99" in m for m in rejections(server_log)), 5.0, 0.01, "a 'v99' warning")


def test_client_rejects_a_non_cairn_server_quickly() -> None:
    with socket.create_server(("127.0.0.1", 0)) as fake:

        def ssh_server() -> None:
            sock, _ = fake.accept()
            sock.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            read_until_closed(sock)
            sock.close()

        threading.Thread(target=ssh_server, daemon=True).start()
        start = time.monotonic()
        with pytest.raises(AuthenticationError, match="not a Cairn endpoint"):
            connect(fake.getsockname(), SECRET, retries=0)
        assert time.monotonic() - start < 2


def test_silent_or_dribbling_client_times_out(
    accepted: Accepted, server_log: pytest.LogCaptureFixture
) -> None:
    with collecting_listener(accepted, handshake_timeout=0.3) as lst:
        start = time.monotonic()
        with socket.create_connection(lst.address) as silent:
            read_until_closed(silent)
        assert 0.2 < time.monotonic() - start < 3

        # A byte every 50 ms defeats any per-read timeout; the handshake deadline does not.
        start = time.monotonic()
        with socket.create_connection(lst.address) as dribbler:

            def dribble() -> None:
                try:
                    for byte in MAGIC + bytes(64):
                        dribbler.sendall(bytes([byte]))
                        time.sleep(0.05)
                except OSError:
                    pass

            threading.Thread(target=dribble, daemon=True).start()
            read_until_closed(dribbler)
        assert time.monotonic() - start < 1.5
        wait_for(
            lambda: lst.rejections.total[RejectionKind.TIMED_OUT] == 2,
            5.0,
            0.01,
            "two timed-out handshakes",
        )
        # The second timeout within the log interval is only counted (summarized on close).
        assert sum("within 0.3 s" in m for m in rejections(server_log)) == 1
        assert accepted.empty()


def test_authenticated_client_without_hello_times_out(
    accepted: Accepted, server_log: pytest.LogCaptureFixture
) -> None:
    with collecting_listener(accepted, handshake_timeout=0.3) as lst:
        with socket.create_connection(lst.address) as sock:
            client_handshake(sock, SECRET, timeout=2)
            read_until_closed(sock)
        wait_for(
            lambda: any("no HELLO" in m for m in rejections(server_log)),
            5.0,
            0.01,
            "a 'no HELLO' warning",
        )
        assert accepted.empty()


def test_client_times_out_on_a_silent_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:
        start = time.monotonic()
        with pytest.raises(HandshakeTimeout):
            connect(silent.getsockname(), SECRET, timeout=0.3, retries=0)
        assert time.monotonic() - start < 2


# -- listener ------------------------------------------------------------------------------


def test_listener_binds_only_the_given_host(listener: Listener) -> None:
    host, port = listener.address
    assert host == "127.0.0.1" and port > 0
    with pytest.raises(ValueError, match="explicit host"):
        Listener("", SECRET, lambda c, h: None)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        Listener("127.0.0.1", b"short", lambda c, h: None)


def test_listener_close_is_idempotent_and_stops_accepting(accepted: Accepted) -> None:
    lst = collecting_listener(accepted)
    address = lst.address
    lst.close()
    lst.close()
    assert lst.closed
    assert not any(t.name == f"cairn-listener-{address[1]}" for t in threading.enumerate())
    with pytest.raises(ConnectionRefusedError):
        connect(address, SECRET, retries=0)


def test_connect_retries_until_the_listener_is_up(
    accepted: Accepted, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=SERVER_LOG)
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    result: queue.Queue[FramedConnection] = queue.Queue()
    threading.Thread(
        target=lambda: result.put(
            connect(("127.0.0.1", port), SECRET, b"late", retry_interval=0.05)
        ),
        daemon=True,
    ).start()
    wait_for(  # the first two attempts are refused
        lambda: sum("retrying in" in r.getMessage() for r in caplog.records) >= 2,
        5,
        0.01,
        "two refused attempts",
    )
    with collecting_listener(accepted, port=port):
        client = result.get(timeout=5)
        server, hello = accepted.get(timeout=5)
        assert hello == b"late"
        client.close()
        server.close()


def test_failing_callback_closes_its_connection(server_log: pytest.LogCaptureFixture) -> None:
    def broken(conn: FramedConnection, hello: bytes) -> None:
        raise RuntimeError("handler bug")

    with Listener("127.0.0.1", SECRET, broken) as lst:
        conn = connect(lst.address, SECRET)
        with pytest.raises(ConnectionClosed):
            conn.recv()
        conn.close()
    assert any("on_connection failed" in r.getMessage() for r in server_log.records)
