"""Checkpoint storage on real local files (tmp_path) and on fsspec's memory:// filesystem."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import uuid
import zlib
from pathlib import Path

import pytest
from fsspec.core import url_to_fs

from cairn.checkpoint.errors import CheckpointNotFoundError, CorruptCheckpointError
from cairn.checkpoint.handles import (
    InputChannelStateHandle,
    KeyedStateHandle,
    OperatorSubtaskState,
    StreamRange,
)
from cairn.checkpoint.inspection import list_checkpoints, verify
from cairn.checkpoint.metadata import CheckpointMetadata, OperatorMetadata
from cairn.checkpoint.storage import (
    CheckpointStorage,
    default_storage_url,
    load_checkpoint,
    open_reader,
    read_metadata,
)
from cairn.ids import CheckpointId, JobId, OperatorUid
from cairn.settings import SigningKey

from ._coordinator_harness import exists

UID = OperatorUid("agg")


def write_checkpoint(
    storage: CheckpointStorage, cid: int, payload: bytes = b"0123456789"
) -> CheckpointMetadata:
    """What a task and the coordinator do: state file first, then metadata."""
    rel = storage.writer(CheckpointId(cid)).write_state_file("keyed/agg", payload)
    handle = KeyedStateHandle(
        rel, 0, 127, {5: StreamRange(0, len(payload), zlib.crc32(payload))}, len(payload)
    )
    md = CheckpointMetadata(
        JobId(storage.job_id),
        CheckpointId(cid),
        trigger_ms=100 * cid,
        completed_ms=100 * cid + 7,
        max_parallelism=128,
        operators={UID: OperatorMetadata(UID, 1, 128, {0: OperatorSubtaskState(keyed=(handle,))})},
    )
    storage.write_metadata(md)
    return md


def test_layout_unique_names_and_range_reads(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    w = storage.writer(CheckpointId(3))
    a, b = w.write_state_file("state", b"hello"), w.write_state_file("state", b"world!")
    assert a != b and "/" not in a
    assert w.directory == storage.checkpoint_dir(3)
    assert storage.checkpoint_dir(3).endswith("/job-a/chk-3")
    reader = storage.reader(storage.checkpoint_dir(3))
    assert reader.read_state_range(b, 1, 4) == b"orld"
    with pytest.raises(CorruptCheckpointError, match="truncated"):
        reader.read_state_range(a, 2, 10)
    with pytest.raises(CorruptCheckpointError, match="not relative"):
        reader.read_state_range("../job-b/chk-1/x", 0, 1)
    # An empty range asks the store for nothing (Azure refuses one), a missing file is missing.
    assert reader.read_state_range(a, 5, 0) == b""
    with pytest.raises(CorruptCheckpointError, match="missing"):
        reader.read_state_range("no-such-file", 0, 0)


def test_a_long_state_name_gives_a_file_name_the_file_system_takes(tmp_path: Path) -> None:
    """Unaligned checkpoints name in-flight data files after the vertex: a chained Table
    vertex's name is hundreds of characters, beyond the 255 bytes of a file name."""
    key = SigningKey.parse("0123456789abcdef0123")
    name = "channels GroupWindowAggregate(groupBy=[k], select=[COUNT(*)]) -> Calc" * 8 + " 1"
    for signing_key in (None, key):
        storage = CheckpointStorage(str(tmp_path), "job", signing_key=signing_key)
        w = storage.writer(CheckpointId(1))
        rel = w.write_state_file(name, b"in flight")
        assert len(rel) <= 210 and rel.startswith("channels_GroupWindowAggregate_groupBy_k")
        assert storage.reader(w.directory).read_state_range(rel, 3, 6) == b"flight"


