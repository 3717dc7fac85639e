"""Small files in the lakehouse sinks: the target file size knobs, compaction in one commit
beside a job's own commits (Iceberg: a ``replace`` snapshot racing the committer; Delta:
delta-rs's OPTIMIZE), the doctor's finding, and ``cairn table optimize`` / ``cairn doctor
--table``. Writers and the global committer driven by hand as the engine drives them."""

from __future__ import annotations

import shlex
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn.api.connectors import CheckpointCommittables, SinkWriterContext
from cairn.cli.main import main
from cairn.common import Row, Types
from cairn.datastream.connectors.delta import DeltaSink
from cairn.datastream.connectors.iceberg import IcebergSink
from cairn.datastream.connectors.iceberg_maintenance import iceberg_table_facts
from cairn.datastream.connectors.lake_tables import optimize_table, table_facts, table_format
from cairn.ids import CheckpointId
from cairn.observability.doctor.table_rules import small_files
from tests.integration._readme import (
    DOCTOR_TABLE,
    TABLE_OPTIMIZE_DELTA,
    TABLE_OPTIMIZE_ICEBERG,
    readme_line,
)

pytest.importorskip("pyiceberg")
deltalake = pytest.importorskip("deltalake")

ROW = Types.ROW_NAMED(["id", "region"], [Types.LONG(), Types.STRING()])


