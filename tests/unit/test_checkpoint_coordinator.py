"""CheckpointCoordinator with real storage (tmp_path and memory://), a manual clock and a
recording gateway standing in for the network edge."""

from __future__ import annotations

import enum
import logging
import shutil
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from fsspec.core import url_to_fs

from cairn.checkpoint import restore
from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.errors import (
    CheckpointFailedError,
    FallbackRefusedError,
    NoUsableCheckpointError,
)
from cairn.checkpoint.handles import (
    KeyedStateHandle,
    OperatorSubtaskState,
    StreamRange,
    pickle_inline,
)
from cairn.checkpoint.inspection import verify
from cairn.checkpoint.messages import (
    AckResult,
    CheckpointFailureReason,
    SubtaskCheckpointMetrics,
    TaskAcknowledgement,
    TaskDecline,
    TaskKey,
)
from cairn.checkpoint.protocol import (
    Blocked,
    FallbackRule,
    TerminalJobStatus,
    TriggerNow,
    WaitUntil,
)
from cairn.checkpoint.storage import CheckpointStorage, load_checkpoint, open_reader
from cairn.clock import ManualClock
from cairn.events import AlignmentMode, CheckpointBarrier, CheckpointType
from cairn.ids import CheckpointId, OperatorUid, SubtaskIndex, VertexId
from cairn.settings import CheckpointSettings, RetentionPolicy

SRC0, SRC1 = TaskKey(VertexId(0), SubtaskIndex(0)), TaskKey(VertexId(0), SubtaskIndex(1))
AGG = TaskKey(VertexId(1), SubtaskIndex(0))
TASKS = [SRC0, SRC1, AGG]
UIDS = {SRC0: OperatorUid("src"), SRC1: OperatorUid("src"), AGG: OperatorUid("agg")}
T0 = 1_000_000


