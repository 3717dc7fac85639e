"""The control endpoint over HTTPS with client certificates (``security.ssl.rest.*``) on a
real job (in-process workers, internal TLS on too): the registry names an https URL and its
truststore, the CLI's client verifies the endpoint and presents its certificate, and a client
without one (plain HTTP, a raw socket, HTTPS without a certificate) gets no answer."""

from __future__ import annotations

import socket
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.common.job_status import JobStatus
from cairn.deploy.job_master_client import JobClient
from cairn.rest.client import JobControlError, JobEndpoint
from cairn.rest.https import CLIENT_CERT_ENV
from cairn.rest.registry import JobEntry, JobRegistry
from cairn.runtime.network.certificates import JobCertificates, make_job_certificates
from tests.integration.jobs import sequence_job

pytestmark = pytest.mark.usefixtures("registry_dir")


@pytest.fixture
def certs(tmp_path: Path) -> JobCertificates:
    return make_job_certificates(tmp_path / "tls")


@pytest.fixture
def job(tmp_path: Path, certs: JobCertificates) -> Iterator[JobClient]:
    conf = {
        "cairn.executor": "inprocess",
        **certs.options(),
        "security.ssl.rest.authentication-enabled": "true",
    }
    env = sequence_job(conf, str(tmp_path / "out"), records=10_000_000, keys=4, rate=2_000)
    client = env.execute_async("rest-tls")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    yield client
    if not client.get_job_status().is_globally_terminal_state():
        client.cancel()
    client.get_job_execution_result(60)


def entry_of(job: JobClient) -> JobEntry:
    entry = JobRegistry().find(job.get_job_id())
    assert entry is not None
    return entry


def test_only_clients_with_a_certificate_reach_the_https_endpoint(
    job: JobClient, certs: JobCertificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One job for every client (a job's start is most of the time).
    the_cli_reaches_it_with_its_client_certificate(job, certs, monkeypatch)
    clients_without_a_certificate_get_no_answer(job)


def the_cli_reaches_it_with_its_client_certificate(
    job: JobClient, certs: JobCertificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = entry_of(job)
    assert entry.endpoint.startswith("https://127.0.0.1:")
    assert entry.truststore == str(certs.rest_ca)
    monkeypatch.setenv(CLIENT_CERT_ENV, str(certs.rest_client))
    assert JobEndpoint(entry).status() == "RUNNING"
    monkeypatch.delenv(CLIENT_CERT_ENV)
    with pytest.raises(JobControlError, match="does not answer"):
        JobEndpoint(entry).status()  # no client certificate: refused in the handshake


def clients_without_a_certificate_get_no_answer(job: JobClient) -> None:
    entry = entry_of(job)
    port = int(entry.endpoint.rsplit(":", 1)[1])
    plain = f"http://127.0.0.1:{port}/jobs/{job.get_job_id()}"
    with pytest.raises(OSError):  # aiohttp's TLS side never answers plain HTTP
        urllib.request.urlopen(plain, timeout=5)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(b"GET /jobs HTTP/1.0\r\n\r\n")
        answer = b""
        try:
            while chunk := raw.recv(4096):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    assert b"HTTP/" not in answer
    context = ssl.create_default_context(cafile=entry.truststore)  # trusts, but no cert
    with pytest.raises(OSError):
        urllib.request.urlopen(entry.endpoint + "/jobs", timeout=5, context=context)
