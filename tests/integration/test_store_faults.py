"""Faults of the checkpoint storage while a job runs, on each store's real server (HDFS's
MiniDFSCluster, fake-gcs-server, Azurite, SeaweedFS S3): the job rides each out and its
committed output is exactly the failure-free one.

- The storage server SIGKILLed mid-run and restarted on its data: checkpoints fail while it is
  down (counted against a generous tolerable-failure limit, so the job keeps running), and
  one completes once it is back.
- HDFS: a DataNode lost with files replicated twice; the NameNode (told to notice within
  seconds) writes around it, and a failed upload is a failed checkpoint, not a failed job.
- A slow store (the server paused, SIGSTOP): checkpoints expire at the checkpoint timeout
  (``execution.checkpointing.timeout``) and complete again once it answers.
- A full disk (the server's data, HDFS's DataNodes' blocks, on a small tmpfs filled to the last
  byte): checkpoints fail (on HDFS and GCS one of them declined for the lack of space by name;
  SeaweedFS cannot say why), and complete again once the space is freed.

Each test starts its own server (the session's are shared by other tests, and these stop them).
The in-process executor: the faults are the store's, not the workers'.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from cairn.testing.small_disk import SmallDisk, mount_unavailable
from tests.integration._store_servers import STORES, data_dir, start_store
from tests.integration.jobs import expected_lines, sequence_job

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

KEYS = 10
TIMEOUT = "execution.checkpointing.timeout"
TIMEOUT_MS = 4_000  # a checkpoint stuck on a dead or paused store expires after this


def _stores(names: tuple[str, ...]) -> list[Any]:
    return [pytest.param(name, marks=getattr(pytest.mark, name)) for name in names]


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with start_store(request.param, tmp_path) as server:
        yield server


# A paused server is the same fault to every store's client (a connection that answers
# nothing) and the timeout is the coordinator's, not the store's: two stores, a file system
# and an object store, keep CI's time; the outage runs on every store.
SLOW_STORES = ("hdfs", "azure")


def _job(server: Any, out: str, records: int, rate: int, **extra: str) -> Any:
    conf = {
        "cairn.executor": "inprocess",
        "execution.checkpointing.dir": server.url("faults"),
        TIMEOUT: f"{TIMEOUT_MS} ms",
        "execution.checkpointing.tolerable-failed-checkpoints": "1000",
        **server.flink_config(),
        **extra,
    }
    env = sequence_job(conf, out, records=records, keys=KEYS, rate=rate, interval_ms=300)
    return env.execute_async("store-fault")


def _counts(client: Any) -> Any:
    stats = client.get_checkpoint_statistics()
    assert stats is not None
    return stats.counts


def _ride_out(
    client: Any, fault: Callable[[], None], heal: Callable[[], None], what: str
) -> tuple[int, float]:
    """After a completed checkpoint: ``fault()``, wait for a checkpoint to fail, ``heal()``,
    wait for one to complete. The failures seen and how long the fault lasted.

    A completion is counted from the first failure seen, not from ``heal()``'s return: a
    server that serves again before ``heal()`` sees it (HDFS's NameNode leaves safe mode,
    then the test's poll finds its ready file) may complete the job's final checkpoint, and
    a finished job takes no more."""
    wait_for(lambda: _counts(client).completed >= 1, 60, 0.05, "a first completed checkpoint")
    before = _counts(client)
    started = time.monotonic()
    fault()
    wait_for(
        lambda: _counts(client).failed > before.failed, 60, 0.05, f"a failed checkpoint ({what})"
    )
    failing = _counts(client)  # the store is down or stuck: nothing completes from here
    heal()
    lasted = time.monotonic() - started
    failed = _counts(client).failed - before.failed
    try:
        wait_for(
            lambda: _counts(client).completed > failing.completed,
            90,
            0.05,
            f"a checkpoint after {what} ended",
        )
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{_what_happened(client)}") from None
    return failed, lasted


def _what_happened(client: Any) -> str:
    """The job's status and its last checkpoints, for a test that waited in vain."""
    stats = client.get_checkpoint_statistics()
    rows = [f"job: {client.get_job_status()}; counts: {stats.counts}"]
    for cp in stats.history[:6]:
        rows.append(
            f"  {cp.checkpoint_id} {cp.status.name} acks {cp.num_acknowledged_subtasks}/"
            f"{cp.num_subtasks} {cp.failure_reason or ''} {(cp.failure_message or '')[:300]}"
        )
    return "\n".join(rows)


def _assert_exactly_once(client: Any, out: str, records: int) -> None:
    client.get_job_execution_result(timeout=180)
    master = client.job_master
    assert master.restarts == 0, master.error  # ridden out, not failed over
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert sorted(lines) == expected_lines(records, KEYS)


@pytest.mark.parametrize("store", _stores(STORES), indirect=True)
def test_the_storage_server_killed_and_restarted_mid_run_is_ridden_out(
    store: Any, tmp_path: Path
) -> None:
    out, records = str(tmp_path / "out"), 24_000
    client = _job(store, out, records, rate=1_000)
    failed, lasted = _ride_out(client, store.kill, store.restart, "the server's outage")
    _assert_exactly_once(client, out, records)
    print(f"[faults] {type(store).__name__} down {lasted:.1f} s: {failed} checkpoints failed")


@pytest.mark.parametrize("store", _stores(SLOW_STORES), indirect=True)
def test_a_slow_store_times_checkpoints_out(store: Any, tmp_path: Path) -> None:
    out, records = str(tmp_path / "out"), 16_000
    client = _job(store, out, records, rate=1_000)
    try:
        failed, lasted = _ride_out(client, store.pause, store.resume, "the store's pause")
    finally:
        store.resume()
    stats = client.get_checkpoint_statistics()
    assert stats.latest_failed is not None
    expired = (stats.latest_failed.failure_reason, stats.latest_failed.failure_message)
    _assert_exactly_once(client, out, records)
    assert "EXPIRED" in str(expired).upper(), expired  # timed out, not refused
    print(f"[faults] {type(store).__name__} paused {lasted:.1f} s: {failed} expired")


# The NameNode takes a DataNode for stale after 3 s without heartbeats (1 s apart) and writes
# around stale ones even when half the DataNodes are (the ratio's default, 0.5, stops avoiding
# them then); for dead after 2 rechecks + 10 heartbeats (12 s), instead of 10.5 min.
FAST_DATANODE_LOSS = {
    "dfs.namenode.write.stale.datanode.ratio": "1.0",
    "dfs.heartbeat.interval": "1",
    "dfs.namenode.heartbeat.recheck-interval": "1000",
    "dfs.namenode.stale.datanode.interval": "3000",
    "dfs.namenode.avoid.write.stale.datanode": "true",
    "dfs.namenode.avoid.read.stale.datanode": "true",
}


@pytest.mark.hdfs
def test_a_datanode_lost_with_replication_two_is_ridden_out(tmp_path: Path) -> None:
    out, records = str(tmp_path / "out"), 30_000
    with start_store("hdfs", tmp_path, hadoop_conf=FAST_DATANODE_LOSS) as hdfs:
        assert hdfs.replication == 2
        # Not the short timeout: an upload waits up to ~15 s to complete its file.
        client = _job(hdfs, out, records, rate=1_000, **{TIMEOUT: "60 s"})
        wait_for(lambda: _counts(client).completed >= 1, 60, 0.05, "a first completed checkpoint")
        before = _counts(client)
        started = time.monotonic()
        hdfs.stop_datanode(1)
        # The fault lands: uploads whose pipeline names the lost DataNode fail (refused, or
        # hdfs-native's OperationFailed after waiting ~15 s to complete the file); each is a
        # failed checkpoint, then the NameNode writes around it and checkpoints complete.
        wait_for(
            lambda: _counts(client).failed > before.failed,
            60,
            0.05,
            "a checkpoint failed on the lost DataNode",
        )
        failing = _counts(client)
        wait_for(
            lambda: _counts(client).completed >= failing.completed + 2,
            90,
            0.05,
            "two checkpoints completed without the lost DataNode",
        )
        lasted = time.monotonic() - started
        after = _counts(client)
        _assert_exactly_once(client, out, records)
    print(
        f"[faults] DataNode lost: {after.failed - before.failed} checkpoints failed, "
        f"{after.completed - before.completed} completed in {lasted:.1f} s"
    )


# Where a full disk is named in the checkpoint's failure: HDFS (the NameNode finds no DataNode
# with room for a block) and fake-gcs-server (its 500 says "no space left on device", after
# gcsfs's ~34 s of retries: hence the longer checkpoint timeout). SeaweedFS's S3 gateway and
# Azurite answer a bare internal error (Azurite's retried for ~80 s), which cannot be told
# from any other: not tested.
FULL_DISK = {
    "hdfs": {
        TIMEOUT: "20 s",  # uploads in flight when the disk filled wait ~15 s to give up
        "flink.hadoop.dfs.blocksize": "1048576",
    },
    "gcs": {TIMEOUT: "50 s"},
}
# The NameNode hands out DataNodes with room for a block (1 MB, not 128 MB, on a 64 MB disk)
# and learns their room from heartbeats, one a second.
_SMALL_BLOCKS = {"dfs.blocksize": "1048576", "dfs.heartbeat.interval": "1"}
_NO_SPACE = ("no space left", "disks are full")


@pytest.mark.parametrize("name", _stores(tuple(FULL_DISK)))
def test_a_full_disk_fails_checkpoints_by_name_until_space_is_freed(
    name: str, tmp_path: Path
) -> None:
    why = mount_unavailable()
    if why is not None:
        if os.environ.get("CI"):
            raise RuntimeError(why)
        pytest.skip(why)
    # 8 s of records: the job's last checkpoint waits for the space (the fault lasts longer).
    out, records = str(tmp_path / "out"), 8_000
    disk = SmallDisk(data_dir(name, tmp_path), size_mb=64)
    hadoop = _SMALL_BLOCKS if name == "hdfs" else None
    with start_store(name, tmp_path, hadoop_conf=hadoop, data_disk=disk) as server:
        client = _job(server, out, records, rate=1_000, **FULL_DISK[name])
        wait_for(lambda: _counts(client).completed >= 1, 60, 0.05, "a first completed checkpoint")
        before = _counts(client)
        started = time.monotonic()
        disk.fill()
        assert disk.available_bytes() == 0
        reasons: list[str] = []

        def named() -> bool:
            failed = client.get_checkpoint_statistics().latest_failed
            if failed is not None and failed.failure_message not in reasons:
                reasons.append(failed.failure_message)
            return any(any(n in r for n in _NO_SPACE) for r in reasons)

        try:
            wait_for(named, 90, 0.05, lambda: f"a failure naming the full disk: {reasons}")
        finally:
            disk.free()
        lasted = time.monotonic() - started
        failing = _counts(client)
        wait_for(
            lambda: _counts(client).completed > failing.completed,
            90,
            0.05,
            "a checkpoint after the space was freed",
        )
        _assert_exactly_once(client, out, records)
    print(
        f"[faults] {type(server).__name__} disk full {lasted:.1f} s: "
        f"{failing.failed - before.failed} checkpoints failed; {reasons[-1][:160]}"
    )


# SeaweedFS's S3 gateway answers a full disk with a bare internal error, which cannot be told
# from another server error: the checkpoints that fail while the disk is full (expired at the
# timeout, while the client retries) are the fault's, since one completed just before it and
# none can complete while not a byte is free. Azurite is left out: in one of two runs it kept
# completing checkpoints for a minute on a full disk, so the fault does not land reliably.
UNNAMED_FULL_DISK = ("s3",)


@pytest.mark.parametrize("name", _stores(UNNAMED_FULL_DISK))
def test_a_full_disk_the_store_does_not_name_is_ridden_out(name: str, tmp_path: Path) -> None:
    why = mount_unavailable()
    if why is not None:
        if os.environ.get("CI"):
            raise RuntimeError(why)
        pytest.skip(why)
    out, records = str(tmp_path / "out"), 12_000
    disk = SmallDisk(data_dir(name, tmp_path), size_mb=64)
    with start_store(name, tmp_path, data_disk=disk) as server:
        client = _job(server, out, records, rate=1_000)

        def fill() -> None:
            disk.fill()
            assert disk.available_bytes() == 0

        failed, lasted = _ride_out(client, fill, disk.free, "the full disk")
        _assert_exactly_once(client, out, records)
    print(f"[faults] {type(server).__name__} disk full {lasted:.1f} s: {failed} failed")
