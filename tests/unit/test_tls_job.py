"""A job with internal TLS on (in-process workers, real sockets): the driver's control
listener and the workers' data listeners speak TLS with the job's certificate, and a job
whose certificate its truststore does not trust cannot even register its workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.common import Configuration
from cairn.common.exceptions import ConfigurationError
from cairn.datastream import StreamExecutionEnvironment
from cairn.runtime.network.certificates import JobCertificates, make_job_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> JobCertificates:
    return make_job_certificates(tmp_path_factory.mktemp("tls") / "job")


def keyed_sums(conf: dict[str, str]) -> Iterator[tuple[str, int]]:
    configuration = Configuration()
    for key, value in {"cairn.executor": "inprocess", "cairn.workers": "2", **conf}.items():
        configuration.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    words = [(f"w{i % 20}", 1) for i in range(1_000)]
    stream = env.from_collection(words).key_by(lambda r: r[0])
    return stream.reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()


def test_a_job_with_internal_tls_runs_over_tls_connections(certs: JobCertificates) -> None:
    conf = {k: v for k, v in certs.options().items() if ".internal." in k}
    with keyed_sums(conf) as sums:
        final = dict(sums)
    assert final == {f"w{i}": 50 for i in range(20)}


def test_a_job_whose_certificate_is_not_trusted_cannot_register_its_workers(
    certs: JobCertificates, tmp_path: Path
) -> None:
    other = make_job_certificates(tmp_path / "other")
    conf = {
        "security.ssl.internal.enabled": "true",
        "security.ssl.internal.keystore": str(other.internal),
        "security.ssl.internal.truststore": str(certs.internal_ca),
    }
    with pytest.raises(Exception, match="TLS") as failure, keyed_sums(conf) as sums:
        list(sums)
    assert "register" in str(failure.value) or "register" in repr(failure.value.__cause__)


def test_internal_tls_needs_both_files(certs: JobCertificates) -> None:
    conf = {"security.ssl.internal.enabled": "true"}
    with pytest.raises(ConfigurationError, match=r"security\.ssl\.internal\.keystore"):
        keyed_sums(conf)
    conf["security.ssl.internal.keystore"] = str(certs.internal)
    conf["security.ssl.internal.truststore"] = "/nonexistent/ca.pem"
    with pytest.raises(ConfigurationError, match="not a readable file"):
        keyed_sums(conf)