def test_metadata_is_the_completion_marker(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    storage.writer(CheckpointId(1)).write_state_file("s", b"x")
    with pytest.raises(CheckpointNotFoundError, match="incomplete: no _metadata"):
        read_metadata(storage.checkpoint_dir(1))
    md = write_checkpoint(storage, 2)
    cp = load_checkpoint(storage.checkpoint_dir(2))
    assert cp.metadata == md and cp.directory == storage.checkpoint_dir(2)
    assert exists(cp.metadata_path)
    # No stray temp files from the atomic write are left behind.
    fs, path = url_to_fs(storage.checkpoint_dir(2))
    assert sorted(os.path.basename(p) for p in fs.ls(path, detail=False))[0] == "_metadata"
    assert len(fs.ls(path, detail=False)) == 2


def test_read_metadata_accepts_dir_metadata_file_and_job_dir(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    write_checkpoint(storage, 1)
    write_checkpoint(storage, 2)
    storage.writer(CheckpointId(3)).write_state_file("s", b"in progress")  # incomplete chk-3
    assert read_metadata(storage.checkpoint_dir(1)).checkpoint_id == 1
    assert read_metadata(storage.checkpoint_dir(1) + "/_metadata").checkpoint_id == 1
    assert read_metadata(storage.job_dir).checkpoint_id == 2
    missing = storage.job_dir + "/nope"
    with pytest.raises(CheckpointNotFoundError, match="nope: no such checkpoint"):
        read_metadata(missing)


def test_verify_names_the_missing_or_short_file(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    md = write_checkpoint(storage, 1)
    verify(md, storage.checkpoint_dir(1), check_crc=True)
    (rel,) = md.referenced_files()
    fs, path = url_to_fs(f"{storage.checkpoint_dir(1)}/{rel}")
    fs.pipe_file(path, b"0123")
    with pytest.raises(CorruptCheckpointError, match=rf"{rel}: state file is truncated: 4 bytes"):
        verify(md, storage.checkpoint_dir(1))
    fs.pipe_file(path, b"0123456789"[::-1])
    with pytest.raises(CorruptCheckpointError, match="CRC-32 mismatch"):
        verify(md, storage.checkpoint_dir(1), check_crc=True)
    fs.rm(path)
    with pytest.raises(CorruptCheckpointError, match=rf"{rel}: state file .* is missing"):
        verify(md, storage.checkpoint_dir(1))


def test_discard_removes_the_directory_and_tolerates_missing(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    write_checkpoint(storage, 1)
    storage.discard(CheckpointId(1))
    assert not exists(storage.checkpoint_dir(1))
    storage.discard(CheckpointId(1))
    storage.discard(CheckpointId(99))


def test_list_checkpoints_reports_ok_incomplete_and_corrupt(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    write_checkpoint(storage, 1, b"abc")
    md2 = write_checkpoint(storage, 2)
    storage.writer(CheckpointId(3)).write_state_file("s", b"x")
    (rel,) = md2.referenced_files()
    fs, path = url_to_fs(f"{storage.checkpoint_dir(2)}/{rel}")
    fs.rm(path)
    write_checkpoint(CheckpointStorage(root, "job-b"), 1)

    rows = list_checkpoints(storage.job_dir)
    assert [(r.checkpoint_id, r.ok) for r in rows] == [(1, True), (2, False), (3, False)]
    assert rows[0].state_size == 3 and rows[0].duration_ms == 7 and not rows[0].is_savepoint
    assert rows[1].error is not None and "is missing" in rows[1].error
    assert rows[2].error is not None and rows[2].error.startswith("incomplete")
    everything = list_checkpoints(root)
    assert [(r.job_id, r.checkpoint_id) for r in everything] == [
        ("job-a", 1),
        ("job-a", 2),
        ("job-a", 3),
        ("job-b", 1),
    ]


def test_verify_and_listing_check_crcs_of_every_range(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    md = write_checkpoint(storage, 1)
    (rel,) = md.referenced_files()
    fs, path = url_to_fs(f"{storage.checkpoint_dir(1)}/{rel}")
    fs.pipe_file(path, b"0123456789"[::-1])  # same size, other bytes
    with pytest.raises(CorruptCheckpointError, match=rf"{rel}: CRC-32 mismatch in bytes \[0, 10\)"):
        verify(md, storage.checkpoint_dir(1))
    verify(md, storage.checkpoint_dir(1), check_crc=False)  # sizes only: looks fine
    (row,) = list_checkpoints(storage.job_dir)
    assert not row.ok and row.error is not None and "CRC-32 mismatch" in row.error


def test_crcs_of_in_flight_data_are_checked_too(root: str) -> None:
    storage = CheckpointStorage(root, "job-a")
    batches = [b"batch-0", b"batch-1!"]
    rel = storage.writer(CheckpointId(1)).write_state_file("channels", b"".join(batches))
    ranges = (StreamRange(0, 7, zlib.crc32(batches[0])), StreamRange(7, 8, 12345))
    channels = InputChannelStateHandle(rel, 1, {0: ranges}, 15)
    md = CheckpointMetadata(
        JobId(storage.job_id),
        CheckpointId(1),
        trigger_ms=100,
        completed_ms=107,
        max_parallelism=128,
        operators={
            UID: OperatorMetadata(UID, 1, 128, {0: OperatorSubtaskState(input_channels=channels)})
        },
    )
    storage.write_metadata(md)
    with pytest.raises(CorruptCheckpointError, match=r"CRC-32 mismatch in bytes \[7, 15\)"):
        verify(md, storage.checkpoint_dir(1))


def test_savepoint_is_self_contained_and_movable(root: str, tmp_path: Path) -> None:
    storage = CheckpointStorage(root, "job-a")
    md = write_checkpoint(storage, 4, b"savepoint state")
    target = tmp_path / "sp-1"
    sp = storage.write_savepoint(md, str(target))
    assert sp.is_savepoint and sp.directory == str(target)
    with pytest.raises(FileExistsError, match="already contains"):
        storage.write_savepoint(md, str(target))
    storage.discard(CheckpointId(4))  # the savepoint must not depend on the checkpoint
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.move(str(target), str(moved))
    cp = load_checkpoint(str(moved))
    assert cp.metadata.is_savepoint
    verify(cp.metadata, cp.directory, check_crc=True)
    handle = cp.metadata.operators[UID].subtasks[0].keyed[0]
    r = handle.sections[5]
    assert open_reader(cp.directory).read_state_range(handle.path, r.offset, r.length) == (
        b"savepoint state"
    )
    assert [row.is_savepoint for row in list_checkpoints(str(moved))] == [True]
    assert [
        (r.path, r.is_savepoint, r.ok) for r in list_checkpoints(str(tmp_path / "elsewhere"))
    ] == [(str(moved), True, True)]


def test_storage_pickles_for_workers_and_defaults_to_a_per_user_tempdir() -> None:
    url = f"memory://cairn-test-{uuid.uuid4().hex}"
    storage = CheckpointStorage(url, "job-p", {"skip_instance_cache": False})
    clone = pickle.loads(pickle.dumps(storage))
    rel = clone.writer(CheckpointId(1)).write_state_file("s", b"abc")
    assert storage.reader(storage.checkpoint_dir(1)).read_state_range(rel, 0, 3) == b"abc"
    assert clone.storage_options == {"skip_instance_cache": False}
    default = CheckpointStorage(None, "job-d")
    assert default.url == default_storage_url()
    assert default.checkpoint_dir(1) == (
        "file://"
        + os.path.join(tempfile.gettempdir(), f"cairn-checkpoints-{os.getuid()}", "job-d", "chk-1")
    )
    url_to_fs(url)[0].rm(url_to_fs(url)[1], recursive=True)


def test_file_url_and_plain_path_address_the_same_files(tmp_path: Path) -> None:
    via_url = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(via_url, 1)
    assert via_url.checkpoint_dir(1).startswith("file://")
    assert read_metadata(str(tmp_path / "job")).checkpoint_id == 1
    assert (tmp_path / "job" / "chk-1" / "_metadata").is_file()


def test_a_discarded_run_removes_only_what_it_made(tmp_path: Path) -> None:
    """FINISHED (or a discarding retention policy): the run's own ``chk-<n>`` go; an earlier
    run's retained checkpoint, HA records and a user's file stay, and so does the directory
    with the run-status record; with nothing else left, the whole directory goes."""
    storage = CheckpointStorage(f"file://{tmp_path}", JobId("j" * 32))
    job = tmp_path / ("j" * 32)
    for name in ("chk-3", "chk-7", "chk-8", "shared", "leader-lease"):
        (job / name).mkdir(parents=True)
    for name in ("chk-3/_metadata", "chk-7/_metadata", "_run-status", "notes.txt"):
        (job / name).write_text("x")
    left = storage.discard_run(CheckpointId(7))
    assert (
        left
        == sorted(os.listdir(job))
        == [
            "_run-status",
            "chk-3",
            "leader-lease",
            "notes.txt",
            "shared",
        ]
    )
    assert (job / "chk-3" / "_metadata").is_file()
    for name in ("chk-3", "leader-lease", "notes.txt"):
        shutil.rmtree(job / name) if (job / name).is_dir() else (job / name).unlink()
    (job / "chk-9").mkdir()
    assert storage.discard_run(CheckpointId(7)) == [] and not job.exists()
