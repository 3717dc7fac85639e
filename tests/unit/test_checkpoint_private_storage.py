"""Checkpoint files on a local disk are private to the job's user: the default storage is per
user, directories are 0700 and files 0600 whatever the umask, and a default root that someone
else could have prepared is refused."""

from __future__ import annotations

import os
import stat
import tempfile
import zlib
from pathlib import Path

import pytest

from cairn.checkpoint.handles import KeyedStateHandle, OperatorSubtaskState, StreamRange
from cairn.checkpoint.metadata import CheckpointMetadata, OperatorMetadata
from cairn.checkpoint.storage import CheckpointStorage
from cairn.common.exceptions import ConfigurationError
from cairn.ids import CheckpointId, JobId, OperatorUid

UID = OperatorUid("agg")


def _write(storage: CheckpointStorage, cid: int = 1) -> CheckpointMetadata:
    data = b"0123456789"
    rel = storage.writer(CheckpointId(cid)).write_state_file("keyed/agg", data)
    handle = KeyedStateHandle(rel, 0, 127, {5: StreamRange(0, 10, zlib.crc32(data))}, 10)
    md = CheckpointMetadata(
        JobId(storage.job_id),
        CheckpointId(cid),
        100,
        107,
        128,
        operators={UID: OperatorMetadata(UID, 1, 128, {0: OperatorSubtaskState(keyed=(handle,))})},
    )
    storage.write_metadata(md)
    return md


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp directory Cairn's default storage lives in, for this test only."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"cairn-checkpoints-{os.getuid()}"


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_default_storage_is_per_user_and_private(temp_root: Path) -> None:
    old = os.umask(0o022)
    try:
        storage = CheckpointStorage(None, "job-d")
        _write(storage)
        storage.write_savepoint(_write(storage, 2), str(temp_root.parent / "sp"))
    finally:
        os.umask(old)
    assert storage.url == f"file://{temp_root}"
    chk = temp_root / "job-d" / "chk-1"
    assert [_mode(p) for p in (temp_root, temp_root / "job-d", chk)] == [0o700] * 3
    files = [*chk.iterdir(), *(temp_root.parent / "sp").iterdir()]
    assert len(files) == 4 and {_mode(f) for f in files} == {0o600}
    assert _mode(temp_root.parent / "sp") == 0o700


def test_configured_local_storage_writes_private_files(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        storage = CheckpointStorage(f"file://{tmp_path / 'mine'}", "job")
        _write(storage)
    finally:
        os.umask(old)
    chk = tmp_path / "mine" / "job" / "chk-1"
    assert _mode(chk) == 0o700 and {_mode(f) for f in chk.iterdir()} == {0o600}


def test_default_storage_writable_by_others_is_refused(temp_root: Path) -> None:
    temp_root.mkdir()
    temp_root.chmod(0o777)
    with pytest.raises(ConfigurationError, match="writable by group or others"):
        CheckpointStorage(None, "job")


def test_default_storage_that_is_a_link_is_refused(temp_root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    temp_root.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigurationError, match="not a directory"):
        CheckpointStorage(None, "job")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a directory to another user")
def test_default_storage_of_another_user_is_refused(temp_root: Path) -> None:
    temp_root.mkdir(mode=0o700)
    os.chown(temp_root, 65534, 65534)
    with pytest.raises(ConfigurationError, match="belongs to uid 65534"):
        CheckpointStorage(None, "job")
