"""What works on S3 works on HDFS, GCS and Azure Blob, each on its real server (the session's
MiniDFSCluster, fake-gcs-server, Azurite): one chain of three short jobs per store, RocksDB
incremental checkpoints on the store throughout.

1. A job with local recovery is killed after its second checkpoint; its restore reads its
   state from the worker's local copies, not from the store; it is stopped with a **native**
   savepoint on the store.
2. A job restored from that savepoint at parallelism 3 checkpoints (incrementally, shared
   files) and is cancelled, its checkpoints retained on the store: ``cairn doctor`` reads them
   there with the store's ``-D`` keys, and the state processor reads the newest one (its
   shared files resolved on the store) as DataFrames in Spark.
3. A job restored from that retained checkpoint at parallelism 2 runs to the end: the output
   of the three is exactly the failure-free one.

Each store's other checks (pre-flight, workers SIGKILLed, canonical savepoints, the CLI's
listing, the lease) are in test_object_stores, test_hdfs_storage and test_hdfs_exactly_once.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import RocksDBKeyedStateHandle
from cairn.checkpoint.storage import load_checkpoint
from cairn.common import Types
from cairn.common.storage_options import storage_options_for
from cairn.datastream.state import ValueStateDescriptor
from cairn.events import SavepointFormatType
from cairn.state_processor import SavepointReader
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration.jobs import expected_lines, sequence_job

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(300)]

RECORDS, KEYS = 30_000, 10
UID = "sequence-check"
LAST = ValueStateDescriptor("last", Types.LONG())
SUM = ValueStateDescriptor("sum", Types.LONG())


@pytest.fixture(
    params=[
        pytest.param("hdfs", marks=pytest.mark.hdfs),
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(
        {"gcs": "fake_gcs", "azure": "azurite"}.get(request.param, "hdfs")
    )


def _rocksdb_handles(path: str, options: dict[str, Any]) -> list[RocksDBKeyedStateHandle]:
    op = load_checkpoint(path, options).metadata.operators[UID]
    handles = [h for s in op.subtasks.values() for h in s.keyed]
    assert handles and all(isinstance(h, RocksDBKeyedStateHandle) for h in handles)
    return handles  # type: ignore[return-value]


def _completed(client: Any, count: int) -> None:
    wait_for(
        lambda: client.get_checkpoint_statistics().counts.completed >= count,
        120,
        0.05,
        f"{count} completed checkpoints",
    )


def test_local_recovery_native_savepoint_doctor_and_state_processor_on_the_store(
    spark: Any, server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cairn.cli.main import main

    out, local = str(tmp_path / "out"), tmp_path / "local"
    root = server.url("parity", tmp_path.name)
    conf = {
        **server.flink_config(),
        "cairn.executor": "inprocess",
        "execution.checkpointing.dir": root,
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
        "state.backend.rocksdb.localdir": str(tmp_path / "db"),
    }
    options = storage_options_for(root, conf)

    # 1. Local recovery, then a native savepoint on the store.
    first = {
        **conf,
        "state.backend.local-recovery": "true",
        "taskmanager.state.local.root-dirs": str(local),
        "cairn.testing.faults": "point=after-commit,attempt=0,checkpoint=2",
    }
    a = sequence_job(first, out, records=RECORDS, keys=KEYS, rate=4_000).execute_async("a")
    wait_for(lambda: a.job_master.restarts == 1, 120, 0.05, "the restart after checkpoint 2")
    _completed(a, 3)
    restored = a.job_master.last_initialization
    assert restored is not None and restored.local_bytes > 0, restored
    assert restored.local_bytes == restored.state_bytes, "all of it from the local copies"
    native = server.url("parity", tmp_path.name, "native")
    stopped = a.stop_with_savepoint(False, native, SavepointFormatType.NATIVE).result(timeout=120)
    a.get_job_execution_result(timeout=60)
    assert not any(p.is_file() for p in local.rglob("*")), "a finished job's copies are gone"
    assert not any(f.shared for h in _rocksdb_handles(stopped, options) for f in h.files)
    after_a = len(read_visible_lines(out))
    assert 0 < after_a < RECORDS

    # 2. Restored at parallelism 3, cancelled with its checkpoints retained on the store.
    second = {**conf, "execution.savepoint.path": stopped}
    b = sequence_job(
        second, out, records=RECORDS, keys=KEYS, rate=4_000, parallelism=3, retain=True
    ).execute_async("b")
    _completed(b, 3)
    b.cancel()
    with contextlib.suppress(Exception):
        b.get_job_execution_result(timeout=60)
    job_dir = f"{root}/{b.get_job_id()}"
    latest = load_checkpoint(job_dir, options)
    handles = _rocksdb_handles(latest.directory, options)
    assert any(f.path.startswith("../shared/") for h in handles for f in h.files)

    # cairn doctor on the retained checkpoints, with the store's keys as -D options.
    argv = ["doctor", job_dir, "--json"]
    for key, value in server.flink_config().items():
        argv += ["-D", f"{key}={value}"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["checkpoints"] >= 1

    # The state processor: the newest retained checkpoint, read in Spark from the store.
    reader = SavepointReader.read(spark, job_dir, storage_options=options)
    assert reader.checkpoint.checkpoint_id == latest.checkpoint_id
    last = dict(reader.read_keyed_state(UID, LAST, num_partitions=2).collect())
    total = dict(reader.read_keyed_state(UID, SUM).collect())
    assert sorted(last) == [f"k{k:05d}" for k in range(KEYS)]
    assert all(total[k] == n * (n + 1) // 2 for k, n in last.items()), (last, total)
    assert after_a <= sum(last.values()) <= RECORDS

    # 3. Restored from the retained checkpoint at parallelism 2, to the end.
    third = {**conf, "execution.savepoint.path": latest.directory}
    sequence_job(third, out, records=RECORDS, keys=KEYS, rate=None).execute("c")
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)
