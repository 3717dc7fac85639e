"""Canonical savepoints on real local Spark: one job's state moves heap -> RocksDB -> heap.

The sequence job runs on the heap backend at parallelism 2 and stops with a savepoint; it is
restored on RocksDB at parallelism 3, which takes a native savepoint (RocksDB's files: the
state processor reads it, and refuses to write onto it, naming the operator) and stops with
a canonical one, which the state processor reads back (each key's last sequence number, as
the job reported it); that savepoint is restored on the heap at parallelism 1, which runs to
the end. Across the three runs every key's sequence continues with no gap and no repeat, and
the exactly-once file sink holds the golden output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import KeyedStateHandle, RocksDBKeyedStateHandle
from cairn.checkpoint.storage import load_checkpoint
from cairn.common.job_status import JobStatus
from cairn.common.typeinfo import Types
from cairn.datastream.state import ValueStateDescriptor
from cairn.events import SavepointFormatType
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration.jobs import expected_lines, sequence_job
from tests.integration.waits import committed_lines

RECORDS, KEYS, RATE = 90_000, 100, 6_000


def _keyed_handles(path: str) -> list[Any]:
    op = load_checkpoint(path).metadata.operators["sequence-check"]
    return [h for s in op.subtasks.values() for h in s.keyed]


def _last_reported(lines: list[str]) -> dict[str, int]:
    last: dict[str, int] = {}
    for line in lines:
        key, seq, _total = line.split(",")
        last[key] = max(last.get(key, 0), int(seq))
    return last


def _run_until_output(conf: dict[str, str], out: str, parallelism: int, name: str) -> Any:
    client = sequence_job(
        conf, out, records=RECORDS, keys=KEYS, parallelism=parallelism, rate=RATE
    ).execute_async(name)
    assert client.wait_for_status(JobStatus.RUNNING, 180)
    seen = len(read_visible_lines(out))
    committed_lines(out, seen + 2_000, timeout=180, interval=0.2)  # records flow in this run
    return client


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_savepoints_move_state_from_heap_to_rocksdb_and_back(spark: Any, tmp_path: Path) -> None:
    from cairn.state_processor import SavepointReader, SavepointWriter, StateProcessorError

    out = str(tmp_path / "out")
    base = {
        "cairn.executor": "spark",
        "execution.checkpointing.dir": f"file://{tmp_path}/chk",
        "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
    }
    heap, rocks = (
        {**base, "state.backend.type": "hashmap"},
        {**base, "state.backend.type": "rocksdb"},
    )

    first = _run_until_output(heap, out, 2, "canonical-heap")
    sp1 = first.stop_with_savepoint(False, str(tmp_path / "sp1")).result(timeout=300)
    assert first.get_job_status() is JobStatus.FINISHED
    assert all(isinstance(h, KeyedStateHandle) for h in _keyed_handles(sp1))

    second = _run_until_output(
        {**rocks, "execution.savepoint.path": sp1}, out, 3, "canonical-rocks"
    )
    native = second.trigger_savepoint(str(tmp_path / "native"), SavepointFormatType.NATIVE)
    handles = _keyed_handles(native.result(timeout=300))
    assert handles and all(isinstance(h, RocksDBKeyedStateHandle) for h in handles)
    # The state processor reads the native savepoint too; it only writes onto canonical ones.
    last_state = ValueStateDescriptor("last", Types.LONG())
    native_last = SavepointReader.read(spark, str(tmp_path / "native")).read_keyed_state(
        "sequence-check", last_state
    )
    assert native_last.count() == KEYS
    with pytest.raises(StateProcessorError, match=r"'sequence-check'.*native"):
        SavepointWriter.from_existing_savepoint(spark, str(tmp_path / "native")).with_keyed_state(
            "sequence-check", last_state, native_last
        ).write(str(tmp_path / "rewritten"))
    sp2 = second.stop_with_savepoint(False, str(tmp_path / "sp2")).result(timeout=300)
    assert second.get_job_status() is JobStatus.FINISHED
    handles = _keyed_handles(sp2)
    assert handles and all(isinstance(h, KeyedStateHandle) for h in handles)

    # The state processor reads the RocksDB job's canonical savepoint: what the job reported.
    lines = read_visible_lines(out)
    assert 0 < len(lines) < RECORDS, "the second run must stop mid-way"
    reader = SavepointReader.read(spark, sp2)
    last = reader.read_keyed_state("sequence-check", ValueStateDescriptor("last", Types.LONG()))
    assert dict(last.collect()) == _last_reported(lines)

    sequence_job(
        {**heap, "execution.savepoint.path": sp2}, out, records=RECORDS, keys=KEYS,
        parallelism=1, rate=None,
    ).execute("canonical-heap-again")  # fmt: skip
    lines = read_visible_lines(out)
    assert check_sequence_lines(lines).violations == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)
