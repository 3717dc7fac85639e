"""Checkpoints written by someone else: reading them never runs code, and a signing key
refuses what it cannot verify.

The attacker here can write the checkpoint directory and knows the format: a planted
``_metadata`` carries a pickle that would create a marker file if anything unpickled it,
with its body length and SHA-256 fixed up (that checksum has no key).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.checkpoint.errors import (
    CorruptCheckpointError,
    NoUsableCheckpointError,
    UnverifiedCheckpointError,
)
from cairn.checkpoint.handles import (
    KeyedStateHandle,
    OperatorSubtaskState,
    StreamRange,
    pickle_inline,
)
from cairn.checkpoint.inspection import list_checkpoints, verify
from cairn.checkpoint.metadata import (
    CheckpointMetadata,
    OperatorMetadata,
    SignatureStatus,
    decode_metadata,
)
from cairn.checkpoint.restore import candidate_at, find_restore_point
from cairn.checkpoint.storage import CheckpointStorage, load_checkpoint, read_metadata
from cairn.common.exceptions import ConfigurationError
from cairn.ids import CheckpointId, JobId, OperatorUid
from cairn.observability.tables import checkpoints_report
from cairn.settings import SigningKey

UID = OperatorUid("agg")
KEY = SigningKey.parse("the-deployment-key-0123456789")
OTHER_KEY = SigningKey.parse("another-key-9876543210")
PAYLOAD = b"HEAD" + b"0123456789"  # a 4-byte header outside any range, like MAGIC


class _Planted:
    """Unpickling this runs ``touch <marker>`` (what an attacker's pickle would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def _write(storage: CheckpointStorage, cid: int = 1) -> CheckpointMetadata:
    rel = storage.writer(CheckpointId(cid)).write_state_file("keyed/agg", PAYLOAD)
    section = PAYLOAD[4:]
    handle = KeyedStateHandle(
        rel, 0, 127, {5: StreamRange(4, len(section), zlib.crc32(section))}, len(PAYLOAD)
    )
    state = OperatorSubtaskState(keyed=(handle,), inline=pickle_inline({"pos": 7}))
    md = CheckpointMetadata(
        JobId(storage.job_id),
        CheckpointId(cid),
        100,
        107,
        128,
        operators={UID: OperatorMetadata(UID, 1, 128, {0: state})},
    )
    storage.write_metadata(md)
    return md


def _rewrite(chk: Path, edit: object = None, *, marker: Path | None = None) -> None:
    """Change ``chk/_metadata``'s body as an attacker would, keeping the header consistent
    (length, SHA-256) and any signature field as it was (the attacker has no key)."""
    head, _, body = (chk / "_metadata").read_bytes().partition(b"\n")
    obj = json.loads(body)
    if marker is not None:
        planted = base64.b64encode(pickle_inline({"x": _Planted(marker)})["x"]).decode()
        obj["operators"][0]["subtasks"]["0"]["inline"]["pos"] = planted
    if callable(edit):
        edit(obj)
    new_body = json.dumps(obj, sort_keys=True, indent=1).encode()
    header = json.loads(head)
    header.update(body_length=len(new_body), body_sha256=hashlib.sha256(new_body).hexdigest())
    (chk / "_metadata").write_bytes(json.dumps(header).encode() + b"\n" + new_body)


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[tuple[CheckpointStorage, Path, Path]]:
    """A job directory whose only checkpoint carries a planted pickle; and the marker."""
    storage = CheckpointStorage(f"file://{tmp_path / 'chk'}", "job-a")
    _write(storage)
    chk = tmp_path / "chk" / "job-a" / "chk-1"
    marker = tmp_path / "PWNED"
    _rewrite(chk, marker=marker)
    yield storage, chk, marker
    assert not marker.exists(), "a planted pickle ran"


# --- reading never runs code ---------------------------------------------------------------


def test_listing_and_reading_a_planted_checkpoint_runs_nothing(
    planted: tuple[CheckpointStorage, Path, Path],
) -> None:
    storage, chk, marker = planted
    (row,) = list_checkpoints(storage.job_dir)
    assert row.ok and row.signature is SignatureStatus.UNSIGNED
    md = read_metadata(str(chk))
    state = md.operators[UID].subtasks[0]
    assert isinstance(state.inline["pos"], bytes) and state.inline_size > 0
    for details, as_json in ((False, False), (True, False), (True, True)):
        checkpoints_report(storage.job_dir, details=details, as_json=as_json)
    (listed,) = json.loads(checkpoints_report(storage.job_dir, as_json=True))
    assert listed["inline_size"] == state.inline_size and listed["signature"] == "unsigned"
    assert not marker.exists()


def test_restore_planning_of_a_planted_checkpoint_runs_nothing(
    planted: tuple[CheckpointStorage, Path, Path],
) -> None:
    _, chk, marker = planted
    choice = find_restore_point([candidate_at(str(chk))])
    assert choice.checkpoint.checkpoint_id == 1
    assert not marker.exists()
    # Only the restoring operator unpickles (and this one was not signed: never do this).
    choice.checkpoint.metadata.operators[UID].subtasks[0].inline_value("pos")
    assert marker.exists()
    marker.unlink()


def test_cli_listing_of_a_planted_checkpoint_runs_nothing(
    planted: tuple[CheckpointStorage, Path, Path],
) -> None:
    storage, _, marker = planted
    env = {k: v for k, v in os.environ.items() if k != "CAIRN_CHECKPOINT_SIGNING_KEY"}
    for extra in ([], ["--details"], ["--json", "--details"]):
        done = subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "checkpoints", storage.job_dir, *extra],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert "chk-1" in done.stdout or "subtask" in done.stdout
    assert not marker.exists()


