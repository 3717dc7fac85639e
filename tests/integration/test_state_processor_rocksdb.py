"""The state processor reads RocksDB checkpoints on real local Spark, as it reads heap ones.

Oracle: the same job (every kind of keyed state), the same input, run on the heap backend
and on RocksDB (full, and incremental with shared files reused from earlier checkpoints, and
a native savepoint of it): once the input is done, every state read from each is the same
DataFrame. Then a running job on Spark, checkpointing every 100 ms with one retained
checkpoint, is read through ``read_latest`` and ``cairn state``: each read is one
consistent checkpoint, and it stays readable after the job deleted that checkpoint.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import RocksDBKeyedStateHandle
from cairn.checkpoint.storage import load_checkpoint
from cairn.common.job_status import JobStatus
from cairn.events import SavepointFormatType
from cairn.state_processor import SavepointReader
from cairn.testing.processes import wait_for
from tests.integration._readme import STATE_LIST, STATE_SQL, readme_line
from tests.integration._rocksdb_state_jobs import (
    TOP,
    UID,
    consistency_problems,
    every_state_job,
    read_every_state,
)
from tests.integration.waits import committed_lines, completed_checkpoints

pytestmark = pytest.mark.spark

KEYS, PER_KEY = 300, 8
RECORDS = KEYS * PER_KEY


def _run_to_the_end(tmp: Path, conf: dict[str, str], native: str | None = None) -> str:
    """Run the job until its output is committed, take a native savepoint into ``native``
    if given, cancel it; its job directory (checkpoints retained)."""
    chk, out = str(tmp / "chk"), str(tmp / "out")
    env = every_state_job(
        {"cairn.executor": "inprocess", "state.backend.rocksdb.localdir": str(tmp / "db"), **conf},
        chk, out, keys=KEYS, records=RECORDS, rate=8_000,
    )  # fmt: skip
    client = env.execute_async(f"every-state-{tmp.name}")
    committed_lines(out, RECORDS, timeout=120)
    done = client.get_checkpoint_statistics().counts.completed
    completed_checkpoints(client, done + 2, timeout=60)  # some with nothing new to upload
    if native is not None:
        client.trigger_savepoint(native, SavepointFormatType.NATIVE).result(timeout=120)
    client.cancel()
    client.get_job_execution_result(timeout=60)
    return os.path.join(chk, client.get_job_id())


def _rocks_handles(path: str) -> list[RocksDBKeyedStateHandle]:
    op = load_checkpoint(path).metadata.operators[UID]
    handles = [h for s in op.subtasks.values() for h in s.keyed]
    assert handles and all(isinstance(h, RocksDBKeyedStateHandle) for h in handles)
    return handles  # type: ignore[return-value]


@pytest.fixture(scope="module")
def heap_oracle(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    job = _run_to_the_end(tmp_path_factory.mktemp("heap"), {"state.backend.type": "hashmap"})
    state = read_every_state(SavepointReader.read(spark, job))
    assert len(state["top"]) == KEYS and len(state["seqs"]) == RECORDS
    assert consistency_problems(state) == []
    return state


def test_a_full_rocksdb_checkpoint_reads_as_the_heap_one(
    spark: Any, heap_oracle: dict[str, Any], tmp_path: Path
) -> None:
    job = _run_to_the_end(tmp_path, {"state.backend.type": "rocksdb"})
    assert not any(f.shared for h in _rocks_handles(job) for f in h.files)
    reader = SavepointReader.read(spark, job)
    assert read_every_state(reader) == heap_oracle
    assert reader.keyed_state_kinds(UID) == {
        "top": "value", "seqs": "list", "mods": "map", "total": "reducing",
        "avg": "aggregating",
    }  # fmt: skip
    # Three tasks over two databases: the middle one opens both, keeps its own key groups.
    df = reader.read_keyed_state(UID, TOP, num_partitions=3)
    assert df.rdd.getNumPartitions() == 3
    assert sorted(map(tuple, df.collect())) == heap_oracle["top"]


def test_incremental_checkpoints_and_native_savepoints_read_as_the_heap_one(
    spark: Any, heap_oracle: dict[str, Any], tmp_path: Path
) -> None:
    native = str(tmp_path / "native")
    conf = {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true"}
    job = _run_to_the_end(tmp_path, conf, native)
    handles = _rocks_handles(job)
    # The latest checkpoint reuses SST files uploaded by earlier ones (in ../shared/).
    assert all(h.base_checkpoint_id is not None for h in handles)
    assert any(f.path.startswith("../shared/") for h in handles for f in h.files)
    assert sum(h.checkpointed_size for h in handles) < sum(h.size for h in handles)
    assert read_every_state(SavepointReader.read(spark, job)) == heap_oracle
    assert not any(f.shared for h in _rocks_handles(native) for f in h.files)
    assert read_every_state(SavepointReader.read(spark, native)) == heap_oracle


@pytest.mark.timeout(600)
def test_the_latest_checkpoint_of_a_running_job_is_read_from_a_copy(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cairn.cli.main import main

    chk, out = str(tmp_path / "chk"), str(tmp_path / "out")
    conf = {
        "cairn.executor": "spark",
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
        "state.backend.rocksdb.localdir": str(tmp_path / "db"),
    }
    env = every_state_job(conf, chk, out, keys=KEYS, records=None, rate=2_000, interval_ms=100)
    client = env.execute_async("every-state-running")
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 180)
        completed_checkpoints(client, 3, timeout=120)
        job = os.path.join(chk, client.get_job_id())
        with SavepointReader.read_latest(spark, job) as reader:
            n = reader.checkpoint.checkpoint_id
            source = Path(job) / f"chk-{n}"
            first = read_every_state(reader)
            assert first["seqs"] and consistency_problems(first) == []
            # The job goes on and deletes the checkpoint that was copied: the copy stays.
            wait_for(lambda: not source.exists(), 60, 0.05, f"{source} subsumed")
            assert read_every_state(reader) == first
            copy = reader.checkpoint.directory
        assert not os.path.exists(copy.removeprefix("file://"))  # removed by close()
        assert client.get_job_status() is JobStatus.RUNNING
        done = client.get_checkpoint_statistics().counts.completed
        completed_checkpoints(client, done + 1, timeout=60)  # undisturbed

        # The lines the docs show, on this job (in this process: its Spark session).
        def argv(line: str, *more: str) -> list[str]:
            line = line.replace("/tmp/cairn-checkpoints/<job-id>", job)
            line = line.replace("keyed-sum", UID).replace("--state sum", "--state total")
            return [*shlex.split(line)[1:], *more]

        assert main(argv(readme_line(STATE_SQL))) == 0
        printed = capsys.readouterr()
        assert "read from a copy" in printed.err
        table = [r.split("|")[1:3] for r in printed.out.splitlines() if r.startswith("|")]
        assert [c.strip() for c in table[0]] == ["keys", "total"]
        assert int(table[1][0]) == KEYS and int(table[1][1]) > 0
        assert main(argv(readme_line(STATE_SQL), "--json")) == 0
        row = json.loads(capsys.readouterr().out)
        assert row["keys"] == KEYS and row["total"] > 0
        assert main(argv(readme_line(STATE_LIST))) == 0
        listed = capsys.readouterr().out.splitlines()
        assert f"{UID}\tkeyed\tmods\tmap" in listed
        assert f"{UID}\tkeyed\tavg\taggregating" in listed
    finally:
        client.cancel()
        client.get_job_execution_result(timeout=120)
