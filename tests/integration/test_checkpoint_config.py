"""Checkpoint configuration is enforced, observably: timeout, tolerable failures, min pause,
max concurrent checkpoints and retention, each read back from the coordinator's statistics
and the checkpoint directories of a real in-process job.

Slow checkpoints are made two ways: a ``CheckpointedFunction`` whose ``snapshot_state``
sleeps (synchronous part, on the task thread) and a keyed value whose pickling sleeps
(asynchronous part, on the snapshot threads, so the task keeps processing).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus
from cairn.common import Configuration, JobExecutionException
from cairn.common.job_status import JobStatus
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream import ExternalizedCheckpointRetention, StreamExecutionEnvironment
from cairn.datastream.functions import CheckpointedFunction, MapFunction
from cairn.datastream.state import ValueStateDescriptor
from cairn.deploy.job_master_client import JobClient
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import (
    SequenceCheck,
    SequenceGenerator,
    check_sequence_lines,
    read_visible_lines,
)
from tests.integration.jobs import file_sink, generated

KEYS = 4
RATE = 4_000  # records per second over the whole (unbounded) source


# --------------------------------------------------------------------------- slow functions


class SlowSnapshot(MapFunction, CheckpointedFunction):
    """Pass-through whose synchronous snapshot sleeps for checkpoints ``<= slow_until``."""

    def __init__(self, sleep_s: float, slow_until: int) -> None:
        self.sleep_s = sleep_s
        self.slow_until = slow_until

    def map(self, value: Any) -> Any:
        return value

    def initialize_state(self, context: Any) -> None:
        pass

    def snapshot_state(self, context: Any) -> None:
        if context.get_checkpoint_id() <= self.slow_until:
            time.sleep(self.sleep_s)


class SlowPickle:
    """A state value that takes ``delay_s`` to pickle: slows the asynchronous upload only."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __reduce__(self) -> tuple[Any, ...]:
        time.sleep(self.delay_s)
        return (SlowPickle, (self.delay_s,))


class SlowUploadCheck(SequenceCheck):
    """``SequenceCheck`` that also keeps one ``SlowPickle`` in the state of key ``k00000``."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self.slow = runtime_context.get_state(ValueStateDescriptor("slow", None))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[str]:
        if value[0] == "k00000" and self.slow.value() is None:
            self.slow.update(SlowPickle(self.delay_s))
        yield from super().process_element(value, ctx)


# --------------------------------------------------------------------------- job plumbing


def _env(tmp_path: Path, interval_ms: int) -> StreamExecutionEnvironment:
    configuration = Configuration()
    configuration.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    env.enable_checkpointing(interval_ms)
    env.get_checkpoint_config().set_checkpoint_storage("file://" + str(tmp_path / "chk"))
    env.set_restart_strategy(RestartStrategies.no_restart())
    return env


def _submit(
    env: StreamExecutionEnvironment,
    tmp_path: Path,
    *,
    count: int | None = None,
    slow_map: SlowSnapshot | None = None,
    check: SequenceCheck | None = None,
) -> JobClient:
    """Sequence source (``count`` records, None: unbounded) -> [slow map] -> keyed check ->
    exactly-once file sink under ``tmp_path / "out"``."""
    stream = generated(env, SequenceGenerator(KEYS), count, "sequence", rate=RATE, uid="source")
    if slow_map is not None:
        stream = stream.map(slow_map).uid("slow-map")
    (
        stream.key_by(lambda r: r[0])
        .process(check or SequenceCheck())
        .uid("check")
        .sink_to(file_sink(str(tmp_path / "out")))
        .uid("sink")
    )
    return env.execute_async("checkpoint-config")


def _completed(client: JobClient) -> int:
    coordinator = client.job_master.coordinator
    return 0 if coordinator is None else coordinator.stats.counts.completed


def _cancel(client: JobClient) -> None:
    client.cancel()
    client.get_job_execution_result(timeout=60)
    assert client.get_job_status() is JobStatus.CANCELED


def _history(client: JobClient) -> list[CheckpointStats]:
    """The coordinator's recent checkpoints (at most 10), oldest first."""
    stats = client.get_checkpoint_statistics()
    return sorted(stats.snapshot().history, key=lambda s: s.checkpoint_id)


