"""Local recovery (``state.backend.local-recovery``): the worker's local copies of its state
files serve a restore on the same host only while they hold the bytes written, the checkpoint
storage is the fallback, copies no retained checkpoint needs are removed, and a job that
crashes restores its keyed state (heap and RocksDB incremental) from the local copies."""

from __future__ import annotations

import logging
import os
import re
import zlib
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.errors import UnverifiedCheckpointError
from cairn.checkpoint.handles import (
    OperatorSubtaskState,
    RocksDBKeyedStateHandle,
    RocksDBStateFile,
    pickle_inline,
)
from cairn.checkpoint.local_recovery import LocalRecoveryStore
from cairn.checkpoint.metadata import CheckpointMetadata, OperatorMetadata, encode_metadata
from cairn.checkpoint.storage import CheckpointStorage
from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import Encoder
from cairn.datastream import CheckpointingMode, KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.datastream.state import ValueStateDescriptor
from cairn.deploy.control_messages import RestoreInfo
from cairn.deploy.task_builder import read_restores
from cairn.ids import CheckpointId, JobId, OperatorUid, SubtaskIndex
from cairn.settings import SigningKey
from cairn.testing.sequence_jobs import read_visible_lines

C1, C2, C3 = CheckpointId(1), CheckpointId(2), CheckpointId(3)


def _store(tmp_path: Path, index: int = 0) -> tuple[LocalRecoveryStore, CheckpointStorage]:
    storage = CheckpointStorage((tmp_path / "remote").as_uri(), "job")
    return LocalRecoveryStore(str(tmp_path / "local"), storage.job_dir, index), storage


def _copy_of(store: LocalRecoveryStore, cid: CheckpointId, rel: str) -> Path:
    path = store.local_path(store.directory, cid, rel)
    assert path is not None
    return Path(path)


def test_a_copy_serves_reads_and_a_changed_or_missing_one_falls_back_to_the_storage(
    tmp_path: Path,
) -> None:
    store, storage = _store(tmp_path)
    writer = store.writer(storage.writer(C1))
    data = bytes(range(256)) * 4
    rel = writer.write_state_file("keyed", data)
    shared = writer.write_shared_file("000007.sst", b"sst bytes")
    remote = storage.reader(storage.checkpoint_dir(C1))
    # Another worker index of the same job on this host finds the copies too.
    other, _ = _store(tmp_path, index=1)
    reader = other.reader(remote, C1)
    assert reader.read_state_range(rel, 10, 20) == data[10:30]
    assert reader.read_state_range(shared, 0, 3) == b"sst"
    assert (reader.local_bytes, reader.remote_bytes) == (23, 0)
    # The copy changed after it was written (same size): the storage serves the read.
    copy = _copy_of(store, C1, rel)
    copy.write_bytes(b"\xff" + data[1:])
    reader = store.reader(remote, C1)
    assert reader.read_state_range(rel, 0, 4) == data[:4]
    assert (reader.local_bytes, reader.remote_bytes) == (0, 4)
    # Gone, or its record of what was written gone: the storage again.
    copy.unlink()
    os.unlink(str(_copy_of(store, C1, shared)) + ".check")
    reader = store.reader(remote, C1)
    assert reader.read_state_range(rel, 0, 4) == data[:4]
    assert reader.read_state_range(shared, 0, 3) == b"sst"
    assert (reader.local_bytes, reader.remote_bytes) == (0, 7)


def test_a_copy_is_only_read_for_its_own_checkpoint_and_job(tmp_path: Path) -> None:
    store, storage = _store(tmp_path)
    rel = store.writer(storage.writer(C1)).write_state_file("keyed", b"first")
    # The same relative name in another checkpoint or another job's storage is not the copy.
    storage.writer(C2)  # nothing local for checkpoint 2
    assert store.local_path(store.directory, C2, rel) != store.local_path(store.directory, C1, rel)
    other_job = CheckpointStorage((tmp_path / "remote").as_uri(), "other")
    stranger = LocalRecoveryStore(str(tmp_path / "local"), other_job.job_dir, 0)
    assert stranger.job_root != store.job_root
    remote = storage.reader(storage.checkpoint_dir(C1))
    assert stranger.reader(remote, C1).read_state_range(rel, 0, 5) == b"first"
    assert stranger.last_reader is not None and stranger.last_reader.remote_bytes == 5
    # A handle path that would leave the worker's folders is never mapped to a local file.
    assert store.local_path(store.directory, C1, "../../etc/passwd") is None


def _rocksdb_state(files: list[tuple[str, str]]) -> OperatorSubtaskState:
    entries = tuple(
        RocksDBStateFile(name, path, 1, 0, path.startswith("../")) for name, path in files
    )
    return OperatorSubtaskState(keyed=(RocksDBKeyedStateHandle(0, 127, entries, len(entries)),))


