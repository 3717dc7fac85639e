"""Incremental RocksDB checkpoints through the real coordinator and file storage: a chain of
checkpoints reusing shared SST files, the shared-state registry deleting a file exactly when
no retained checkpoint (and no later snapshot) can reference it, counted on the storage;
restores of the newest and the oldest retained checkpoint; aborted checkpoints, savepoints,
failover; a missing shared file makes recovery fall back, naming the file."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.handles import (
    SHARED_PATH_PREFIX,
    OperatorSubtaskState,
    RocksDBKeyedStateHandle,
)
from cairn.checkpoint.messages import (
    AckResult,
    CheckpointFailureReason,
    SubtaskCheckpointMetrics,
    TaskAcknowledgement,
    TaskKey,
)
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.checkpoint.protocol import TerminalJobStatus, TriggerNow
from cairn.checkpoint.shared_state import SharedStateRegistry
from cairn.checkpoint.storage import CheckpointStorage, load_checkpoint, open_reader
from cairn.clock import ManualClock
from cairn.common.typeinfo import Types
from cairn.datastream.state import ValueStateDescriptor
from cairn.ids import CheckpointId, OperatorUid, SubtaskIndex, VertexId
from cairn.observability.tables import _size
from cairn.settings import CheckpointSettings, RetentionPolicy
from cairn.state import KeyGroupRange
from cairn.state.rocksdb import RocksDBKeyedStateBackend
from tests.unit import state_backends

TASK = TaskKey(VertexId(0), SubtaskIndex(0))
OTHER = TaskKey(VertexId(1), SubtaskIndex(0))  # a stateless task that acknowledges too
UID = OperatorUid("sum")
FULL = KeyGroupRange(0, 127)


class Gateway:
    def __init__(self) -> None:
        self.completed: list[int] = []
        self.failures: list[str] = []

    def trigger_sources(self, barrier: Any) -> None:
        pass

    def notify_complete(self, checkpoint_id: CheckpointId) -> None:
        self.completed.append(int(checkpoint_id))

    def notify_aborted(self, checkpoint_id: Any, reason: Any, message: str) -> None:
        pass

    def fail_job(self, reason: str) -> None:
        self.failures.append(reason)


class Job:
    """One RocksDB subtask, its coordinator (2 retained) and storage under ``tmp_path``."""

    def __init__(
        self,
        tmp_path: Path,
        retention: RetentionPolicy = RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS,
        retained: int = 2,
    ) -> None:
        self.root = tmp_path / "chk"
        self.storage = CheckpointStorage(f"file://{self.root}", "job")
        self.gateway = Gateway()
        settings = CheckpointSettings(interval_ms=100, retained=retained, retention=retention)
        self.coord = CheckpointCoordinator(
            "job",
            settings,
            self.storage,
            self.gateway,
            [TASK, OTHER],
            [TASK],
            {UID: (1, 128), OperatorUid("map"): (1, 128)},
            ManualClock(1_000),
        )
        self.backend = self.new_backend()
        self.expected: dict[int, dict[str, int]] = {}  # checkpoint -> key -> value
        self.values: dict[str, int] = {}

    @staticmethod
    def new_backend() -> RocksDBKeyedStateBackend:
        return state_backends.rocksdb(FULL, 128, incremental=True)

    def update(self, keys: range, value: int) -> None:
        s = self.backend.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
        for i in keys:
            self.backend.set_current_key(f"k{i}")
            s.update(value)
            self.values[f"k{i}"] = value

    def trigger(self) -> int:
        decision = self.coord.trigger_checkpoint(force=True)
        assert isinstance(decision, TriggerNow)
        return int(decision.checkpoint_id)

    def snapshot_and_ack(
        self, cid: int, notify: bool = True, other: bool = True
    ) -> RocksDBKeyedStateHandle:
        handle = self.backend.snapshot(cid)(self.storage.writer(CheckpointId(cid)))
        assert isinstance(handle, RocksDBKeyedStateHandle)
        self.expected[cid] = dict(self.values)
        ack = TaskAcknowledgement(
            CheckpointId(cid),
            TASK,
            {UID: OperatorSubtaskState(keyed=(handle,))},
            SubtaskCheckpointMetrics(state_size=handle.size),
        )
        assert self.coord.receive_ack(ack) is AckResult.SUCCESS
        if other:
            self.coord.receive_ack(
                TaskAcknowledgement(CheckpointId(cid), OTHER, {}, SubtaskCheckpointMetrics())
            )
        if notify and cid in self.gateway.completed:
            self.backend.notify_checkpoint_complete(cid)
        return handle

    def checkpoint(self) -> RocksDBKeyedStateHandle:
        return self.snapshot_and_ack(self.trigger())

    def shared_on_storage(self) -> set[str]:
        """The shared files on the storage once the deletions decided so far ran."""
        assert self.coord.wait_for_cleanup(10.0)
        shared = self.root / "job" / "shared"
        return {SHARED_PATH_PREFIX + p.name for p in shared.iterdir()} if shared.exists() else set()

    def referenced_by_retained(self) -> set[str]:
        return {
            f.path
            for cp in self.coord.completed_checkpoints()
            for h in _handles(cp)
            for f in h.shared_files()
        }

    def restore(self, cp: CompletedCheckpoint) -> dict[str, int]:
        b = self.new_backend()
        b.restore(list(_handles(cp)), open_reader(cp.directory))
        s = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
        out = {}
        for k in b.keys("v"):
            b.set_current_key(k)
            out[k] = s.value()
        return out


def _handles(cp: CompletedCheckpoint) -> list[RocksDBKeyedStateHandle]:
    md = load_checkpoint(cp.directory).metadata
    return [
        h
        for op in md.operators.values()
        for s in op.subtasks.values()
        for h in s.keyed
        if isinstance(h, RocksDBKeyedStateHandle)
    ]


def test_chain_of_five_deletes_shared_files_exactly_when_unreferenced(tmp_path: Path) -> None:
    job = Job(tmp_path)
    sizes = []
    for n in range(1, 6):
        job.update(range(0, 2000) if n == 1 else range(n * 20, n * 20 + 20), n)  # 1 % changes
        if n == 4:
            job.backend.compact()  # merges older SST files: they leave the newest checkpoints
        handle = job.checkpoint()
        sizes.append((handle.size, handle.checkpointed_size))
        # exactly the files some retained checkpoint references are on the storage
        assert job.shared_on_storage() == job.referenced_by_retained()
        retained = [int(cp.checkpoint_id) for cp in job.coord.completed_checkpoints()]
        assert retained == list(range(max(1, n - 1), n + 1))
    # incremental: checkpoints 2, 3 and 5 upload a fraction of their full size
    for n in (1, 2, 4):
        full, added = sizes[n]
        assert added < full / 2, (n, sizes)
    assert sizes[0][1] == sizes[0][0]  # the first uploads everything
    # the compaction before 4 made files of 1-3 unreferenced once 3 was discarded: deleted
    newest, oldest = job.coord.completed_checkpoints()[-1], job.coord.completed_checkpoints()[0]
    assert job.restore(newest) == job.expected[5]
    assert job.restore(oldest) == job.expected[4]
    assert len(job.shared_on_storage()) > 0
    job.coord.shutdown(TerminalJobStatus.FINISHED)
    assert not (job.root / "job").exists()  # not retained: everything is gone


def test_files_of_an_aborted_checkpoint_are_deleted_and_never_reused(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job.update(range(100), 1)
    job.checkpoint()
    before = job.shared_on_storage()
    job.update(range(100, 200), 2)
    handle = job.snapshot_and_ack(job.trigger(), other=False)  # acknowledged by one task
    new = {f.path for f in handle.shared_files()} - before
    assert new and new <= job.shared_on_storage()
    job.coord.abort_all_pending("test")  # e.g. a failover: the backend is replaced
    assert job.shared_on_storage() == before == job.referenced_by_retained()


def test_late_ack_of_an_aborted_checkpoint_removes_its_new_shared_files(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job.update(range(100), 1)
    job.checkpoint()
    job.update(range(100, 200), 2)
    cid = job.trigger()
    job.coord.receive_decline(_decline(cid))
    # the upload finishes after the abort:
    handle = job.backend.snapshot(cid)(job.storage.writer(CheckpointId(cid)))
    assert isinstance(handle, RocksDBKeyedStateHandle)
    ack = TaskAcknowledgement(
        CheckpointId(cid),
        TASK,
        {UID: OperatorSubtaskState(keyed=(handle,))},
        SubtaskCheckpointMetrics(),
    )
    assert job.coord.receive_ack(ack) is AckResult.DISCARDED
    assert job.shared_on_storage() == job.referenced_by_retained()


def _decline(cid: int) -> Any:
    from cairn.checkpoint.messages import TaskDecline

    return TaskDecline(CheckpointId(cid), TASK, CheckpointFailureReason.CHECKPOINT_DECLINED, "no")


@pytest.mark.parametrize("compacted", [False, True])
def test_a_file_is_kept_while_a_later_snapshot_may_still_reuse_it(
    tmp_path: Path, compacted: bool
) -> None:
    """The task hears of checkpoint 1's completion late: snapshot 2 (not knowing 1) uploads
    its files again; completing 2 discards 1 (one retained), leaving 1's copies unreferenced;
    then the task learns of 1 and snapshot 3 reuses 1's copies. They must have survived.

    Snapshot 4's flush makes the fourth L0 file, which starts a background compaction; if it
    ends before the checkpoint lists the live files (it did, once, under load), 4 references
    none of 3's files, and those stay until a checkpoint based on 4 completes (the registry
    cannot know that the backend no longer has them). ``compacted`` makes that case certain."""
    job = Job(tmp_path, retained=1)
    job.update(range(500), 1)
    job.snapshot_and_ack(job.trigger(), notify=False)  # 1
    job.update(range(500, 520), 2)
    h2 = job.snapshot_and_ack(job.trigger(), notify=False)  # 2, base: none
    assert h2.base_checkpoint_id is None
    assert job.shared_on_storage() > job.referenced_by_retained()  # 1's copies wait
    job.backend.notify_checkpoint_complete(1)  # late
    job.update(range(520, 540), 3)
    h3 = job.snapshot_and_ack(job.trigger())  # 3, based on 1
    assert h3.base_checkpoint_id == 1
    assert not {f.path for f in h3.files} & {f.path for f in h2.files}  # 1's copies
    assert job.restore(job.coord.completed_checkpoints()[-1]) == job.expected[3]
    job.update(range(540, 560), 4)
    if compacted:
        job.backend.compact()
    h4 = job.checkpoint()  # based on 3: 2's copies can never be reused, they go
    assert h4.base_checkpoint_id == 3
    on_storage, retained = job.shared_on_storage(), job.referenced_by_retained()
    only_2 = {f.path for f in h2.shared_files()} - retained
    assert only_2 and not only_2 & on_storage
    assert retained <= on_storage
    # beyond the retained checkpoint only 3's files, which a snapshot based on 3 may reuse
    kept_for_3 = on_storage - retained
    assert kept_for_3 <= {f.path for f in h3.shared_files()}
    if compacted:  # 4 references none of 3's files, which stay until a base moves past 3
        assert kept_for_3
        job.update(range(560, 580), 5)
        job.checkpoint()  # based on 4 (2 L0 files: no compaction can intervene)
        assert job.shared_on_storage() == job.referenced_by_retained()


def test_savepoint_is_self_contained_and_its_working_files_go(tmp_path: Path) -> None:
    """A savepoint copies its shared files into its own directory; the ones its snapshot
    uploaded to the shared directory are deleted once no later snapshot can reuse them (the
    tasks are not told a savepoint completed, so they never do)."""
    job = Job(tmp_path)
    job.update(range(300), 1)
    job.checkpoint()
    job.update(range(300, 320), 2)
    future = job.coord.trigger_savepoint(str(tmp_path / "sp"))
    cid = max(job.coord.pending_checkpoint_ids())
    job.snapshot_and_ack(cid)
    savepoint = future.result(timeout=5)
    md = load_checkpoint(savepoint.directory).metadata
    (handle,) = [h for op in md.operators.values() for s in op.subtasks.values() for h in s.keyed]
    assert isinstance(handle, RocksDBKeyedStateHandle) and not handle.shared_files()
    assert all((tmp_path / "sp" / f.path).exists() for f in handle.files)
    job.update(range(320, 340), 3)
    h3 = job.checkpoint()
    assert h3.base_checkpoint_id == 1
    newest = job.coord.completed_checkpoints()[-1]
    assert job.restore(newest) == job.values
    assert job.restore(savepoint) == job.expected[cid]
    job.update(range(340, 360), 4)
    job.checkpoint()  # based on 3: the savepoint's working files go now
    assert job.shared_on_storage() == job.referenced_by_retained()


def test_missing_shared_file_makes_recovery_fall_back_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = Job(tmp_path)
    job.update(range(300), 1)
    job.checkpoint()
    job.update(range(300, 320), 2)
    h2 = job.checkpoint()
    only_2 = {f.path for f in h2.shared_files()} - {
        f.path for h in _handles(job.coord.completed_checkpoints()[0]) for f in h.shared_files()
    }
    victim = sorted(only_2)[0]
    (job.root / "job" / "shared" / victim.rsplit("/", 1)[1]).unlink()
    with caplog.at_level(logging.WARNING):
        chosen = job.coord.restore_point()
    assert chosen is not None and int(chosen.checkpoint_id) == 1
    assert victim.rsplit("/", 1)[1] in caplog.text


def test_failover_and_retained_shutdown_remove_only_unreferenced_files(tmp_path: Path) -> None:
    job = Job(tmp_path, RetentionPolicy.RETAIN_ON_CANCELLATION)
    job.update(range(300), 1)
    job.checkpoint()
    job.update(range(300, 320), 2)
    job.backend.compact()
    job.checkpoint()
    job.update(range(320, 340), 3)
    job.backend.compact()
    job.checkpoint()  # 1 discarded; its compacted-away files wait for the backend's base
    job.update(range(340, 360), 4)
    cid = job.trigger()
    job.backend.snapshot(cid)(job.storage.writer(CheckpointId(cid)))  # killed before its ack
    job.coord.shutdown(TerminalJobStatus.CANCELED)
    assert job.shared_on_storage() == job.referenced_by_retained()


def test_registry_counts_references_per_checkpoint() -> None:
    from cairn.checkpoint.handles import RocksDBStateFile

    def h(base: int | None, *names: str) -> RocksDBKeyedStateHandle:
        files = tuple(RocksDBStateFile(n, SHARED_PATH_PREFIX + n, 1, 0, True) for n in names)
        return RocksDBKeyedStateHandle(0, 127, files, len(files), -1, "b", base)

    r = SharedStateRegistry()
    assert r.register(1, [h(None, "a")]) == []
    assert r.register(1, [h(None, "a")]) == []  # the same checkpoint counts a file once
    assert r.register(2, [h(1, "a", "b")]) == []
    assert r.release(1) == []  # "a" is still in 2
    assert r.release(2) == []  # last used by 2, base 1: a later snapshot might reuse both
    assert r.register(3, [h(2, "c")]) == []  # base 2 is not newer than their last use
    assert r.register(4, [h(3, "c")]) == [SHARED_PATH_PREFIX + "a", SHARED_PATH_PREFIX + "b"]


def test_cairn_checkpoints_shows_the_full_size_and_what_each_checkpoint_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cairn.cli.main import main

    job = Job(tmp_path, RetentionPolicy.RETAIN_ON_CANCELLATION)
    job.update(range(2000), 1)
    job.checkpoint()
    job.update(range(20), 2)
    h2 = job.checkpoint()
    capsys.readouterr()
    assert main(["checkpoints", str(job.root / "job")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    rows = [dict(zip(header, re.split(r"\s{2,}", r.strip()), strict=True)) for r in lines[2:]]
    by_id = {int(r["id"]): r for r in rows}
    assert by_id[1]["added"] == by_id[1]["size"]  # the first checkpoint uploads everything
    assert h2.checkpointed_size < h2.size / 2
    assert by_id[2]["added"] == _size(h2.checkpointed_size) != by_id[2]["size"]
    md = load_checkpoint(job.coord.completed_checkpoints()[-1].directory).metadata
    assert md.checkpointed_size == h2.checkpointed_size < md.state_size == h2.size
