"""Checkpoint statistics in detail: per-subtask rows, Flink's summaries, immutable snapshots,
per-subtask statistics kept in ``_metadata`` (and metadata written without them), the job
client's typed snapshot."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
import threading
from pathlib import Path

import pytest

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.checkpoint.metadata import decode_metadata, encode_metadata
from cairn.checkpoint.stats import (
    CheckpointStatsSnapshot,
    CheckpointStatsTracker,
    CheckpointStatus,
    Summary,
)
from cairn.checkpoint.storage import read_metadata
from cairn.deploy.job_master_client import JobClient
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from tests.unit._checkpoint_dirs import AGG, ALIGNED, SRC0, SRC1, T0, UNALIGNED, job

C = CheckpointId
M = SubtaskCheckpointMetrics


def tracker_with(
    acks: list[tuple[TaskKey, int, SubtaskCheckpointMetrics]],
    cid: int = 1,
    trigger: int = 1000,
    end_after: int | None = None,
    t: CheckpointStatsTracker | None = None,
) -> CheckpointStatsTracker:
    t = t or CheckpointStatsTracker()
    t.report_pending(C(cid), trigger, num_subtasks=len(acks))
    for task, at, metrics in acks:
        t.report_ack(C(cid), task, metrics, trigger + at)
    if end_after is not None:
        t.report_completed(C(cid), trigger + end_after, f"/c/chk-{cid}")
    return t


def test_checkpoint_figures_are_sums_and_slowest_subtask_maxima() -> None:
    c = tracker_with(ALIGNED, end_after=40).get(C(1))
    assert c is not None and c.status is CheckpointStatus.COMPLETED
    assert c.end_to_end_duration_ms == 40
    assert (c.state_size, c.checkpointed_size, c.processed_bytes, c.persisted_bytes) == (
        96,
        96,
        500,
        0,
    )
    assert (
        c.max_start_delay_ms,
        c.max_alignment_duration_ms,
        c.max_sync_duration_ms,
        c.max_async_duration_ms,
    ) == (4, 12, 3, 9)
    assert not c.unaligned and c.checkpoint_type == "CHECKPOINT"
    assert [s.task for s in c.subtask_details()] == [SRC0, SRC1, AGG]
    assert [s.end_to_end_duration_ms(c.trigger_ms) for s in c.subtask_details()] == [10, 20, 35]

    u = tracker_with(UNALIGNED, end_after=9).get(C(1))
    assert u is not None and u.unaligned and u.checkpoint_type == "UNALIGNED_CHECKPOINT"
    assert u.persisted_bytes == 2048


def test_subtask_summary_is_over_the_subtasks_of_one_checkpoint() -> None:
    c = tracker_with(ALIGNED, end_after=40).get(C(1))
    assert c is not None
    s = c.subtask_summary()
    assert s.end_to_end_duration == Summary(3, 10, 35, 65 / 3, 20, 35, 35)
    assert (s.async_duration.min, s.async_duration.p50, s.async_duration.max) == (5, 7, 9)
    assert (s.alignment_duration.count, s.alignment_duration.max) == (3, 12)
    assert s.state_size.avg == 32.0


def test_snapshot_summaries_cover_completed_checkpoints_only() -> None:
    t = tracker_with(ALIGNED, cid=1, trigger=1000, end_after=40)
    tracker_with(UNALIGNED, cid=2, trigger=5000, end_after=9, t=t)
    tracker_with(ALIGNED[:1], cid=3, trigger=9000, t=t)  # fails below: not summarized
    t.report_failed(C(3), 9500, "CHECKPOINT_DECLINED", "no")
    snap = t.snapshot()
    sm = snap.summary
    assert (
        sm.end_to_end_duration.count,
        sm.end_to_end_duration.min,
        sm.end_to_end_duration.max,
    ) == (2, 9, 40)
    assert (sm.alignment_duration.min, sm.alignment_duration.max) == (1, 12)
    assert (sm.start_delay.min, sm.start_delay.max) == (2, 4)
    assert (sm.sync_duration.min, sm.sync_duration.max) == (3, 4)
    assert (sm.async_duration.min, sm.async_duration.max) == (6, 9)
    assert (sm.persisted_bytes.min, sm.persisted_bytes.max) == (0, 2048)
    assert (sm.processed_bytes.min, sm.processed_bytes.max) == (0, 500)
    assert (sm.state_size.min, sm.checkpointed_size.max) == (96, 112)
    assert snap.end_to_end_duration is sm.end_to_end_duration  # shortcut kept
    assert [c.checkpoint_id for c in snap.history] == [3, 2, 1]
    failed = snap.get(3)
    assert failed is not None and failed.failure_reason == "CHECKPOINT_DECLINED"
    assert failed.num_acknowledged_subtasks == 1  # its per-subtask rows stay in the history


def test_snapshots_are_immutable_copies_and_cached_until_the_next_report() -> None:
    t = tracker_with(ALIGNED[:1], cid=1)
    before = t.snapshot()
    assert t.snapshot() is before  # nothing reported in between
    t.report_ack(C(1), SRC1, M(state_size=5), 1100)
    after = t.snapshot()
    assert after is not before
    assert before.history[0].num_acknowledged_subtasks == 1  # unchanged by the later ack
    assert after.history[0].num_acknowledged_subtasks == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.counts = before.counts  # type: ignore[misc]
    assert after.snapshot() is after  # callers written against the tracker keep working


def test_snapshots_can_be_taken_while_the_coordinator_reports() -> None:
    t = CheckpointStatsTracker(history_size=5)
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                snap = t.snapshot()  # every snapshot is consistent in itself
                in_progress = [c for c in snap.history if c.status is CheckpointStatus.IN_PROGRESS]
                assert len(in_progress) == snap.counts.in_progress
                assert snap.summary.end_to_end_duration.count == snap.counts.completed
                for c in snap.history:
                    assert c.num_acknowledged_subtasks <= c.num_subtasks
        except BaseException as e:  # pragma: no cover - only on a bug
            errors.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for cid in range(1, 300):
            t.report_pending(C(cid), cid, num_subtasks=3)
            for i in range(3):
                t.report_ack(C(cid), TaskKey(VertexId(0), SubtaskIndex(i)), M(), cid + i)
            t.report_completed(C(cid), cid + 5)
    finally:
        done.set()
        reader.join()
    assert not errors
    assert t.snapshot().counts.completed == 299


def test_to_dict_has_flink_names_and_per_subtask_rows() -> None:
    snap = tracker_with(UNALIGNED, end_after=9).snapshot()
    d = json.loads(json.dumps(snap.to_dict(details=True)))
    entry = d["history"][0]
    assert entry["checkpoint_type"] == "UNALIGNED_CHECKPOINT" and entry["persisted_data"] == 2048
    assert entry["alignment_duration"] == 1 and entry["start_delay"] == 2
    agg = entry["subtasks"][2]
    assert (agg["vertex_id"], agg["subtask_index"], agg["end_to_end_duration"]) == (1, 0, 8)
    assert agg["unaligned"] is True and agg["persisted_data"] == 2048
    assert entry["subtask_summary"]["sync_duration"]["max"] == 4
    assert set(d["summary"]) >= {
        "end_to_end_duration",
        "state_size",
        "checkpointed_size",
        "processed_bytes",
        "persisted_bytes",
        "alignment_duration",
        "start_delay",
        "sync_duration",
        "async_duration",
    }
    assert "subtasks" not in snap.to_dict()["history"][0]


# --- kept with the checkpoint -----------------------------------------------------------------


def test_completed_checkpoint_keeps_its_subtask_statistics_in_metadata(tmp_path: Path) -> None:
    j = job(tmp_path)
    cid = j.checkpoint(ALIGNED)
    md = read_metadata(j.storage.checkpoint_dir(cid))  # from disk
    rows = md.stats.subtasks
    assert [r.task for r in rows] == [SRC0, SRC1, AGG]
    assert [r.ack_ms - T0 for r in rows] == [10, 20, 35]
    assert rows[2].metrics == ALIGNED[2][2]
    assert md.stats.max_start_delay_ms == 4
    from_disk = md.to_checkpoint_stats(j.storage.checkpoint_dir(cid))
    live = j.coord.stats.snapshot().latest_completed
    assert live is not None
    for name in (
        "end_to_end_duration_ms",
        "state_size",
        "processed_bytes",
        "persisted_bytes",
        "max_alignment_duration_ms",
        "max_start_delay_ms",
        "max_sync_duration_ms",
        "max_async_duration_ms",
        "unaligned",
        "checkpoint_type",
        "num_subtasks",
    ):
        assert getattr(from_disk, name) == getattr(live, name), name
    assert from_disk.subtask_details() == live.subtask_details()
    assert decode_metadata(encode_metadata(md)) == md


def _reencode(body: dict[str, object]) -> bytes:
    raw = json.dumps(body, sort_keys=True, indent=1).encode()
    header = {
        "format": "cairn-checkpoint-metadata",
        "version": 1,
        "body_length": len(raw),
        "body_sha256": hashlib.sha256(raw).hexdigest(),
    }
    return json.dumps(header, sort_keys=True).encode() + b"\n" + raw


def test_metadata_written_without_subtask_rows_still_decodes(tmp_path: Path) -> None:
    j = job(tmp_path)
    cid = j.checkpoint(UNALIGNED)
    data = (Path(j.storage.checkpoint_dir(cid)) / "_metadata").read_bytes()
    body = json.loads(data.partition(b"\n")[2])
    assert len(body["stats"]["subtasks"]) == 3
    # Exactly the stats an older Cairn wrote: totals only.
    body["stats"] = {
        "state_size": 112,
        "num_subtasks": 3,
        "processed_bytes": 0,
        "persisted_bytes": 2048,
        "max_alignment_duration_ms": 1,
        "max_sync_duration_ms": 4,
        "max_async_duration_ms": 6,
        "unaligned": True,
    }
    old = decode_metadata(_reencode(body), "old")
    assert old.stats.subtasks == () and old.stats.max_start_delay_ms is None
    assert (old.stats.persisted_bytes, old.stats.unaligned, old.stats.num_subtasks) == (
        2048,
        True,
        3,
    )
    assert old.to_checkpoint_stats().subtasks == {}
    assert old.operators.keys() == {"src", "agg"}  # the restore part is untouched
    # Even older or foreign writers: no stats at all, or keys this version does not know.
    del body["stats"]
    assert decode_metadata(_reencode(body), "older").stats.state_size == 0
    body["stats"] = {"state_size": 5, "a_future_figure": 1}
    assert decode_metadata(_reencode(body), "newer").stats.state_size == 5


# --- job client ---------------------------------------------------------------------------------


def _run_small_job(interval_ms: int) -> JobClient:
    from cairn.common import Configuration, WatermarkStrategy
    from cairn.datastream import StreamExecutionEnvironment
    from cairn.datastream.connectors.number_seq import NumberSequenceSource
    from cairn.datastream.functions import SinkFunction

    class Discard(SinkFunction):
        def invoke(self, value: object, context: object = None) -> None:
            pass

    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    if interval_ms > 0:
        env.enable_checkpointing(interval_ms)
    env.get_checkpoint_config().set_checkpoint_storage(
        "file://" + tempfile.mkdtemp(prefix="cairn-stats-")
    )
    (
        env.from_source(NumberSequenceSource(1, 500), WatermarkStrategy.no_watermarks(), "n")
        .uid("n")
        .key_by(lambda n: n % 4)
        .map(lambda n: n)
        .uid("m")
        .add_sink(Discard())
        .uid("s")
    )
    client = env.execute_async("stats")
    client.get_job_execution_result(timeout=30)
    return client


@pytest.mark.timeout(30)
def test_job_client_returns_a_typed_snapshot_with_subtask_rows() -> None:
    client = _run_small_job(interval_ms=60_000)  # only the final checkpoint at end of input
    snap = client.get_checkpoint_statistics()
    assert isinstance(snap, CheckpointStatsSnapshot)
    last = snap.latest_completed
    assert last is not None and snap.counts.completed >= 1
    assert last.num_acknowledged_subtasks == last.num_subtasks == 4  # 2 chains x 2 subtasks
    assert {s.task.vertex_id for s in last.subtask_details()} == {0, 1}
    assert snap.summary.end_to_end_duration.count == snap.counts.completed


@pytest.mark.timeout(30)
def test_job_client_has_no_statistics_without_checkpointing() -> None:
    client = _run_small_job(interval_ms=0)
    assert client.get_checkpoint_statistics() is None
