"""The Iceberg sink's upsert mode: a keyed changelog applied copy-on-write, one snapshot per
checkpoint, a replay committing nothing; a Table API group-by through ``'connector' =
'iceberg'`` with a primary key, failed once mid-run, ends with the fault-free table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.api.connectors import CheckpointCommittables, SinkWriterContext
from cairn.common import RestartStrategies, Row, RowKind, Types, WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.iceberg import IcebergSink
from cairn.ids import CheckpointId
from cairn.table import StreamTableEnvironment

pytest.importorskip("pyiceberg")

ROW = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.LONG()])
EVENT = Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()])
EVENTS = 3000


def _catalog(tmp_path: Path) -> dict[str, str]:
    return {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": str(tmp_path)}


def _load(catalog: dict[str, str], table: str) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("cairn", **catalog).load_table(table)


def _change(kind: RowKind, k: str, n: int) -> Row:
    row = Row(k=k, n=n)
    row.set_row_kind(kind)
    return row


def test_a_changelog_is_one_overwrite_snapshot_per_checkpoint_and_replays_are_skipped(
    tmp_path: Path,
) -> None:
    catalog = _catalog(tmp_path)
    sink = IcebergSink("db.totals", catalog, ROW, equality_field_columns=["k"], upsert=True)
    sink.check_job(None)
    committer = sink.create_committer()

    def checkpoint(c: int, *changes: list[Row]) -> list[Any]:
        results = []
        for subtask, rows in enumerate(changes):
            writer = sink.create_writer(SinkWriterContext(subtask, 2, 0, "job"), [])  # type: ignore[arg-type]
            writer.write_batch(rows)
            results += writer.prepare_commit(CheckpointId(c))
        return [CheckpointCommittables("job", CheckpointId(c), tuple(results))]  # type: ignore[arg-type]

    def rows() -> list[tuple[str, int]]:
        table = _load(catalog, "db.totals")
        return sorted((r["k"], r["n"]) for r in table.scan().to_arrow().to_pylist())

    INS, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
    c1 = checkpoint(1, [_change(INS, "a", 1), _change(INS, "b", 1)], [_change(INS, "c", 1)])
    committer.commit(c1)
    assert rows() == [("a", 1), ("b", 1), ("c", 1)]
    c2 = checkpoint(
        2,
        [_change(UB, "a", 1), _change(UA, "a", 2), _change(UB, "a", 2), _change(UA, "a", 3)],
        [_change(D, "c", 1), _change(INS, "d", 7)],
    )
    committer.commit(c2)
    assert rows() == [("a", 3), ("b", 1), ("d", 7)]
    table = _load(catalog, "db.totals")
    summaries = [s.summary for s in table.snapshots()]
    assert [s.operation.value for s in summaries] == ["append", "overwrite"]
    assert [s["flink.max-committed-checkpoint-id"] for s in summaries] == ["1", "2"]
    # A replay after a restore (its staged files were deleted after the commit) is skipped.
    committer.commit(c2)
    assert len(_load(catalog, "db.totals").snapshots()) == 2 and rows()[0] == ("a", 3)
    staged = list((tmp_path / "db.db" / "totals" / "cairn-staging").glob("*"))
    assert staged == []  # applied changes are deleted


def _event(i: int) -> Any:
    return (f"k{i % 7}", i)


def test_a_group_by_upserted_into_iceberg_equals_the_fault_free_result(tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"

    def fail_once(event: Any) -> Any:
        if event[1] == EVENTS // 2 and not marker.exists():
            marker.write_text("x")
            raise RuntimeError("a lost worker")
        return event

    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"cairn.executor": "inprocess"})
    env.set_parallelism(2)
    env.enable_checkpointing(50)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    source = DataGeneratorSource(_event, EVENTS, RateLimiterStrategy.per_second(4000), EVENT)
    events = env.from_source(source, WatermarkStrategy.no_watermarks(), "events", EVENT)
    ds = events.uid("events").map(fail_once, output_type=EVENT).uid("fail-once")
    t_env = StreamTableEnvironment.create(env)
    t_env.create_temporary_view("e", t_env.from_data_stream(ds))
    t_env.execute_sql(
        f"""CREATE TABLE totals (k STRING, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED)
        WITH ('connector' = 'iceberg', 'uri' = 'sqlite:///{tmp_path}/catalog.db',
        'warehouse' = '{tmp_path}', 'catalog-database' = 'shop')"""
    )
    t_env.execute_sql("INSERT INTO totals SELECT k, COUNT(*), SUM(v) FROM e GROUP BY k").wait()
    assert marker.exists()
    table = _load(_catalog(tmp_path), "shop.totals")
    got = sorted((r["k"], r["n"], r["s"]) for r in table.scan().to_arrow().to_pylist())
    want = sorted((f"k{k}", len(vs), sum(vs)) for k in range(7) for vs in [range(k, EVENTS, 7)])
    assert got == want
    summaries = [s.summary.additional_properties for s in table.snapshots()]
    jobs = {s["flink.job-id"] for s in summaries}
    assert len(jobs) == 1 and len(summaries) > 2  # several checkpoints, one job
    committed = [s["flink.max-committed-checkpoint-id"] for s in summaries]
    assert len(committed) == len(set(committed))  # no checkpoint twice
