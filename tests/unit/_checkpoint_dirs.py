"""Checkpoint directories written by the real coordinator and storage, with chosen metrics.

A manual clock decides every acknowledgement time, so each statistic of the written
checkpoints is known exactly; tests of the statistics, the metadata and the CLI tables
read them back from disk.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cairn.checkpoint.coordinator import CheckpointCoordinator
from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.handles import KeyedStateHandle, OperatorSubtaskState, StreamRange
from cairn.checkpoint.messages import (
    AckResult,
    SubtaskCheckpointMetrics,
    TaskAcknowledgement,
    TaskKey,
)
from cairn.checkpoint.metadata import CheckpointMetadata, CheckpointSummaryStats, OperatorMetadata
from cairn.checkpoint.protocol import TriggerNow
from cairn.checkpoint.storage import CheckpointStorage
from cairn.clock import ManualClock
from cairn.ids import CheckpointId, JobId, OperatorUid, SubtaskIndex, VertexId
from cairn.settings import CheckpointSettings

SRC0, SRC1 = TaskKey(VertexId(0), SubtaskIndex(0)), TaskKey(VertexId(0), SubtaskIndex(1))
AGG = TaskKey(VertexId(1), SubtaskIndex(0))
TASKS = (SRC0, SRC1, AGG)
UIDS = {SRC0: OperatorUid("src"), SRC1: OperatorUid("src"), AGG: OperatorUid("agg")}
T0 = 1_700_000_000_000


@dataclass
class NullGateway:
    completed: list[int] = field(default_factory=list)

    def trigger_sources(self, barrier: object) -> None:
        pass

    def notify_complete(self, checkpoint_id: CheckpointId) -> None:
        self.completed.append(checkpoint_id)

    def notify_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason, message: str
    ) -> None:
        pass

    def fail_job(self, reason: str) -> None:
        raise AssertionError(reason)


@dataclass
class Job:
    coord: CheckpointCoordinator
    clock: ManualClock
    storage: CheckpointStorage

    def checkpoint(self, acks: list[tuple[TaskKey, int, SubtaskCheckpointMetrics]]) -> int:
        """Trigger; each task acks ``at`` ms after the trigger with a state file of
        ``metrics.state_size`` bytes; the last ack completes it. Returns the id."""
        decision = self.coord.trigger_checkpoint(force=True)
        assert isinstance(decision, TriggerNow)
        cid, start = decision.checkpoint_id, self.clock.now_ms()
        for task, at, metrics in acks:
            self.clock.advance_to(start + at)
            data = bytes(metrics.state_size)
            rel = self.storage.writer(cid).write_state_file(UIDS[task], data)
            ranges: dict[int, StreamRange] = {
                task.subtask_index: StreamRange(0, len(data), zlib.crc32(data))
            }
            state = OperatorSubtaskState(keyed=(KeyedStateHandle(rel, 0, 127, ranges, len(data)),))
            ack = TaskAcknowledgement(cid, task, {UIDS[task]: state}, metrics)
            assert self.coord.receive_ack(ack) is AckResult.SUCCESS
        self.clock.advance(1000)
        return cid


def job(root: str | Path, job_id: str = "job-a", retained: int = 3) -> Job:
    clock = ManualClock(T0)
    storage = CheckpointStorage(str(root), job_id)
    coord = CheckpointCoordinator(
        job_id,
        CheckpointSettings(retained=retained),
        storage,
        NullGateway(),
        TASKS,
        [SRC0, SRC1],
        {"src": (2, 128), "agg": (1, 128)},
        clock,
    )
    return Job(coord, clock, storage)


M = SubtaskCheckpointMetrics
# Checkpoint 1 (aligned): the aggregator waits 12 ms for its last barrier.
ALIGNED = [
    (SRC0, 10, M(start_delay_ms=1, sync_duration_ms=2, async_duration_ms=5, state_size=16)),
    (SRC1, 20, M(start_delay_ms=2, sync_duration_ms=1, async_duration_ms=7, state_size=16)),
    (
        AGG,
        35,
        M(
            start_delay_ms=4,
            alignment_duration_ms=12,
            sync_duration_ms=3,
            async_duration_ms=9,
            state_size=64,
            processed_bytes=500,
        ),
    ),
]
# Checkpoint 2 (unaligned at the aggregator): 2 KiB of in-flight input persisted.
UNALIGNED = [
    (SRC0, 5, M(start_delay_ms=1, sync_duration_ms=1, async_duration_ms=2, state_size=16)),
    (SRC1, 6, M(start_delay_ms=1, sync_duration_ms=1, async_duration_ms=3, state_size=16)),
    (
        AGG,
        8,
        M(
            start_delay_ms=2,
            alignment_duration_ms=1,
            sync_duration_ms=4,
            async_duration_ms=6,
            state_size=80,
            persisted_bytes=2048,
            unaligned=True,
        ),
    ),
]


def old_format_checkpoint(root: str | Path, job_id: str = "job-old", cid: int = 7) -> str:
    """A checkpoint whose metadata has totals but no per-subtask rows (older Cairn)."""
    storage = CheckpointStorage(str(root), job_id)
    data = bytes(40)
    rel = storage.writer(CheckpointId(cid)).write_state_file("agg", data)
    handle = KeyedStateHandle(rel, 0, 127, {0: StreamRange(0, 40, zlib.crc32(data))}, 40)
    uid = OperatorUid("agg")
    md = CheckpointMetadata(
        JobId(job_id),
        CheckpointId(cid),
        trigger_ms=T0,
        completed_ms=T0 + 90,
        max_parallelism=128,
        operators={uid: OperatorMetadata(uid, 1, 128, {0: OperatorSubtaskState(keyed=(handle,))})},
        stats=CheckpointSummaryStats(
            state_size=40,
            num_subtasks=1,
            max_alignment_duration_ms=6,
            max_sync_duration_ms=2,
            max_async_duration_ms=3,
        ),
    )
    return storage.write_metadata(md).directory
