"""Internal TLS over real loopback sockets: peers with the job's certificate talk (frames in
both directions, many senders at once); a connection without a valid certificate (plain TCP
speaking Cairn's handshake, a certificate of another CA, no certificate) is refused before
the listener sends or reads anything of Cairn's, and the client is told it is refused, not
busy; the certificate helper writes private files."""

from __future__ import annotations

import queue
import socket
import ssl
import stat
import threading
import time
from pathlib import Path

import pytest

from cairn.runtime.network import (
    AuthenticationError,
    FramedConnection,
    FrameKind,
    Listener,
    connect,
)
from cairn.runtime.network.admission import RejectionKind
from cairn.runtime.network.auth import CLIENT_PROOF_BYTES, MAGIC
from cairn.runtime.network.certificates import JobCertificates, make_job_certificates
from cairn.runtime.network.tls import client_context, server_context
from cairn.settings import TlsFiles
from tests.unit._network import SECRET, Accepted, read_until_closed


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> JobCertificates:
    return make_job_certificates(tmp_path_factory.mktemp("tls") / "job")


@pytest.fixture(scope="module")
def other_certs(tmp_path_factory: pytest.TempPathFactory) -> JobCertificates:
    return make_job_certificates(tmp_path_factory.mktemp("tls") / "other")


def internal(certs: JobCertificates) -> TlsFiles:
    return TlsFiles(str(certs.internal), str(certs.internal_ca))


def tls_listener(certs: JobCertificates, accepted: Accepted) -> Listener:
    return Listener(
        "127.0.0.1",
        SECRET,
        lambda conn, hello: accepted.put((conn, hello)),
        tls=server_context(internal(certs)),
    )


def wait_for_rejection(listener: Listener) -> None:
    deadline = time.monotonic() + 5
    while listener.rejections.total[RejectionKind.UNAUTHENTICATED] == 0:
        assert time.monotonic() < deadline, "the listener did not reject the connection"
        time.sleep(0.02)


def test_peers_with_the_jobs_certificate_exchange_frames_both_ways_concurrently(
    certs: JobCertificates, accepted: Accepted
) -> None:
    with tls_listener(certs, accepted) as listener:
        client = connect(listener.address, SECRET, b"worker-1", tls=client_context(internal(certs)))
        server, hello = accepted.get(timeout=5)
        assert hello == b"worker-1"
        payloads = [bytes([i % 251]) * (1000 + 997 * i) for i in range(60)]  # up to ~60 KB

        def send_all(conn: FramedConnection, channel: int) -> None:
            for payload in payloads:
                conn.send_many(
                    [(FrameKind.DATA, channel, payload), (FrameKind.CREDIT, channel, b"")]
                )

        # Two senders on each side while each side's one reader drains: the SSL object is
        # shared by reader and senders (a plain SSLSocket would let them collide).
        senders = [
            threading.Thread(target=send_all, args=(conn, ch))
            for conn in (client, server)
            for ch in (1, 2)
        ]
        for thread in senders:
            thread.start()
        for conn in (server, client):
            got: dict[int, list[bytes]] = {1: [], 2: []}
            for _ in range(4 * len(payloads)):
                kind, channel, payload = conn.recv()
                if kind == FrameKind.DATA:
                    got[channel].append(payload)
            assert got == {1: payloads, 2: payloads}
        for thread in senders:
            thread.join()
        client.close()
        server.close()


def test_plain_tcp_speaking_cairns_handshake_is_refused_before_anything_is_read(
    certs: JobCertificates, accepted: Accepted
) -> None:
    with tls_listener(certs, accepted) as listener:
        sock = socket.create_connection(listener.address)
        # The secret's proof format, without TLS: the listener must take it for a bad TLS
        # ClientHello, never greet it or read a proof.
        sock.sendall(MAGIC + bytes(CLIENT_PROOF_BYTES - len(MAGIC)))
        answer = read_until_closed(sock)
        sock.close()
        assert MAGIC not in answer  # never greeted: it got at most a TLS alert
        wait_for_rejection(listener)
        assert accepted.empty()


def test_a_certificate_of_another_ca_is_refused_and_not_retried(
    certs: JobCertificates, other_certs: JobCertificates, accepted: Accepted
) -> None:
    with tls_listener(certs, accepted) as listener:
        # Trusts the listener, but presents a certificate the listener does not trust.
        stranger = TlsFiles(str(other_certs.internal), str(certs.internal_ca))
        started = time.monotonic()
        with pytest.raises(AuthenticationError, match="TLS"):
            connect(listener.address, SECRET, b"x", tls=client_context(stranger))
        assert time.monotonic() - started < 5  # refused, not retried as a busy listener
        wait_for_rejection(listener)
        assert accepted.empty()


def test_a_client_without_a_certificate_is_refused(
    certs: JobCertificates, accepted: Accepted
) -> None:
    with tls_listener(certs, accepted) as listener:
        anonymous = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        anonymous.check_hostname = False
        anonymous.load_verify_locations(cafile=str(certs.internal_ca))
        with pytest.raises(AuthenticationError):
            connect(listener.address, SECRET, b"x", tls=anonymous)
        assert accepted.empty()


def test_a_listener_of_another_ca_is_refused_by_the_client(
    certs: JobCertificates, other_certs: JobCertificates, accepted: Accepted
) -> None:
    with tls_listener(other_certs, accepted) as listener:
        with pytest.raises(AuthenticationError, match="TLS"):
            connect(listener.address, SECRET, b"x", tls=client_context(internal(certs)))
        assert accepted.empty()


def test_the_helper_writes_private_keys_and_no_ca_key(certs: JobCertificates) -> None:
    names = sorted(p.name for p in Path(certs.directory).iterdir())
    assert names == [
        "internal-ca.pem",
        "internal.pem",
        "rest-ca.pem",
        "rest-client.pem",
        "rest.pem",
    ]
    assert stat.S_IMODE(certs.directory.stat().st_mode) == 0o700
    for path in (certs.internal, certs.rest, certs.rest_client):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert b"PRIVATE KEY" in path.read_bytes()
    for ca in (certs.internal_ca, certs.rest_ca):
        assert b"PRIVATE KEY" not in ca.read_bytes()
    with pytest.raises(FileExistsError):
        make_job_certificates(certs.directory)


def test_a_rest_client_certificate_does_not_open_the_internal_wire(
    certs: JobCertificates, accepted: Accepted
) -> None:
    with tls_listener(certs, accepted) as listener:
        rest_client = TlsFiles(str(certs.rest_client), str(certs.internal_ca))
        with pytest.raises(AuthenticationError):
            connect(listener.address, SECRET, b"x", tls=client_context(rest_client))
        assert accepted.empty()


def test_bad_tls_files_name_the_files(tmp_path: Path) -> None:
    missing = TlsFiles(str(tmp_path / "nope.pem"), str(tmp_path / "ca.pem"))
    with pytest.raises(ValueError, match=r"nope\.pem"):
        server_context(missing)


def test_many_idle_plain_connections_do_not_keep_a_certificate_holder_out(
    certs: JobCertificates,
) -> None:
    accepted: Accepted = queue.Queue()
    with tls_listener(certs, accepted) as listener:
        idle = [socket.create_connection(listener.address) for _ in range(100)]
        started = time.monotonic()
        conn = connect(listener.address, SECRET, b"in", tls=client_context(internal(certs)))
        assert accepted.get(timeout=5)[1] == b"in"
        assert time.monotonic() - started < 2
        conn.close()
        for sock in idle:
            sock.close()
