"""CheckpointCoordinator restores, falls back past unusable or committed checkpoints and takes
savepoints, with real storage (tmp_path and memory://) and a manual clock."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from fsspec.core import url_to_fs

from cairn.checkpoint import restore
from cairn.checkpoint.errors import (
    CheckpointFailedError,
    FallbackRefusedError,
    NoUsableCheckpointError,
)
from cairn.checkpoint.inspection import verify
from cairn.checkpoint.protocol import (
    Blocked,
    FallbackRule,
    TerminalJobStatus,
    TriggerNow,
)
from cairn.checkpoint.storage import load_checkpoint, open_reader
from cairn.events import AlignmentMode, CheckpointType
from cairn.ids import CheckpointId, OperatorUid
from cairn.settings import RetentionPolicy
from tests.unit._coordinator_harness import (
    AGG,
    SRC0,
    SRC1,
    CoordinatorHarness,
    exists,
    make,
)

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


def test_same_size_corrupt_state_file_of_another_run_fails_its_crc_and_falls_back(
    root: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = make(root, "run-1", retained=2, retention=RetentionPolicy.RETAIN_ON_CANCELLATION)
    first.checkpoint()
    first.checkpoint()
    first.coord.shutdown(TerminalJobStatus.CANCELED)
    newest = first.storage.checkpoint_dir(2)
    victim = sorted(load_checkpoint(newest).metadata.referenced_files())[0]
    _flip_bytes_keeping_size(f"{newest}/{victim}")
    # Another run's checkpoint: the driver reads every byte before it chooses one.
    second = make(root, "run-2")
    with caplog.at_level(logging.WARNING, logger="cairn.checkpoint"):
        chosen = second.coord.restore_point(first.storage.job_dir)
    assert chosen is not None and chosen.checkpoint_id == 1
    assert any(
        victim in r.getMessage() and "CRC-32 mismatch" in r.getMessage() for r in caplog.records
    )


def test_own_checkpoints_are_verified_by_size_only_and_the_workers_check_the_contents(
    root: str,
) -> None:
    h = make(root, retained=2)
    h.checkpoint()
    h.checkpoint()
    newest = h.coord.latest_completed()
    assert newest is not None
    victim = sorted(newest.metadata.referenced_files())[0]
    _flip_bytes_keeping_size(f"{newest.directory}/{victim}")
    # This job completed it: no state byte is read here (a failover restores at once) ...
    chosen = h.coord.restore_point()
    assert chosen is not None and chosen.checkpoint_id == 2
    # ... the workers check the CRC-32s of what they restore; what they report falls back.
    h.coord.mark_unusable(chosen.directory, 2, f"state file {victim!r}: CRC-32 mismatch")
    older = h.coord.restore_point()
    assert older is not None and older.checkpoint_id == 1
    # A missing or truncated file is still found here, by size, before any worker reads it.
    fs, path = url_to_fs(f"{older.directory}/{sorted(older.metadata.referenced_files())[0]}")
    fs.pipe_file(path, b"")
    with pytest.raises(NoUsableCheckpointError, match="truncated"):
        h.coord.restore_point()


def test_another_runs_checkpoint_is_read_in_full_once_then_by_size_on_failover(
    root: str,
) -> None:
    first = make(root, "run-1", retained=1, retention=RetentionPolicy.RETAIN_ON_CANCELLATION)
    first.checkpoint()
    first.coord.shutdown(TerminalJobStatus.CANCELED)
    second = make(root, "run-2")
    chosen = second.coord.restore_point(first.storage.job_dir)  # CRC-32s checked here
    assert chosen is not None and chosen.checkpoint_id == 1
    victim = sorted(chosen.metadata.referenced_files())[0]
    _flip_bytes_keeping_size(f"{chosen.directory}/{victim}")
    again = second.coord.restore_point()  # a failover: the workers check the contents
    assert again is not None and again.directory == chosen.directory
    with pytest.raises(NoUsableCheckpointError, match="CRC-32 mismatch"):
        make(root, "run-3").coord.restore_point(first.storage.job_dir)


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
    assert examined == ["chk-3"]  # older ones are not read at all


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


def _truncate_metadata(h: CoordinatorHarness, cid: int) -> None:
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


def test_a_resumed_run_removes_the_lost_runs_older_checkpoints_but_not_an_earlier_runs(
    root: str,
) -> None:
    """The lost run was killed after completing checkpoint 3 but before deleting the
    subsumed 2: the rerun inherits the lost run's checkpoints (from its first id, 2, on), so
    the finished job removes 2 too; checkpoint 1, of a run before (retained), stays."""
    earlier = make(root, retained=3)
    earlier.checkpoint()
    lost = make(root, retained=3)
    lost.coord.set_next_checkpoint_id(CheckpointId(2))
    lost.checkpoint()
    lost.checkpoint()
    rerun = make(root)
    rerun.coord.inherit_run(CheckpointId(2))
    history = [lost.storage.checkpoint_dir(CheckpointId(i)) for i in (3, 2)]
    chosen = rerun.coord.restore_point(history, claim=True, resumed=True)
    assert chosen is not None and chosen.checkpoint_id == 3
    rerun.coord.shutdown(TerminalJobStatus.FINISHED)
    assert not exists(rerun.storage.checkpoint_dir(CheckpointId(2)))
    assert not exists(rerun.storage.checkpoint_dir(CheckpointId(3)))
    assert exists(rerun.storage.checkpoint_dir(CheckpointId(1)))


def test_a_resumed_run_that_finishes_removes_what_the_lost_run_left_above_its_restore(
    root: str,
) -> None:
    """A rerun resumes a lost run (the same job) and finishes before it triggers a checkpoint
    of its own: the restored checkpoint (claimed) and the lost run's checkpoint that never
    completed are both the job's, so the job directory is gone."""
    lost = make(root)
    lost.checkpoint()
    lost.checkpoint()
    fs, incomplete = url_to_fs(lost.storage.checkpoint_dir(CheckpointId(3)))
    fs.makedirs(incomplete, exist_ok=True)
    fs.pipe_file(f"{incomplete}/state-0", b"written before the driver was lost")
    assert exists(lost.storage.checkpoint_dir(CheckpointId(3)))
    rerun = make(root)
    history = [lost.storage.checkpoint_dir(CheckpointId(2))]
    chosen = rerun.coord.restore_point(history, claim=True, resumed=True)
    assert chosen is not None and chosen.checkpoint_id == 2
    rerun.coord.shutdown(TerminalJobStatus.FINISHED)
    assert not exists(rerun.storage.job_dir)
