"""Checkpoint files are deleted in the background, in order: a slow deletion (an object store
that is down retries each request for seconds) holds up neither the next checkpoint's
completion nor a failed task's detection; the end of the job waits for them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cairn.checkpoint.deletions import BackgroundDeletions
from cairn.checkpoint.messages import AckResult
from cairn.checkpoint.protocol import TerminalJobStatus, TriggerNow
from cairn.testing.processes import wait_for
from tests.unit._coordinator_harness import TASKS, exists, make


def test_deletions_run_in_order_and_a_failed_one_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []
    deletions = BackgroundDeletions("job-1")

    def fail() -> None:
        raise OSError("Could not connect to the endpoint URL")

    deletions.submit("chk-1", fail)
    deletions.submit("chk-2", lambda: done.append("chk-2"))
    assert deletions.wait(5.0) and done == ["chk-2"] and deletions.pending() == 0
    assert "Could not delete chk-1 of job job-1" in caplog.text


def test_wait_times_out_while_a_deletion_blocks() -> None:
    release = threading.Event()
    deletions = BackgroundDeletions("job-1")
    deletions.submit("chk-1", lambda: release.wait(10) and None)
    assert not deletions.wait(0.2) and deletions.pending() == 1
    release.set()
    assert deletions.wait(5.0) and deletions.pending() == 0


def test_a_blocked_deletion_does_not_hold_up_the_next_checkpoint(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = make(root)
    h.checkpoint()
    release = threading.Event()
    discard = h.storage.discard

    def slow_discard(cid: Any) -> None:
        release.wait(10)
        discard(cid)

    monkeypatch.setattr(h.storage, "discard", slow_discard)
    decision = h.coord.trigger_checkpoint(force=True)
    assert isinstance(decision, TriggerNow)
    for task in TASKS:  # checkpoint 2 completes and subsumes 1, whose deletion blocks
        assert h.ack(decision.checkpoint_id, task, settle=False) is AckResult.SUCCESS
    assert h.gateway.completed == [1, 2]
    assert exists(h.storage.checkpoint_dir(1)) and not h.coord.wait_for_cleanup(0.1)
    release.set()
    h.coord.shutdown(TerminalJobStatus.FINISHED)  # waits for the deletions, then the rest
    assert not exists(h.storage.job_dir)


class _Lease:
    """The coordinator's fence (high availability): whether this driver still leads."""

    def __init__(self) -> None:
        self.held = True

    def holds(self) -> bool:
        return self.held

    def check(self, action: str) -> None:
        pass

    def checkpoint_completed(self, checkpoint_id: Any, directory: str) -> None:
        pass


def test_a_deletion_decided_while_leading_is_not_run_after_the_lead_is_lost(root: str) -> None:
    lease = _Lease()
    h = make(root, fence=lease)
    h.checkpoint()
    release = threading.Event()
    h.coord._cleaner.deletions.submit("a gate", lambda: release.wait(10) and None)
    decision = h.coord.trigger_checkpoint(force=True)
    assert isinstance(decision, TriggerNow)
    for task in TASKS:  # checkpoint 2 subsumes 1: its deletion waits behind the gate
        assert h.ack(decision.checkpoint_id, task, settle=False) is AckResult.SUCCESS
    lease.held = False  # another driver leads now: its checkpoints may share the directory
    release.set()
    assert h.coord.wait_for_cleanup(5.0)
    assert exists(h.storage.checkpoint_dir(1))


def test_the_thread_ends_when_nothing_is_left_to_delete() -> None:
    deletions = BackgroundDeletions("idle-job")

    def cleanup_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "cairn-cleanup-idle-job"]

    for n in range(3):
        deletions.submit(f"chk-{n}", lambda: None)
        assert deletions.wait(5.0)
        wait_for(lambda: not cleanup_threads(), timeout=5.0, message="the idle thread to end")