def _job_dir(tmp_path: Path, client: JobClient) -> Path:
    return tmp_path / "chk" / client.get_job_id()


def _output_is_consistent(tmp_path: Path) -> None:
    """What was committed so far is a prefix of each key's sequence, each record once."""
    report = check_sequence_lines(read_visible_lines(str(tmp_path / "out")))
    assert report.lines > 0
    assert report.violations == [] and report.bad_sums == []
    assert report.duplicates == {}


# --------------------------------------------------------------------------- timeout


def test_expired_checkpoints_are_aborted_removed_and_tolerated(tmp_path: Path) -> None:
    env = _env(tmp_path, interval_ms=50)
    config = env.get_checkpoint_config()
    config.set_checkpoint_timeout(100)
    config.set_tolerable_checkpoint_failure_number(1_000)
    config.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    # Checkpoints 1 and 2 take 300 ms in snapshot_state: three times the timeout.
    client = _submit(env, tmp_path, slow_map=SlowSnapshot(0.3, slow_until=2))
    stats = client.get_checkpoint_statistics

    def recovered() -> bool:
        snap = stats().snapshot()
        failed = [s.checkpoint_id for s in snap.history if s.status is CheckpointStatus.FAILED]
        latest = snap.latest_completed
        return len(failed) >= 2 and latest is not None and latest.checkpoint_id > max(failed)

    wait_for(recovered, 20, 0.01, "two expired checkpoints followed by a completed one")
    snap = stats().snapshot()
    failed = [s for s in snap.history if s.status is CheckpointStatus.FAILED]
    assert {s.failure_reason for s in failed} == {"CHECKPOINT_EXPIRED"}
    assert all("timeout 100 ms" in (s.failure_message or "") for s in failed)
    job_dir = _job_dir(tmp_path, client)
    # Uploads of an expired checkpoint that finish late are removed when they report in.
    wait_for(
        lambda: not any((job_dir / f"chk-{s.checkpoint_id}").exists() for s in failed),
        10,
        0.01,
        "the directories of the expired checkpoints to disappear",
    )
    assert client.get_job_status() is JobStatus.RUNNING
    assert client.job_master.restarts == 0
    _cancel(client)
    completed = [
        s.checkpoint_id for s in _history(client) if s.status is CheckpointStatus.COMPLETED
    ]
    # Retained: the newest completed checkpoint only (num-retained 1) and the run's record.
    assert sorted(os.listdir(job_dir)) == ["_run-status", f"chk-{max(completed)}"]
    assert (job_dir / f"chk-{max(completed)}" / "_metadata").is_file()
    _output_is_consistent(tmp_path)


# --------------------------------------------------------------------------- tolerable failures


def test_no_tolerated_checkpoint_failure_fails_over_until_restarts_run_out(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path, interval_ms=50)
    config = env.get_checkpoint_config()
    config.set_checkpoint_timeout(100)
    config.set_tolerable_checkpoint_failure_number(0)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 50))
    client = _submit(env, tmp_path, slow_map=SlowSnapshot(0.3, slow_until=1 << 30))
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout=60)
    message = str(info.value)
    assert "Exceeded checkpoint tolerable failure threshold" in message
    assert "CHECKPOINT_EXPIRED" in message
    assert info.value.get_job_id() == client.get_job_id()
    master = client.job_master
    assert master.restarts == 2 and master.status is JobStatus.FAILED
    counts = client.get_checkpoint_statistics().counts
    assert counts.completed == 0 and counts.failed >= 3  # at least one per attempt


# --------------------------------------------------------------------------- min pause


@pytest.mark.parametrize("min_pause_ms", [0, 400])
def test_min_pause_between_checkpoints(tmp_path: Path, min_pause_ms: int) -> None:
    env = _env(tmp_path, interval_ms=20)
    env.get_checkpoint_config().set_min_pause_between_checkpoints(min_pause_ms)
    client = _submit(env, tmp_path)  # unbounded: no forced final checkpoint to skew gaps
    wait_for(lambda: _completed(client) >= 5, 30, 0.01, "five completed checkpoints")
    history = _history(client)
    _cancel(client)
    gaps = [
        nxt.trigger_ms - prev.end_ms
        for prev, nxt in itertools.pairwise(history)
        if prev.status is CheckpointStatus.COMPLETED and prev.end_ms is not None
    ]
    assert len(gaps) >= 4
    if min_pause_ms:
        assert min(gaps) >= min_pause_ms, gaps
    else:
        # The control: with a 20 ms interval the next checkpoint follows right away.
        assert min(gaps) < 400, gaps