def _catalog(tmp_path: Path) -> dict[str, str]:
    return {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": str(tmp_path)}


def _ctx(subtask: int) -> SinkWriterContext:
    return SinkWriterContext(subtask, 2, 0, "job")  # type: ignore[arg-type]


def _checkpoint(sink: Any, checkpoint: int, rows: list[tuple[int, str]]) -> list[Any]:
    """Two writers' files of ``rows`` (split by parity), gathered for the committer."""
    results = []
    for subtask in (0, 1):
        writer = sink.create_writer(_ctx(subtask), [])
        writer.write_batch([Row(*r) for r in rows if r[0] % 2 == subtask])
        results += writer.prepare_commit(CheckpointId(checkpoint))
    return [CheckpointCommittables("job", CheckpointId(checkpoint), tuple(results))]  # type: ignore[arg-type]


def _cli(line: str, *extra: str, **placeholders: str) -> int:
    """Run a command line docs/connectors.md shows, its placeholders substituted."""
    line = readme_line(line)
    for placeholder, value in placeholders.items():
        line = line.replace(placeholder, value)
    return main([*shlex.split(line)[1:], *extra])


def _rows(checkpoint: int) -> list[tuple[int, str]]:
    return [(checkpoint * 100 + i, "eu" if i % 3 else "us") for i in range(10)]


def test_iceberg_compaction_races_the_committer_without_losing_or_repeating_a_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = _catalog(tmp_path)
    properties = {"write.target-file-size-bytes": str(64 << 20)}
    sink = IcebergSink(
        "shop.orders", catalog, ROW, partition_by=["region"], table_properties=properties
    )
    sink.check_job(None)
    committer = sink.create_committer()
    for checkpoint in range(1, 6):
        committer.commit(_checkpoint(sink, checkpoint, _rows(checkpoint)))
    facts = iceberg_table_facts("shop.orders", catalog)
    assert facts.target_file_size == 64 << 20
    assert facts.data_files == 20 and [c.added_files for c in facts.commits] == [4] * 5
    finding = small_files(facts)  # 4 files a commit, commits milliseconds apart
    assert finding is not None and "cairn table optimize shop.orders" in finding.advice
    where = {"sqlite:////data/catalog.db": catalog["uri"], "file:///data/wh": str(tmp_path)}
    assert _cli(TABLE_OPTIMIZE_ICEBERG, **where) == 0
    out = capsys.readouterr().out
    assert out == "iceberg table shop.orders: 20 data files rewritten into 2 (20 -> 2 live files)\n"

    # Compactions in a loop while the job commits checkpoints 6..15: each side's optimistic
    # check on the branch head makes the loser plan (or commit) again.
    stop, rewrites, errors = threading.Event(), [], []

    def compact() -> None:
        while not stop.is_set():
            try:
                rewrites.append(optimize_table("shop.orders", catalog, min_input_files=2))
            except Exception as e:  # reported by the assertion below
                errors.append(e)
                return

    thread = threading.Thread(target=compact)
    thread.start()
    try:
        for checkpoint in range(6, 16):
            committer.commit(_checkpoint(sink, checkpoint, _rows(checkpoint)))
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert any(r.committed for r in rewrites)
    final = optimize_table("shop.orders", catalog, min_input_files=2)

    from pyiceberg.catalog import load_catalog

    table = load_catalog("cairn", **catalog).load_table("shop.orders")
    got = sorted((r["id"], r["region"]) for r in table.scan().to_arrow().to_pylist())
    assert got == sorted(r for c in range(1, 16) for r in _rows(c))
    live = list(table.scan().plan_files())
    assert len(live) == 2  # one file per partition
    assert final.files_after == 2 or not final.committed
    summaries = [s.summary for s in table.snapshots() if s.summary is not None]
    job = [s.additional_properties["flink.max-committed-checkpoint-id"] for s in summaries
           if "flink.job-id" in s.additional_properties]  # fmt: skip
    assert sorted(job, key=int) == [str(c) for c in range(1, 16)]  # each checkpoint once
    assert {s.operation.value for s in summaries} == {"append", "replace"}
    # A replay of checkpoint 15 after the compactions finds it committed.
    before = len(table.snapshots())
    committer.commit(_checkpoint(sink, 15, _rows(15)))
    table.refresh()
    assert len(table.snapshots()) == before


def test_delta_target_file_size_compaction_and_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "t")
    sink = (
        DeltaSink.for_row_data(path, ROW)
        .with_table_properties({"delta.targetFileSize": "4000"})
        .with_app_id("app")
        .build()
    )
    sink.check_job(None)
    committer = sink.create_committer()
    big = [(i, "x" * 40) for i in range(400)]  # ~20 kB in Arrow: split at 4 kB
    committer.commit(_checkpoint(sink, 1, big))
    files = deltalake.DeltaTable(path).get_add_actions(flatten=True)
    assert files.num_rows > 4 and max(files.column("size_bytes").to_pylist()) <= 4000
    for checkpoint in range(2, 12):
        committer.commit(_checkpoint(sink, checkpoint, _rows(checkpoint)))
    facts = table_facts(path)
    assert facts.format == "delta" and facts.target_file_size == 4000
    assert [c.added_files for c in facts.commits[:10]] == [2] * 10
    assert small_files(facts) is not None

    assert _cli(DOCTOR_TABLE, **{"/data/lake/words": path}) == 0
    assert "[lake-small-files]" in capsys.readouterr().out
    before = facts.data_files
    words = {"/data/lake/words": path}
    assert _cli(TABLE_OPTIMIZE_DELTA, "--target-file-size", str(1 << 20), **words) == 0
    out = capsys.readouterr().out
    assert f"delta table {path}: {before} data files rewritten into 1 ({before} -> 1" in out
    t = deltalake.DeltaTable(path)
    assert t.transaction_version("app") == 11  # the sink's idempotence record is kept
    n = t.to_pyarrow_table().num_rows
    assert n == 400 + 10 * 10 and len(t.get_add_actions(flatten=True)) == 1
    # The job goes on committing after the compaction, once per checkpoint.
    committer.commit(_checkpoint(sink, 12, _rows(12)))
    committer.commit(_checkpoint(sink, 12, _rows(12)))
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == n + 10


def test_table_addresses_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert table_format("./words") == "delta" and table_format("db.t") == "iceberg"
    assert main(["table", "optimize", "words"]) == 1
    assert "neither a Delta table's path or URL" in capsys.readouterr().err
    assert main(["table", "optimize", "db.t"]) == 1
    assert "give the catalog's properties (uri=...)" in capsys.readouterr().err
    assert main(["doctor"]) == 1
    assert "--table TABLE" in capsys.readouterr().err
