"""The Iceberg sink on the in-process executor, with pyiceberg's SQL catalog on SQLite and a
warehouse of local files: one snapshot per checkpoint, replay skipped, schema and partition
spec checked before the job starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg")

from cairn.api.connectors import CheckpointCommittables, SinkWriterContext
from cairn.common import Configuration, RestartStrategies, Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.iceberg import IcebergSink, IcebergSinkError
from cairn.datastream.connectors.iceberg_commit import (
    last_committed_checkpoint,
    should_commit,
)

ROW = Types.ROW_NAMED(["id", "region"], [Types.LONG(), Types.STRING()])


def _catalog(tmp_path: Path) -> dict[str, str]:
    return {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": str(tmp_path)}


def _load(catalog: dict[str, str], table: str) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("cairn", **catalog).load_table(table)


def _env(checkpoint_ms: int | None = 100) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.no_restart())
    if checkpoint_ms:
        env.enable_checkpointing(checkpoint_ms)
    return env


def _rows(n: int) -> list[tuple[int, str]]:
    return [(i, "eu" if i % 3 else "us") for i in range(n)]


def test_a_job_appends_every_record_once_in_one_snapshot_per_checkpoint(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    env = _env()
    ds = env.from_collection(_rows(3000), type_info=ROW)
    ds.sink_to(IcebergSink("db.orders", catalog, ROW, partition_by=["region"])).uid("ice")
    env.execute("iceberg")
    table = _load(catalog, "db.orders")
    got = sorted((r["id"], r["region"]) for r in table.scan().to_arrow().to_pylist())
    assert got == _rows(3000)
    snapshots = [s.summary.additional_properties for s in table.snapshots()]
    ids = [(p["flink.job-id"], p["flink.max-committed-checkpoint-id"]) for p in snapshots]
    assert len(set(ids)) == len(ids) >= 1
    assert [f.name for f in table.spec().fields] == ["region"]
    regions = {f.file.partition[0] for f in table.scan().plan_files()}
    assert regions == {"eu", "us"}


def test_without_checkpointing_the_end_of_input_is_one_snapshot(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    env = _env(checkpoint_ms=None)
    env.from_collection(_rows(500), type_info=ROW).sink_to(IcebergSink("db.t", catalog, ROW))
    env.execute("iceberg-batch")
    table = _load(catalog, "db.t")
    assert len(table.snapshots()) == 1
    assert table.scan().to_arrow().num_rows == 500


def test_a_replayed_checkpoint_is_not_committed_again(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    sink = IcebergSink("db.t", catalog, ROW)
    sink.check_job(None)  # creates the table
    writer = sink.create_writer(SinkWriterContext(0, 1, 0, "job-a"), [])
    writer.write_batch([(1, "eu"), (2, "us")])
    results = writer.prepare_commit(4)
    committer = sink.create_committer()
    committables = [CheckpointCommittables("job-a", 4, tuple(results))]
    committer.commit(committables)
    committer.commit(committables)  # after a restore
    table = _load(catalog, "db.t")
    assert len(table.snapshots()) == 1
    assert table.scan().to_arrow().num_rows == 2
    # another job (restored from a savepoint of this one) commits its own checkpoint 4
    writer.write_batch([(3, "eu")])
    other = [CheckpointCommittables("job-b", 4, tuple(writer.prepare_commit(5)))]
    committer.commit(other)
    assert _load(catalog, "db.t").scan().to_arrow().num_rows == 3


def test_a_writer_deletes_files_no_checkpoint_took_when_closed(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    sink = IcebergSink("db.t", catalog, ROW, rows_per_file=2)
    sink.check_job(None)
    writer = sink.create_writer(SinkWriterContext(0, 1, 0, "job"), [])
    writer.write_batch([(1, "eu"), (2, "us"), (3, "us")])  # one file written, one row buffered
    data = tmp_path  # the warehouse: data files under <namespace>/<table>/data
    assert len(list(data.rglob("*.parquet"))) == 1
    writer.close()
    assert list(data.rglob("*.parquet")) == []


def test_files_of_an_aborted_attempt_go_after_the_next_attempts_first_commit(
    tmp_path: Path,
) -> None:
    catalog = _catalog(tmp_path)
    sink = IcebergSink("db.t", catalog, ROW, rows_per_file=1, partition_by=["region"])
    sink.check_job(None)

    def files() -> set[Path]:
        return set(tmp_path.rglob("*.parquet"))

    def ids() -> list[int]:
        return sorted(r["id"] for r in _load(catalog, "db.t").scan().to_arrow().to_pylist())

    first = sink.create_writer(SinkWriterContext(0, 2, 0, "job"), [])
    first.write_batch([(1, "eu"), (2, "us")])
    sink.create_committer().commit(
        [CheckpointCommittables("job", 1, tuple(first.prepare_commit(1)))]
    )
    committed = files()
    killed = sink.create_writer(SinkWriterContext(1, 2, 0, "job"), [])  # attempt 0 dies:
    killed.write_batch([(3, "eu"), (4, "us")])  # its files written, never pre-committed
    aborted = files() - committed
    other_job = sink.create_writer(SinkWriterContext(0, 1, 0, "other"), [])
    other_job.write_batch([(5, "eu")])  # another job's: never this job's to delete
    restarted = sink.create_committer()
    restarted.abort_leftovers(SinkWriterContext(0, 1, 1, "job"))
    now = sink.create_writer(SinkWriterContext(0, 2, 1, "job"), [])
    now.write_batch([(6, "us")])  # the current attempt's, not committed yet: kept
    before = files()
    assert len(aborted) == 2 and len(before) == 6
    restarted.commit([CheckpointCommittables("job", 1, ())])  # a replay, the first commit
    assert files() == before - aborted
    assert ids() == [1, 2]
    restarted.commit([CheckpointCommittables("job", 2, tuple(now.prepare_commit(2)))])
    assert ids() == [1, 2, 6] and files() == before - aborted


def test_a_stream_that_does_not_fit_the_table_is_refused_before_the_job_starts(
    tmp_path: Path,
) -> None:
    catalog = _catalog(tmp_path)
    IcebergSink("db.t", catalog, ROW).check_job(None)
    other = Types.ROW_NAMED(["id", "country"], [Types.LONG(), Types.STRING()])
    with pytest.raises(IcebergSinkError) as error:
        IcebergSink("db.t", catalog, other).check_job(None)
    assert "missing: ['region']" in str(error.value)
    assert "not in the table: ['country']" in str(error.value)
    assert "\n" not in str(error.value)
    wrong = Types.ROW_NAMED(["id", "region"], [Types.STRING(), Types.STRING()])
    with pytest.raises(IcebergSinkError, match="column types do not fit") as error:
        IcebergSink("db.t", catalog, wrong).check_job(None)
    assert "\n" not in str(error.value)
    with pytest.raises(IcebergSinkError, match="partition spec is kept"):
        IcebergSink("db.t", catalog, ROW, partition_by=["region"]).check_job(None)
    with pytest.raises(IcebergSinkError, match="no row type to create it"):
        IcebergSink("db.missing", catalog).check_job(None)


def test_an_existing_tables_spec_and_columns_are_used_without_a_row_type(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    IcebergSink("db.t", catalog, ROW, partition_by=["truncate[10](id)"]).check_job(None)
    env = _env()
    env.from_collection(_rows(100), type_info=ROW).sink_to(IcebergSink("db.t", catalog))
    env.execute("iceberg-existing")
    table = _load(catalog, "db.t")
    assert table.scan().to_arrow().num_rows == 100
    assert {f.file.partition[0] for f in table.scan().plan_files()} == set(range(0, 100, 10))


def test_the_last_committed_checkpoint_is_the_newest_of_the_job() -> None:
    summaries = [
        {"flink.job-id": "a", "flink.max-committed-checkpoint-id": "7"},
        {"flink.job-id": "b", "flink.max-committed-checkpoint-id": "9"},
        {"flink.job-id": "a", "flink.max-committed-checkpoint-id": "5"},
    ]
    assert last_committed_checkpoint(summaries, "a") == 7
    assert last_committed_checkpoint(summaries, "b") == 9
    assert last_committed_checkpoint(summaries, "c") is None
    assert [should_commit(7, c) for c in (6, 7, 8)] == [False, False, True]


def test_bad_arguments_are_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not 'column' or 'transform"):
        IcebergSink("db.t", _catalog(tmp_path), ROW, partition_by=["day("])
    with pytest.raises(TypeError, match="ROW_NAMED"):
        IcebergSink("db.t", _catalog(tmp_path), Types.LONG())  # type: ignore[arg-type]


def test_sink_to_makes_parallel_writers_and_one_committer(tmp_path: Path) -> None:
    env = _env()
    ds = env.from_collection(_rows(10), type_info=ROW)
    sink = ds.sink_to(IcebergSink("db.t", _catalog(tmp_path), ROW)).uid("orders").set_parallelism(3)
    sink.name("orders")
    writers, committer = sink.get_writer_transformation(), sink.get_transformation()
    assert (writers.uid, writers.name, writers.parallelism) == ("orders", "orders: Writer", 3)
    assert (committer.uid, committer.name, committer.parallelism) == (
        "orders-committer",
        "orders: Committer",
        1,
    )


def test_an_iceberg_table_in_sql_is_created_and_appended_to(tmp_path: Path) -> None:
    from cairn.table import EnvironmentSettings, TableEnvironment, ValidationError

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.execute_sql(
        f"""CREATE TABLE orders (id BIGINT, region STRING) WITH ('connector' = 'iceberg',
        'uri' = 'sqlite:///{tmp_path}/catalog.db', 'warehouse' = '{tmp_path}',
        'catalog-database' = 'shop', 'write.target-file-size-bytes' = '1048576')"""
    )
    t_env.execute_sql("INSERT INTO orders VALUES (1, 'eu'), (2, 'us')").wait()
    table = _load(_catalog(tmp_path), "shop.orders")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [1, 2]
    assert table.properties["write.target-file-size-bytes"] == "1048576"
    with pytest.raises(ValidationError, match="Unsupported options found for 'iceberg'"):
        t_env.execute_sql(
            "CREATE TABLE bad (id BIGINT) WITH ('connector' = 'iceberg', 'url' = 'x')"
        )