# --------------------------------------------------------------------------- max concurrent


@pytest.mark.parametrize("max_concurrent", [1, 2])
def test_max_concurrent_checkpoints(tmp_path: Path, max_concurrent: int) -> None:
    env = _env(tmp_path, interval_ms=20)
    env.get_checkpoint_config().set_max_concurrent_checkpoints(max_concurrent)
    client = _submit(env, tmp_path, check=SlowUploadCheck(0.25))
    wait_for(lambda: _completed(client) >= 4, 30, 0.01, "four completed checkpoints")
    history = _history(client)
    _cancel(client)
    done = [s for s in history if s.status is CheckpointStatus.COMPLETED]
    # Once key k00000 holds its slow pickle (a checkpoint triggered before its first record
    # was processed is fast), each checkpoint lasts far longer than the interval:
    # overlapping was always possible.
    slow_from = next(i for i, s in enumerate(done) if s.end_to_end_duration_ms >= 200)
    assert len(done) - slow_from >= 2, [s.end_to_end_duration_ms for s in done]
    assert all(s.end_to_end_duration_ms >= 200 for s in done[slow_from:])

    def in_flight_at(t_ms: int, other_than: int) -> int:
        return sum(
            1
            for s in history
            if s.checkpoint_id != other_than
            and s.trigger_ms <= t_ms
            and (s.end_ms is None or s.end_ms > t_ms)
        )

    concurrency = [in_flight_at(s.trigger_ms, s.checkpoint_id) + 1 for s in history]
    assert max(concurrency) == max_concurrent, [
        (s.checkpoint_id, s.trigger_ms, s.end_ms) for s in history
    ]


# --------------------------------------------------------------------------- retention


def test_retained_checkpoints_survive_cancellation(tmp_path: Path) -> None:
    env = _env(tmp_path, interval_ms=50)
    config = env.get_checkpoint_config()
    config.set_number_of_retained_checkpoints(2)
    config.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    client = _submit(env, tmp_path)
    wait_for(lambda: _completed(client) >= 5, 30, 0.01, "five completed checkpoints")
    _cancel(client)
    completed = sorted(
        s.checkpoint_id for s in _history(client) if s.status is CheckpointStatus.COMPLETED
    )
    newest_two = [f"chk-{cid}" for cid in completed[-2:]]
    job_dir = _job_dir(tmp_path, client)
    # Older completed checkpoints were subsumed, the in-flight one aborted: neither remains;
    # the run's record says it was cancelled (a rerun starts fresh).
    assert sorted(os.listdir(job_dir)) == ["_run-status", *sorted(newest_two)]
    assert b'"state": "CANCELED"' in (job_dir / "_run-status").read_bytes()
    for name in newest_two:
        assert (job_dir / name / "_metadata").is_file()
    coordinator = client.job_master.coordinator
    assert coordinator is not None
    assert [c.checkpoint_id for c in coordinator.completed_checkpoints()] == completed[-2:]
    _output_is_consistent(tmp_path)


@pytest.mark.parametrize("ending", ["finished", "cancelled"])
def test_job_directory_removed_without_externalized_retention(tmp_path: Path, ending: str) -> None:
    env = _env(tmp_path, interval_ms=50)
    assert not env.get_checkpoint_config().is_externalized_checkpoints_enabled()
    client = _submit(env, tmp_path, count=2_000 if ending == "finished" else None)
    job_dir = _job_dir(tmp_path, client)
    published: list[bool] = []

    def on_event(event: str, checkpoint_id: Any) -> None:
        if event == "checkpoint":  # right after its _metadata was written
            published.append((job_dir / f"chk-{checkpoint_id}" / "_metadata").is_file())

    client.job_master.listeners.append(on_event)
    if ending == "finished":
        client.get_job_execution_result(timeout=60)
        assert client.get_job_status() is JobStatus.FINISHED
    else:
        wait_for(lambda: len(published) >= 2, 30, 0.01, "two completed checkpoints")
        _cancel(client)
    assert published and all(published)
    assert not job_dir.exists()
    assert (tmp_path / "chk").is_dir()
