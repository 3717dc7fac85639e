"""``cairn tls init DIR``: writes the job's certificates, prints the configuration that uses
them (absolute paths) and refuses a directory that is not empty."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.cli.main import main


def test_tls_init_writes_certificates_and_prints_their_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["tls", "init", "certs", "--host", "10.0.0.5", "--days", "2"]) == 0
    out = capsys.readouterr().out
    assert f"-D security.ssl.internal.keystore={tmp_path}/certs/internal.pem" in out
    assert f"-D security.ssl.rest.truststore={tmp_path}/certs/rest-ca.pem" in out
    assert "PRIVATE KEY" not in out
    assert len(os.listdir(tmp_path / "certs")) == 5
    assert main(["tls", "init", "certs"]) == 1
    assert "not empty" in capsys.readouterr().err