def test_a_completed_checkpoint_removes_copies_that_no_later_restore_can_want(
    tmp_path: Path,
) -> None:
    store, storage = _store(tmp_path)
    w1 = store.writer(storage.writer(C1))
    old_sst, kept_sst = w1.write_shared_file("1.sst", b"a"), w1.write_shared_file("2.sst", b"b")
    manifest1 = w1.write_state_file("MANIFEST", b"m1")
    store.acknowledged(C1, [_rocksdb_state([("1.sst", old_sst), ("2.sst", kept_sst)])])
    w2 = store.writer(storage.writer(C2))
    new_sst = w2.write_shared_file("3.sst", b"c")
    manifest2 = w2.write_state_file("MANIFEST", b"m2")
    # Checkpoint 2 reuses 2.sst (uploaded for checkpoint 1) and drops 1.sst.
    store.acknowledged(C2, [_rocksdb_state([("2.sst", kept_sst), ("3.sst", new_sst)])])
    pending = store.writer(storage.writer(C3)).write_shared_file("4.sst", b"d")
    store.completed(C2)
    kept = {p.name for p in Path(store.directory).rglob("*") if p.is_file()}
    names = {rel.rsplit("/", 1)[-1] for rel in (kept_sst, new_sst, manifest2, pending)}
    assert kept == names | {n + ".check" for n in names}
    assert not _copy_of(store, C1, manifest1).exists() and not _copy_of(store, C1, old_sst).exists()
    store.discard()
    assert not os.path.exists(store.job_root)


class _RunningSum(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Any:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield f"{value[0]},{total}"


# RocksDB (private and shared files) in the fast tier; the heap's single file in the rest.
@pytest.mark.parametrize("backend", ["rocksdb", pytest.param("hashmap", marks=pytest.mark.slow)])
def test_a_crashed_job_restores_its_keyed_state_from_the_local_copies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, backend: str
) -> None:
    out, local = tmp_path / "out", tmp_path / "local"
    configuration = Configuration()
    conf = {
        "cairn.executor": "inprocess",
        "state.backend.type": backend,
        "execution.checkpointing.incremental": "true",
        "state.backend.local-recovery": "true",
        "taskmanager.state.local.root-dirs": str(local),
        "execution.checkpointing.dir": (tmp_path / "checkpoints").as_uri(),
        "cairn.testing.faults": "point=after-commit,attempt=0,checkpoint=2",
    }
    for key, value in conf.items():
        configuration.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    env.enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 10))
    n, keys = 3_000, 20
    source = DataGeneratorSource(
        lambda i: (f"k{i % keys}", 1), n, RateLimiterStrategy.per_second(20_000)
    )
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("src")
    sums = stream.key_by(lambda r: r[0]).process(_RunningSum()).uid("sum")
    sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    sums.sink_to(sink).uid("sink")
    with caplog.at_level(logging.INFO, logger="cairn.deploy.worker"):
        client = env.execute_async("local recovery")
        client.get_job_execution_result(timeout=120)
    assert client.job_master.restarts == 1
    lines = read_visible_lines(str(out))
    assert len(lines) == n, "exactly once: every record's running sum once"
    final: dict[str, int] = {}
    for line in lines:
        key, total = line.split(",")
        final[key] = max(final.get(key, 0), int(total))
    assert final == {f"k{k}": n // keys for k in range(keys)}
    reads = [
        tuple(map(int, m.groups()))
        for r in caplog.records
        if (m := re.search(r"read (\d+) bytes locally, (\d+) from the storage", r.getMessage()))
    ]
    assert reads, "the restoring workers report where their state came from"
    assert sum(local for local, _ in reads) > 0 and all(remote == 0 for _, remote in reads), reads
    # The job finished: its workers removed their copies.
    assert not any(p.is_file() for p in local.rglob("*"))


def test_with_a_signing_key_a_copy_must_match_the_digest_in_its_name(tmp_path: Path) -> None:
    key = SigningKey.parse("the-deployment-key-0123456789")
    storage = CheckpointStorage((tmp_path / "remote").as_uri(), "job", None, key)
    store = LocalRecoveryStore(str(tmp_path / "local"), storage.job_dir, 0)
    rel = store.writer(storage.writer(C1)).write_state_file("keyed", b"signed bytes")
    remote = storage.reader(storage.checkpoint_dir(C1))
    reader = store.reader(remote, C1)
    assert reader.read_state_range(rel, 0, 6) == b"signed" and reader.local_bytes == 6
    # Changed together with its record of what was written: only the digest tells.
    copy = _copy_of(store, C1, rel)
    copy.write_bytes(b"forged bytes")
    Path(str(copy) + ".check").write_text(f"12 {zlib.crc32(b'forged bytes')}")
    reader = store.reader(remote, C1)
    assert reader.read_state_range(rel, 0, 6) == b"signed" and reader.remote_bytes == 6


def test_a_worker_checks_the_shipped_metadata_instead_of_reading_the_storage(
    tmp_path: Path,
) -> None:
    key = SigningKey.parse("the-deployment-key-0123456789")
    storage = CheckpointStorage((tmp_path / "remote").as_uri(), "job", None, key)
    uid = OperatorUid("sum")
    subtasks = {SubtaskIndex(0): OperatorSubtaskState(inline=pickle_inline({"pos": 7}))}
    metadata = CheckpointMetadata(
        JobId("job"), C2, 1, 2, 128, operators={uid: OperatorMetadata(uid, 1, 128, subtasks)}
    )
    where = storage.checkpoint_dir(C2)  # nothing was ever written there
    shipped = RestoreInfo(where, C2, encode_metadata(metadata, key))
    restores = read_restores(storage, shipped)
    assert restores["sum"].subtasks[0].inline_value("pos") == 7
    forged = RestoreInfo(where, C2, encode_metadata(metadata, SigningKey.parse("x" * 24)))
    with pytest.raises(UnverifiedCheckpointError):
        read_restores(storage, forged)