@dataclass
class RecordingGateway:
    barriers: list[CheckpointBarrier] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)
    aborted: list[tuple[int, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def trigger_sources(self, barrier: CheckpointBarrier) -> None:
        self.barriers.append(barrier)

    def notify_complete(self, checkpoint_id: CheckpointId) -> None:
        self.completed.append(checkpoint_id)

    def notify_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason, message: str
    ) -> None:
        self.aborted.append((checkpoint_id, f"{reason.name}: {message}"))

    def fail_job(self, reason: str) -> None:
        self.failures.append(reason)


@dataclass
class Harness:
    coord: CheckpointCoordinator
    gateway: RecordingGateway
    clock: ManualClock
    storage: CheckpointStorage

    def ack(self, cid: int, task: TaskKey, payload: bytes | None = None) -> AckResult:
        """A task's part: write its state file through the real storage, then acknowledge."""
        data = payload if payload is not None else f"{task}@{cid}".encode()
        rel = self.storage.writer(CheckpointId(cid)).write_state_file(UIDS[task], data)
        handle = KeyedStateHandle(
            rel,
            0,
            127,
            {task.subtask_index: StreamRange(0, len(data), zlib.crc32(data))},
            len(data),
        )
        state = OperatorSubtaskState(keyed=(handle,), inline=pickle_inline({"offset": cid * 10}))
        metrics = SubtaskCheckpointMetrics(sync_duration_ms=1, state_size=len(data))
        return self.coord.receive_ack(
            TaskAcknowledgement(CheckpointId(cid), task, {UIDS[task]: state}, metrics)
        )

    def ack_all(self, cid: int) -> None:
        for task in TASKS:
            assert self.ack(cid, task) is AckResult.SUCCESS

    def checkpoint(self) -> int:
        """Trigger (forced) and complete one checkpoint; return its id."""
        decision = self.coord.trigger_checkpoint(force=True)
        assert isinstance(decision, TriggerNow)
        self.ack_all(decision.checkpoint_id)
        return decision.checkpoint_id


def exists(url: str) -> bool:
    fs, path = url_to_fs(url)
    return bool(fs.exists(path))


@pytest.fixture(params=["file", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "file":
        yield str(tmp_path / "checkpoints")
        return
    url = f"memory://cairn-coord-{uuid.uuid4().hex}"
    yield url
    fs, path = url_to_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def make(
    root: str, job: str = "job-1", fallback: FallbackRule = FallbackRule(), **settings: object
) -> Harness:
    base = CheckpointSettings(interval_ms=100, timeout_ms=1_000)
    cs = replace(base, **settings)  # type: ignore[arg-type]  # keyword values are mixed types
    clock, gateway = ManualClock(T0), RecordingGateway()
    storage = CheckpointStorage(root, job)
    coord = CheckpointCoordinator(
        job,
        cs,
        storage,
        gateway,
        TASKS,
        [SRC0, SRC1],
        {OperatorUid("src"): (2, 128), OperatorUid("agg"): (1, 128)},
        clock,
        fallback=fallback,
    )
    return Harness(coord, gateway, clock, storage)


# --- triggering ---------------------------------------------------------------------------------


def test_periodic_ticks_trigger_barriers_with_increasing_ids(root: str) -> None:
    h = make(root)
    assert h.coord.tick() == WaitUntil(T0 + 100, "checkpoint interval of 100 ms")
    assert h.gateway.barriers == []
    h.clock.advance(100)
    assert h.coord.tick() == TriggerNow(CheckpointId(1))
    h.ack_all(1)
    h.clock.advance(100)
    h.coord.tick()
    assert [(b.checkpoint_id, b.timestamp_ms) for b in h.gateway.barriers] == [
        (1, T0 + 100),
        (2, T0 + 200),
    ]
    assert h.gateway.barriers[0].options.alignment is AlignmentMode.ALIGNED
    assert h.coord.next_tick_ms() == T0 + 300


def test_min_pause_counts_from_completion(root: str) -> None:
    h = make(root, min_pause_ms=500)
    h.clock.advance(100)
    h.coord.tick()
    h.clock.advance(50)
    h.ack_all(1)  # completes at T0+150
    h.clock.advance(50)
    assert h.coord.tick() == WaitUntil(
        T0 + 650, "min pause of 500 ms after the last completed checkpoint"
    )
    h.clock.advance_to(T0 + 649)
    h.coord.tick()
    assert len(h.gateway.barriers) == 1
    h.clock.advance_to(T0 + 650)
    assert h.coord.tick() == TriggerNow(CheckpointId(2))


@pytest.mark.parametrize("max_concurrent", [1, 2])
def test_max_concurrent_checkpoints(root: str, max_concurrent: int) -> None:
    h = make(root, max_concurrent=max_concurrent)
    h.clock.advance(100)
    h.coord.tick()
    h.clock.advance(100)
    decision = h.coord.tick()
    if max_concurrent == 1:
        assert isinstance(decision, Blocked) and "too many concurrent" in decision.reason
        assert h.coord.pending_checkpoint_ids() == [1]
    else:
        assert decision == TriggerNow(CheckpointId(2))
        assert h.coord.pending_checkpoint_ids() == [1, 2]


def test_forced_final_checkpoint_ignores_pause_interval_and_concurrency(root: str) -> None:
    h = make(root, min_pause_ms=10_000, interval_ms=-1)
    assert h.checkpoint() == 1
    assert isinstance(h.coord.trigger_checkpoint(), WaitUntil)  # min pause holds for manual
    h.coord.trigger_checkpoint(force=True)
    assert h.coord.trigger_checkpoint(force=True) == TriggerNow(CheckpointId(3))
    assert isinstance(h.coord.tick(), Blocked)  # periodic disabled


# --- completion ---------------------------------------------------------------------------------


def test_metadata_is_written_only_after_every_ack(root: str) -> None:
    h = make(root)
    h.coord.trigger_checkpoint()
    assert h.ack(1, SRC0) is AckResult.SUCCESS
    assert h.ack(1, AGG) is AckResult.SUCCESS
    chk = h.storage.checkpoint_dir(1)
    assert exists(chk) and not exists(chk + "/_metadata")
    assert h.coord.completed_checkpoints() == [] and h.gateway.completed == []
    h.clock.advance(30)
    assert h.ack(1, SRC1) is AckResult.SUCCESS
    assert exists(chk + "/_metadata")
    assert h.gateway.completed == [1]
    cp = load_checkpoint(chk)
    assert h.coord.latest_completed() == cp
    verify(cp.metadata, cp.directory, check_crc=True)
    src = cp.metadata.operators[OperatorUid("src")]
    assert (src.parallelism, sorted(src.subtasks)) == (2, [0, 1])
    assert src.subtasks[1].inline_value("offset") == 10
    assert cp.metadata.duration_ms == 30 and cp.metadata.stats.num_subtasks == 3
    stats = h.coord.stats.get(CheckpointId(1))
    assert stats is not None and stats.end_to_end_duration_ms == 30
    assert stats.subtasks[AGG].metrics.sync_duration_ms == 1


def test_retained_count_subsumes_old_checkpoints(root: str) -> None:
    h = make(root, retained=2)
    for _ in range(3):
        h.checkpoint()
    assert [cp.checkpoint_id for cp in h.coord.completed_checkpoints()] == [2, 3]
    assert not exists(h.storage.checkpoint_dir(1))
    assert exists(h.storage.checkpoint_dir(2) + "/_metadata")
    assert h.gateway.completed == [1, 2, 3]


def test_completion_subsumes_older_pending_checkpoint(root: str) -> None:
    h = make(root, max_concurrent=2, tolerable_failures=0)
    h.coord.trigger_checkpoint()
    h.ack(1, SRC0)
    h.coord.trigger_checkpoint()
    h.ack_all(2)
    assert h.gateway.completed == [2]
    assert [(c, r.split(":")[0]) for c, r in h.gateway.aborted] == [(1, "CHECKPOINT_SUBSUMED")]
    assert not exists(h.storage.checkpoint_dir(1)) and h.gateway.failures == []


def test_ack_results_are_typed(root: str) -> None:
    h = make(root)
    h.coord.trigger_checkpoint(force=True)
    assert h.ack(1, SRC0) is AckResult.SUCCESS
    assert h.ack(1, SRC0) is AckResult.DUPLICATE
    stranger = TaskKey(VertexId(7), SubtaskIndex(0))
    assert h.coord.receive_ack(TaskAcknowledgement(CheckpointId(1), stranger)) is (
        AckResult.UNKNOWN
    )
    assert h.coord.receive_ack(TaskAcknowledgement(CheckpointId(99), SRC0)) is AckResult.UNKNOWN
    h.ack(1, SRC1)
    h.ack(1, AGG)
    assert h.ack(1, AGG) is AckResult.DUPLICATE  # after completion
    assert h.gateway.completed == [1]


# --- failures -----------------------------------------------------------------------------------


def test_timeout_aborts_and_removes_files_and_late_ack_is_discarded(root: str) -> None:
    h = make(root, tolerable_failures=5, interval_ms=-1)
    h.coord.trigger_checkpoint()
    h.ack(1, SRC0)
    assert exists(h.storage.checkpoint_dir(1))
    h.clock.advance(999)
    h.coord.tick()
    assert h.coord.pending_checkpoint_ids() == [1]
    h.clock.advance(1)
    h.coord.tick()
    assert h.coord.pending_checkpoint_ids() == []
    assert not exists(h.storage.checkpoint_dir(1))
    ((cid, reason),) = h.gateway.aborted
    assert cid == 1 and reason.startswith("CHECKPOINT_EXPIRED")
    assert "vertex 0 subtask 1" in reason and "vertex 1 subtask 0" in reason  # who was missing
    stats = h.coord.stats.get(CheckpointId(1))
    assert stats is not None and stats.failure_reason == "CHECKPOINT_EXPIRED"
    # A slow task finishes writing after the abort: its files must not linger.
    assert h.ack(1, SRC1) is AckResult.DISCARDED
    assert not exists(h.storage.checkpoint_dir(1))
    assert h.gateway.failures == []


def test_consecutive_failures_beyond_tolerance_fail_the_job(root: str) -> None:
    h = make(root, tolerable_failures=1, timeout_ms=100, interval_ms=-1)
    h.coord.trigger_checkpoint()
    h.clock.advance(100)
    h.coord.tick()
    assert h.gateway.failures == []
    h.checkpoint()  # a success resets the count
    h.coord.trigger_checkpoint()
    h.clock.advance(100)
    h.coord.tick()
    assert h.gateway.failures == []
    h.coord.trigger_checkpoint()
    h.clock.advance(100)
    h.coord.tick()
    assert len(h.gateway.failures) == 1
    assert "tolerable failure threshold" in h.gateway.failures[0]


def test_decline_aborts_and_counts_as_failure(root: str) -> None:
    h = make(root, tolerable_failures=0)
    h.coord.trigger_checkpoint()
    h.ack(1, SRC0)
    declined = h.coord.receive_decline(
        TaskDecline(CheckpointId(1), AGG, CheckpointFailureReason.CHECKPOINT_DECLINED, "disk full")
    )
    assert declined and not exists(h.storage.checkpoint_dir(1))
    assert "disk full" in h.gateway.aborted[0][1]
    assert len(h.gateway.failures) == 1
    assert not h.coord.receive_decline(
        TaskDecline(CheckpointId(1), SRC1, CheckpointFailureReason.CHECKPOINT_DECLINED)
    )


def test_decline_by_a_task_not_ready_is_not_counted(root: str) -> None:
    h = make(root, tolerable_failures=0)
    h.coord.trigger_checkpoint()
    h.coord.receive_decline(
        TaskDecline(
            CheckpointId(1),
            SRC1,
            CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY,
            "starting",
        )
    )
    assert h.gateway.aborted[0][0] == 1 and h.gateway.failures == []


def test_failover_aborts_pending_without_counting_and_ids_keep_increasing(root: str) -> None:
    h = make(root, tolerable_failures=0, max_concurrent=2)
    h.coord.trigger_checkpoint()
    h.coord.trigger_checkpoint()
    h.coord.abort_all_pending("task failed: boom")
    assert [c for c, _ in h.gateway.aborted] == [1, 2] and h.gateway.failures == []
    assert h.checkpoint() == 3


def test_metadata_write_failure_aborts_as_io_error(tmp_path: Path) -> None:
    h = make(str(tmp_path), tolerable_failures=0)
    (tmp_path / "job-1").mkdir()
    (tmp_path / "job-1" / "chk-1").write_text("a file where the directory should be")
    h.coord.trigger_checkpoint()
    for task in TASKS:
        h.coord.receive_ack(TaskAcknowledgement(CheckpointId(1), task))
    assert h.gateway.completed == [] and h.coord.completed_checkpoints() == []
    assert h.gateway.aborted[0][1].startswith("IO_EXCEPTION")
    assert len(h.gateway.failures) == 1


# --- restore ------------------------------------------------------------------------------------


def test_no_checkpoint_means_fresh_start(root: str) -> None:
    assert make(root).coord.restore_point() is None


def test_corrupt_newest_state_file_falls_back_to_previous(
    root: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = make(root, retained=2)
    h.checkpoint()
    h.checkpoint()
    newest = h.coord.latest_completed()
    assert newest is not None
    victim = sorted(newest.metadata.referenced_files())[0]
    fs, path = url_to_fs(f"{newest.directory}/{victim}")
    fs.pipe_file(path, b"")
    with caplog.at_level(logging.WARNING, logger="cairn.checkpoint"):
        chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 1
    assert any(victim in r.getMessage() and "truncated" in r.getMessage() for r in caplog.records)
    assert [cp.checkpoint_id for cp in h.coord.completed_checkpoints()] == [1]


def _flip_bytes_keeping_size(url: str) -> None:
    fs, path = url_to_fs(url)
    data = bytearray(fs.cat_file(path))
    data[0] ^= 0xFF
    fs.pipe_file(path, bytes(data))


def test_same_size_corrupt_state_file_fails_its_crc_and_falls_back(
    root: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = make(root, retained=2)
    h.checkpoint()
    h.checkpoint()
    newest = h.coord.latest_completed()
    assert newest is not None
    victim = sorted(newest.metadata.referenced_files())[0]
    _flip_bytes_keeping_size(f"{newest.directory}/{victim}")
    with caplog.at_level(logging.WARNING, logger="cairn.checkpoint"):
        chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 1
    assert any(
        victim in r.getMessage() and "CRC-32 mismatch" in r.getMessage() for r in caplog.records
    )


def test_restore_verifies_only_until_the_first_usable_checkpoint(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = make(root, retained=3)
    for _ in range(3):
        h.checkpoint()
    examined: list[str] = []
    real = restore.examine

    def spy(directory: str, *args: object, **kwargs: object) -> object:
        examined.append(directory.rsplit("/", 1)[-1])
        return real(directory, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(restore, "examine", spy)
    chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 3
    assert examined == ["chk-3"]  # CRCs read every byte: older ones are not read at all


def test_corrupt_newest_metadata_falls_back_with_checksum_reason(
    root: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = make(root, retained=2)
    h.checkpoint()
    h.checkpoint()
    fs, path = url_to_fs(h.storage.checkpoint_dir(2) + "/_metadata")
    data = bytearray(fs.cat_file(path))
    data[-3] ^= 0xFF
    fs.pipe_file(path, bytes(data))
    with caplog.at_level(logging.WARNING, logger="cairn.checkpoint"):
        chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 1
    assert any("checksum mismatch" in r.getMessage() for r in caplog.records)


def test_nothing_usable_is_a_clear_error_naming_the_path(root: str) -> None:
    h = make(root, retained=1)
    h.checkpoint()
    cp = h.coord.latest_completed()
    assert cp is not None
    victim = next(iter(cp.metadata.referenced_files()))
    fs, path = url_to_fs(f"{cp.directory}/{victim}")
    fs.rm(path)
    with pytest.raises(NoUsableCheckpointError) as err:
        h.coord.restore_point()
    assert f"{cp.directory}/{victim}" in str(err.value) and "missing" in str(err.value)
    assert err.value.reasons[0][0] == cp.directory


def test_restore_from_retained_checkpoint_of_previous_run(root: str) -> None:
    first = make(root, "run-1", retention=RetentionPolicy.RETAIN_ON_CANCELLATION)
    for _ in range(3):
        first.checkpoint()
    first.coord.shutdown(TerminalJobStatus.CANCELED)
    assert exists(first.storage.checkpoint_dir(3) + "/_metadata")

    second = make(root, "run-2", retained=1)
    chosen = second.coord.restore_point(first.storage.job_dir)
    assert chosen is not None and chosen.checkpoint_id == 3
    assert second.coord.next_checkpoint_id == 4
    assert second.coord.restore_point() == chosen  # the restore point for a quick failover
    assert second.checkpoint() == 4
    assert second.coord.stats.snapshot().counts.restored == 2
    # Subsumed, but owned by the user: the previous run's checkpoint stays.
    assert [cp.checkpoint_id for cp in second.coord.completed_checkpoints()] == [4]
    assert exists(first.storage.checkpoint_dir(3) + "/_metadata")


def test_claim_mode_makes_a_restored_checkpoint_the_jobs_own_but_never_a_savepoint(
    root: str, tmp_path: Path
) -> None:
    first = make(root, "run-1", retention=RetentionPolicy.RETAIN_ON_CANCELLATION)
    first.checkpoint()
    savepoint = first.coord.trigger_savepoint(str(tmp_path / "sp"))
    first.ack_all(2)
    sp_dir = savepoint.result(timeout=0).directory
    first.coord.shutdown(TerminalJobStatus.CANCELED)

    claimed = make(root, "run-2", retained=1)
    chosen = claimed.coord.restore_point(first.storage.checkpoint_dir(1), claim=True)
    assert chosen is not None and chosen.checkpoint_id == 1
    claimed.checkpoint()  # subsumes the claimed checkpoint: the job deletes it (CLAIM)
    assert not exists(first.storage.checkpoint_dir(1))

    from_savepoint = make(root, "run-3", retained=1)
    assert from_savepoint.coord.restore_point(sp_dir, claim=True) is not None
    from_savepoint.checkpoint()
    assert exists(sp_dir + "/_metadata")  # a savepoint stays the user's


# --- falling back past committed checkpoints ----------------------------------------------------

SINK = FallbackRule(committing_sinks=("file-sink",))


def _truncate_metadata(h: Harness, cid: int) -> None:
    fs, path = url_to_fs(h.storage.checkpoint_dir(cid) + "/_metadata")
    fs.pipe_file(path, bytes(fs.cat_file(path))[:12])


def test_fallback_past_an_announced_checkpoint_is_refused_with_a_committing_sink(
    root: str,
) -> None:
    h = make(root, fallback=SINK, retained=3)
    for _ in range(3):
        h.checkpoint()
    assert h.gateway.completed == [1, 2, 3]  # announced: the sink may have committed chk-3
    _truncate_metadata(h, 3)
    with pytest.raises(FallbackRefusedError) as err:
        h.coord.restore_point()
    message = str(err.value)
    chk3 = h.storage.checkpoint_dir(3)
    assert f"refusing to fall back past checkpoint 3 ({chk3})" in message
    assert "after checkpoint 2 (up to checkpoint 3) a second time" in message
    assert "cairn.recovery.allow-fallback-past-committed" in message
    assert isinstance(err.value, NoUsableCheckpointError)  # handled like nothing usable
    assert h.coord.stats.snapshot().counts.restored == 0


def test_fallback_past_an_announced_checkpoint_on_request_warns_of_duplicates(
    root: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = make(root, fallback=FallbackRule(("file-sink",), True), retained=3)
    for _ in range(3):
        h.checkpoint()
    _truncate_metadata(h, 3)
    with caplog.at_level(logging.WARNING, logger="cairn.checkpoint"):
        chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 2
    assert any("a second time" in r.getMessage() for r in caplog.records)
    # The unusable one is not offered again; newer checkpoints restore normally.
    assert h.checkpoint() == 4
    chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 4


def test_a_previous_runs_checkpoints_count_as_announced(root: str) -> None:
    first = make(root, "run-1", retained=2, retention=RetentionPolicy.RETAIN_ON_CANCELLATION)
    first.checkpoint()
    first.checkpoint()
    first.coord.shutdown(TerminalJobStatus.CANCELED)
    _truncate_metadata(first, 2)
    # They have _metadata: the first run completed them and may have committed their output.
    second = make(root, "run-2", fallback=SINK)
    with pytest.raises(FallbackRefusedError, match=r"fall back past checkpoint 2 .*run-1/chk-2"):
        second.coord.restore_point(first.storage.job_dir)
    allowed = make(root, "run-3", fallback=FallbackRule(("file-sink",), True))
    chosen = allowed.coord.restore_point(first.storage.job_dir)
    assert chosen is not None and chosen.checkpoint_id == 1


def test_a_checkpoint_a_worker_could_not_restore_is_not_restored_again(root: str) -> None:
    h = make(root, retained=2)
    h.checkpoint()
    h.checkpoint()
    chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 2
    h.coord.mark_unusable(chosen.directory, 2, "key group 3 failed its CRC-32 check")
    older = h.coord.restore_point()
    assert older is not None and older.checkpoint_id == 1  # no committing sink: allowed
    h.coord.mark_unusable(older.directory, 1, "key group 5 cannot be decoded")
    # Never a fresh start after checkpoints existed: that would replay everything.
    with pytest.raises(NoUsableCheckpointError) as err:
        h.coord.restore_point()
    assert "CRC-32 check" in str(err.value) and "cannot be decoded" in str(err.value)


def test_a_worker_restore_failure_with_a_committing_sink_refuses_the_fallback(root: str) -> None:
    h = make(root, fallback=SINK, retained=2)
    h.checkpoint()
    h.checkpoint()
    chosen = h.coord.restore_point()
    assert chosen is not None
    h.coord.mark_unusable(chosen.directory, 2, "key group 3 failed its CRC-32 check")
    with pytest.raises(FallbackRefusedError, match="key group 3 failed its CRC-32 check"):
        h.coord.restore_point()


def test_an_explicit_restore_that_workers_cannot_read_falls_back_within_its_path(
    root: str,
) -> None:
    first = make(root, "run-1", retained=2, retention=RetentionPolicy.RETAIN_ON_CANCELLATION)
    first.checkpoint()
    first.checkpoint()
    first.coord.shutdown(TerminalJobStatus.CANCELED)
    second = make(root, "run-2")
    chosen = second.coord.restore_point(first.storage.job_dir)
    assert chosen is not None and chosen.checkpoint_id == 2
    second.coord.mark_unusable(chosen.directory, 2, "cannot be decoded")
    older = second.coord.restore_point()
    assert older is not None and older.directory == first.storage.checkpoint_dir(1)


# --- savepoints ---------------------------------------------------------------------------------


def test_savepoint_is_aligned_forced_relative_and_movable(root: str, tmp_path: Path) -> None:
    h = make(root, mode=AlignmentMode.AT_LEAST_ONCE)
    h.coord.trigger_checkpoint()  # pending: a savepoint is forced regardless
    target = tmp_path / "savepoints" / "sp-1"
    future = h.coord.trigger_savepoint(str(target))
    barrier = h.gateway.barriers[-1]
    assert barrier.checkpoint_id == 2 and barrier.options.type is CheckpointType.SAVEPOINT
    assert barrier.options.alignment is AlignmentMode.ALIGNED
    assert h.gateway.barriers[0].options.alignment is AlignmentMode.AT_LEAST_ONCE
    assert not future.done()
    h.ack(2, SRC0, b"sp-src0")
    h.ack(2, SRC1, b"sp-src1")
    h.ack(2, AGG, b"sp-agg")
    sp = future.result(timeout=0)
    assert sp.is_savepoint and sp.directory == str(target)
    assert h.gateway.completed == [] and h.coord.completed_checkpoints() == []
    assert not exists(h.storage.checkpoint_dir(2))  # the working copy is gone
    assert h.coord.pending_checkpoint_ids() == [1]

    moved = tmp_path / "moved-savepoint"
    shutil.move(str(target), str(moved))
    cp = load_checkpoint(str(moved))
    verify(cp.metadata, cp.directory, check_crc=True)
    handle = cp.metadata.operators[OperatorUid("agg")].subtasks[0].keyed[0]
    section = handle.sections[0]
    reader = open_reader(cp.directory)
    assert reader.read_state_range(handle.path, section.offset, section.length) == b"sp-agg"


def test_savepoint_failures_reach_the_future_and_do_not_fail_the_job(
    root: str, tmp_path: Path
) -> None:
    h = make(root, tolerable_failures=0, interval_ms=-1)
    future = h.coord.trigger_savepoint(str(tmp_path / "sp"))
    h.clock.advance(1_000)
    h.coord.tick()
    with pytest.raises(CheckpointFailedError, match="CHECKPOINT_EXPIRED"):
        future.result(timeout=0)
    assert h.gateway.failures == []
    h.checkpoint()
    existing = h.coord.trigger_savepoint(str(tmp_path / "sp"))
    h.ack_all(3)
    existing.result(timeout=0)
    again = h.coord.trigger_savepoint(str(tmp_path / "sp"))
    with pytest.raises(FileExistsError):
        again.result(timeout=0)
    assert [b.checkpoint_id for b in h.gateway.barriers] == [1, 2, 3]


def test_savepoint_waits_for_an_unaligned_checkpoint_and_blocks_periodic_ones(
    root: str, tmp_path: Path
) -> None:
    h = make(root, unaligned=True)
    h.clock.advance(100)
    assert h.coord.tick() == TriggerNow(CheckpointId(1))
    assert h.gateway.barriers[0].options.alignment is AlignmentMode.UNALIGNED
    future = h.coord.trigger_savepoint(str(tmp_path / "sp"))
    assert [b.checkpoint_id for b in h.gateway.barriers] == [1]  # queued, not concurrent
    h.ack_all(1)
    h.clock.advance(100)
    assert h.coord.tick() == Blocked("a savepoint is in progress")  # no periodic one now
    barrier = h.gateway.barriers[-1]
    assert barrier.checkpoint_id == 2 and barrier.options.is_savepoint
    assert barrier.options.alignment is AlignmentMode.ALIGNED
    assert barrier.options.aligned_timeout_ms is None and not barrier.options.terminate
    h.clock.advance(100)
    assert h.coord.tick() == Blocked("a savepoint is in progress")
    h.ack_all(2)
    assert future.result(timeout=0).checkpoint_id == 2
    assert h.gateway.completed == [1]  # a plain savepoint is not announced to the tasks
    h.clock.advance(100)
    assert h.coord.tick() == TriggerNow(CheckpointId(3))


def test_stop_with_savepoint_is_announced_so_sinks_commit_it(root: str, tmp_path: Path) -> None:
    h = make(root, interval_ms=-1)
    future = h.coord.trigger_savepoint(str(tmp_path / "sp"), terminate=True)
    assert h.gateway.barriers[-1].options.terminate
    assert not h.gateway.barriers[-1].options.drain
    h.ack_all(1)
    assert future.result(timeout=0).is_savepoint
    assert h.gateway.completed == [1]
    h.coord.trigger_savepoint(str(tmp_path / "sp2"), terminate=True, drain=True)
    assert h.gateway.barriers[-1].options.drain  # sources send the final watermark first


def test_queued_savepoints_fail_on_failover_and_shutdown(root: str, tmp_path: Path) -> None:
    h = make(root, unaligned=True, interval_ms=-1)
    h.coord.trigger_checkpoint()
    queued = h.coord.trigger_savepoint(str(tmp_path / "sp"))
    h.coord.abort_all_pending("job failover")
    with pytest.raises(CheckpointFailedError, match=r"^savepoint failed: .*job failover"):
        queued.result(timeout=0)
    h.coord.trigger_checkpoint()
    queued = h.coord.trigger_savepoint(str(tmp_path / "sp"))
    h.coord.shutdown(TerminalJobStatus.CANCELED)
    with pytest.raises(CheckpointFailedError, match="job CANCELED"):
        queued.result(timeout=0)


# --- shutdown -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "status", "kept"),
    [
        (RetentionPolicy.DELETE_ON_CANCELLATION, TerminalJobStatus.CANCELED, False),
        (RetentionPolicy.DELETE_ON_CANCELLATION, TerminalJobStatus.FAILED, True),
        (RetentionPolicy.RETAIN_ON_CANCELLATION, TerminalJobStatus.CANCELED, True),
        (RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS, TerminalJobStatus.FAILED, False),
    ],
)
def test_shutdown_applies_retention_policy(
    root: str, policy: RetentionPolicy, status: TerminalJobStatus, kept: bool
) -> None:
    h = make(root, retention=policy)
    h.checkpoint()
    h.coord.trigger_checkpoint(force=True)
    h.coord.shutdown(status)
    assert exists(h.storage.checkpoint_dir(1) + "/_metadata") is kept
    assert exists(h.storage.job_dir) is kept
    assert not exists(h.storage.checkpoint_dir(2))  # the pending one is always aborted
    assert h.gateway.aborted[0][1].startswith("CHECKPOINT_COORDINATOR_SHUTDOWN")
    assert isinstance(h.coord.tick(), Blocked)
    assert h.ack(2, SRC0) is AckResult.DISCARDED


class JobStatus(enum.Enum):  # shaped like cairn.common.JobStatus (Flink's names)
    RUNNING = 2
    FAILED = 4


def test_shutdown_accepts_job_status_enums_by_name(root: str) -> None:
    h = make(root, retention=RetentionPolicy.DELETE_ON_CANCELLATION)
    h.checkpoint()
    with pytest.raises(ValueError, match="RUNNING is not a terminal job status"):
        h.coord.shutdown(JobStatus.RUNNING)
    h.coord.shutdown(JobStatus.FAILED)
    assert exists(h.storage.checkpoint_dir(1) + "/_metadata")  # kept: the job failed
    assert h.coord.latest_completed_id() == 1 and not h.coord.has_pending()
