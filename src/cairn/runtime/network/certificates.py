"""A job's own certificate authority and certificates, for users and tests that have none.

Invariant: ``make_job_certificates`` writes PEM files only into a directory it creates (or
an empty one) with mode 0700, private keys 0600 and unencrypted (the directory is the
protection), and never keeps the CA's private key: the set is closed, so a certificate that
is not in it cannot be made to chain to its ``ca.pem`` later; run it again for a new set.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["JobCertificates", "make_job_certificates"]

DEFAULT_DAYS = 365


@dataclass(frozen=True)
class JobCertificates:
    """Where ``make_job_certificates`` wrote each file (all PEM).

    Two CAs, so that a REST client's certificate never opens the internal wire:
    ``internal_ca`` is the internal truststore, ``internal`` the certificate and key every
    Cairn process presents there (Flink's one shared internal certificate); ``rest_ca``
    signs ``rest`` (the control endpoint's certificate and key) and ``rest_client`` (a
    client's, for ``security.ssl.rest.authentication-enabled``).
    """

    directory: Path
    internal_ca: Path
    internal: Path
    rest_ca: Path
    rest: Path
    rest_client: Path

    def options(self) -> dict[str, str]:
        """The ``security.ssl.*`` keys that turn TLS on with these files.

        >>> import pathlib
        >>> certs = JobCertificates(*(pathlib.Path(p) for p in "d ica i rca r c".split()))
        >>> certs.options()["security.ssl.internal.keystore"]
        'i'
        """
        return {
            "security.ssl.internal.enabled": "true",
            "security.ssl.internal.keystore": str(self.internal),
            "security.ssl.internal.truststore": str(self.internal_ca),
            "security.ssl.rest.enabled": "true",
            "security.ssl.rest.keystore": str(self.rest),
            "security.ssl.rest.truststore": str(self.rest_ca),
        }


def make_job_certificates(
    directory: str | os.PathLike[str],
    *,
    hosts: tuple[str, ...] = (),
    days: int = DEFAULT_DAYS,
    name: str = "cairn",
) -> JobCertificates:
    """Create a CA and the certificates it signs in ``directory`` (new or empty).

    ``hosts`` (names or IP addresses) go into the REST certificate's subject alternative
    names besides ``localhost`` and ``127.0.0.1``, so HTTPS clients can check the name.

    Example::

        certs = make_job_certificates("/etc/cairn/tls", hosts=("driver.example.org",))
        env = StreamExecutionEnvironment.get_execution_environment(
            Configuration.from_dict(certs.options())
        )
    """
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    target = Path(directory).absolute()  # workers read the same paths elsewhere
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty; certificates go into a new directory")
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.chmod(0o700)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)

    internal_ca = _Authority(f"{name} internal CA", start, end)
    rest_ca = _Authority(f"{name} REST CA", start, end)
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    local = ("localhost", "127.0.0.1", *hosts)
    files = {
        "internal-ca.pem": internal_ca.certificate_pem,
        "internal.pem": internal_ca.issue(f"{name} internal", local, both),
        "rest-ca.pem": rest_ca.certificate_pem,
        "rest.pem": rest_ca.issue(f"{name} rest", local, [ExtendedKeyUsageOID.SERVER_AUTH]),
        "rest-client.pem": rest_ca.issue(
            f"{name} rest client", ("localhost",), [ExtendedKeyUsageOID.CLIENT_AUTH]
        ),
    }
    for filename, content in files.items():
        mode = 0o644 if filename.endswith("-ca.pem") else 0o600
        fd = os.open(target / filename, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(content)
    return JobCertificates(*(target / f for f in ("", *files)))


class _Authority:
    """A CA whose private key lives only in this object (never written anywhere)."""

    def __init__(self, common_name: str, start: datetime.datetime, end: datetime.datetime) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._start, self._end = start, end
        usage = dict.fromkeys(_KEY_USAGES, False) | {"key_cert_sign": True, "crl_sign": True}
        certificate = (
            self._builder(self._name, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(**usage), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.certificate_pem = certificate.public_bytes(serialization.Encoding.PEM)

    def _builder(self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey) -> Any:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._start)
            .not_valid_after(self._end)
        )

    def issue(
        self, common_name: str, names: tuple[str, ...], usages: list[x509.ObjectIdentifier]
    ) -> bytes:
        """A new key and its certificate signed by this CA, as one PEM (certificate first)."""
        key = ec.generate_private_key(ec.SECP256R1())
        alternative: list[x509.GeneralName] = []
        for host in names:
            try:
                alternative.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alternative.append(x509.DNSName(host))
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        certificate: x509.Certificate = (
            self._builder(subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return certificate.public_bytes(serialization.Encoding.PEM) + key_pem


_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)
