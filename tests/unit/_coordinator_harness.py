"""The checkpoint coordinator's test harness: real storage (a directory or memory://), a
manual clock and a recording gateway standing in for the network edge; tasks acknowledge by
writing real state files."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from fsspec.core import url_to_fs

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.handles import (
    KeyedStateHandle,
    OperatorSubtaskState,
    StreamRange,
    pickle_inline,
)
from cairn.checkpoint.messages import (
    AckResult,
    CheckpointFailureReason,
    SubtaskCheckpointMetrics,
    TaskAcknowledgement,
    TaskKey,
)
from cairn.checkpoint.protocol import (
    FallbackRule,
    TriggerNow,
)
from cairn.checkpoint.storage import CheckpointStorage
from cairn.clock import ManualClock
from cairn.events import CheckpointBarrier
from cairn.ids import CheckpointId, OperatorUid, SubtaskIndex, VertexId
from cairn.settings import CheckpointSettings

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
class CoordinatorHarness:
    coord: CheckpointCoordinator
    gateway: RecordingGateway
    clock: ManualClock
    storage: CheckpointStorage

    def ack(
        self, cid: int, task: TaskKey, payload: bytes | None = None, settle: bool = True
    ) -> AckResult:
        """A task's part: write its state file through the real storage, then acknowledge;
        ``settle``: wait until the deletions the acknowledgement decided ran."""
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
        result = self.coord.receive_ack(
            TaskAcknowledgement(CheckpointId(cid), task, {UIDS[task]: state}, metrics)
        )
        if settle:
            assert self.coord.wait_for_cleanup(10.0)  # what the ack let go is deleted by now
        return result

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


def make(
    root: str,
    job: str = "job-1",
    fallback: FallbackRule = FallbackRule(),
    fence: Any = None,
    **settings: object,
) -> CoordinatorHarness:
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
        fence=fence,
    )
    return CoordinatorHarness(coord, gateway, clock, storage)