# --- signing -------------------------------------------------------------------------------


def _signed(tmp_path: Path) -> tuple[CheckpointStorage, Path]:
    storage = CheckpointStorage(f"file://{tmp_path / 'chk'}", "job-s", signing_key=KEY)
    _write(storage)
    return storage, tmp_path / "chk" / "job-s" / "chk-1"


def test_signed_checkpoint_verifies_and_restores(tmp_path: Path) -> None:
    storage, chk = _signed(tmp_path)
    (row,) = list_checkpoints(storage.job_dir, key=KEY)
    assert row.ok and row.signature is SignatureStatus.VERIFIED
    (unkeyed,) = list_checkpoints(storage.job_dir)
    assert unkeyed.ok and unkeyed.signature is SignatureStatus.UNCHECKED
    choice = find_restore_point([candidate_at(str(chk))], key=KEY)
    assert choice.checkpoint.metadata.operators[UID].subtasks[0].inline_value("pos") == 7
    reader = storage.reader(str(chk))
    handle = choice.checkpoint.metadata.operators[UID].subtasks[0].keyed[0]
    assert reader.read_state_range(handle.path, 4, 10) == b"0123456789"


def test_unsigned_checkpoint_is_refused_when_a_key_is_set(tmp_path: Path) -> None:
    storage = CheckpointStorage(f"file://{tmp_path / 'chk'}", "job-u")
    _write(storage)
    chk = tmp_path / "chk" / "job-u" / "chk-1"
    with pytest.raises(NoUsableCheckpointError) as info:
        find_restore_point([candidate_at(str(chk))], what="job j", key=KEY)
    assert str(chk) in str(info.value) and "checkpoint 1 is not signed" in str(info.value)
    with pytest.raises(UnverifiedCheckpointError, match="not signed"):
        load_checkpoint(str(chk), key=KEY)
    (row,) = list_checkpoints(storage.job_dir, key=KEY)
    assert not row.ok and row.error is not None and "not signed" in row.error


def test_tampered_signed_checkpoint_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    storage, chk = _signed(tmp_path)
    marker = tmp_path / "PWNED"
    _rewrite(chk, marker=marker)  # SHA-256 fixed up, signature left as it was
    with pytest.raises(NoUsableCheckpointError) as info:
        find_restore_point([candidate_at(str(chk))], key=KEY)
    assert "signature of checkpoint 1 does not match" in str(info.value)
    (row,) = list_checkpoints(storage.job_dir, key=KEY)
    assert not row.ok and row.error is not None and "does not match" in row.error
    assert not marker.exists()


def test_signature_of_another_key_is_refused(tmp_path: Path) -> None:
    _, chk = _signed(tmp_path)
    with pytest.raises(UnverifiedCheckpointError, match="does not match the signing key"):
        decode_metadata((chk / "_metadata").read_bytes(), "m", OTHER_KEY)


def test_signed_metadata_covers_every_state_byte(tmp_path: Path) -> None:
    """Bytes outside every CRC range (here the header) changed: the CRCs cannot see it, the
    digest the signed metadata names for the file does, in planning and in the worker."""
    storage, chk = _signed(tmp_path)
    md = load_checkpoint(str(chk), key=KEY).metadata
    rel = md.operators[UID].subtasks[0].keyed[0].path
    (chk / rel).write_bytes(b"EVIL" + PAYLOAD[4:])
    with pytest.raises(CorruptCheckpointError, match="SHA-256"):
        verify(md, str(chk), require_digests=True)
    with pytest.raises(CorruptCheckpointError, match="SHA-256"):
        storage.reader(str(chk)).read_state_range(rel, 4, 10)


def test_state_file_without_digest_is_refused_under_a_key(tmp_path: Path) -> None:
    storage, chk = _signed(tmp_path)
    md = load_checkpoint(str(chk), key=KEY).metadata
    rel = md.operators[UID].subtasks[0].keyed[0].path
    with pytest.raises(CorruptCheckpointError, match="no SHA-256 digest"):
        storage.reader(str(chk)).read_state_range(rel.split("-sha256-")[0], 4, 10)


def test_cli_shows_whether_checkpoints_verify(tmp_path: Path) -> None:
    storage, _ = _signed(tmp_path)
    key_file = tmp_path / "key"
    key_file.write_text("the-deployment-key-0123456789\n")
    env = {k: v for k, v in os.environ.items() if k != "CAIRN_CHECKPOINT_SIGNING_KEY"}

    def cairn(*args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "checkpoints", storage.job_dir, *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, **extra_env},
        )

    assert "verified" in cairn("--signing-key-file", str(key_file)).stdout
    assert "signed, not checked" in cairn().stdout
    wrong = cairn(CAIRN_CHECKPOINT_SIGNING_KEY="another-key-9876543210").stdout
    assert "UNUSABLE" in wrong and "does not match the signing key" in wrong
    short = cairn(CAIRN_CHECKPOINT_SIGNING_KEY="sekrit")
    assert short.returncode != 0 and "at least 16 characters" in short.stderr
    assert "sekrit" not in short.stderr


# --- the signing key as configuration -------------------------------------------------------


def test_signing_key_option_is_validated_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    from cairn.common import config_options as opts
    from cairn.datastream.job_builder import signing_key_from_environ

    with pytest.raises(ConfigurationError) as info:
        opts.validate_configuration({"cairn.checkpoint.signing-key": "sekrit"})
    assert "at least 16 characters" in str(info.value) and "sekrit" not in str(info.value)
    assert "the-deployment-key" not in repr(KEY) and "the-deployment-key" not in str(KEY)
    assert signing_key_from_environ({"CAIRN_CHECKPOINT_SIGNING_KEY": " x" * 9}) == (
        SigningKey.parse("x x x x x x x x x")
    )
    assert signing_key_from_environ({}) is None
    with pytest.raises(ConfigurationError, match="CAIRN_CHECKPOINT_SIGNING_KEY"):
        signing_key_from_environ({"CAIRN_CHECKPOINT_SIGNING_KEY": "short"})


def test_job_settings_carry_the_key_but_never_show_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from cairn.common import Configuration
    from cairn.datastream import StreamExecutionEnvironment
    from cairn.settings import JobSettings

    def settings(conf: dict[str, str]) -> JobSettings:
        configuration = Configuration()
        for k, v in conf.items():
            configuration.set_string(k, v)
        env = StreamExecutionEnvironment.get_execution_environment(configuration)
        env.from_collection([1]).print()
        return env.prepare_job().settings

    monkeypatch.delenv("CAIRN_CHECKPOINT_SIGNING_KEY", raising=False)
    s = settings({"cairn.checkpoint.signing-key": "the-deployment-key-0123456789"})
    assert s.checkpoint.signing_key == KEY
    assert "the-deployment-key" not in repr(s)
    assert s.configuration["cairn.checkpoint.signing-key"] == "<redacted>"
    monkeypatch.setenv("CAIRN_CHECKPOINT_SIGNING_KEY", "another-key-9876543210")
    assert settings({}).checkpoint.signing_key == OTHER_KEY
    monkeypatch.delenv("CAIRN_CHECKPOINT_SIGNING_KEY")
    assert settings({}).checkpoint.signing_key is None


def test_an_older_signed_checkpoint_copied_over_a_newer_one_is_refused(tmp_path: Path) -> None:
    storage, chk1 = _signed(tmp_path)
    _write(storage, cid=2)
    chk2 = chk1.parent / "chk-2"
    (chk2 / "_metadata").write_bytes((chk1 / "_metadata").read_bytes())  # validly signed
    with pytest.raises(CorruptCheckpointError, match="metadata of checkpoint 1, not of chk-2"):
        load_checkpoint(str(chk2), key=KEY)
    choice = find_restore_point([candidate_at(str(chk2)), candidate_at(str(chk1))], key=KEY)
    assert choice.checkpoint.metadata.checkpoint_id == 1  # falls back to the genuine one
