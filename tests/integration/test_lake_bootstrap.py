"""A bootstrap savepoint from lakehouse tables: a Delta table and an Iceberg table read as
Spark DataFrames (``table_frame``), summed per key by Spark, written by the state processor,
and a job started from it continues every key's total."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.common import Configuration, Types
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.lake_frames import table_frame
from cairn.datastream.state import ValueStateDescriptor
from cairn.state_processor import SavepointReader, SavepointWriter

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.spark

SUM = ValueStateDescriptor("sum", Types.LONG())


class RunningSum(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(SUM)

    def process_element(self, value: Any, ctx: Any) -> Any:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


def test_bootstrap_from_delta_and_iceberg_and_restore(spark: Any, tmp_path: Path) -> None:
    import deltalake
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    keys = [f"k{i:03d}" for i in range(200)]
    history = pa.table({"key": keys, "amount": pa.array(range(200), pa.int64())})
    delta = str(tmp_path / "delta")
    deltalake.write_deltalake(delta, history)  # version 0
    more = pa.table({"key": ["k000", "gone"], "amount": [5, 999]})
    deltalake.write_deltalake(delta, more, mode="append")
    deltalake.DeltaTable(delta).delete("amount = 999")  # not a live row any more
    catalog = {"type": "sql", "uri": f"sqlite:///{tmp_path}/cat.db", "warehouse": str(tmp_path)}
    cat = load_catalog("cairn", **catalog)
    cat.create_namespace("hist")
    ice = cat.create_table("hist.parted", history.schema)
    with ice.update_spec() as spec:
        spec.add_identity("key")
    ice.append(history.slice(0, 50))  # partitioned: read through pyiceberg's Arrow
    assert table_frame(spark, delta).inputFiles()  # Spark's Parquet reader: the files
    assert not table_frame(spark, "hist.parted", catalog).inputFiles()  # from the driver

    union = table_frame(spark, delta).unionByName(table_frame(spark, "hist.parted", catalog))
    totals = union.groupBy("key").sum("amount").withColumnRenamed("sum(amount)", "value")
    target = str(tmp_path / "bootstrap")
    SavepointWriter.new_savepoint(spark, max_parallelism=128).with_keyed_state(
        "keyed-sum", SUM, totals, parallelism=2
    ).write(target)
    state = SavepointReader.read(spark, target).read_keyed_state("keyed-sum", SUM)
    expected = {k: i * (2 if i < 50 else 1) for i, k in enumerate(keys)}
    expected["k000"] += 5
    assert {r.key: r.value for r in state.collect()} == expected

    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    conf.set_string("execution.savepoint.path", target)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    feed = [("k000", 1), ("k199", 1), ("k049", 2), ("new", 7)]
    out = (
        env.from_collection(feed)
        .key_by(lambda r: r[0])
        .process(RunningSum())
        .uid("keyed-sum")
        .execute_and_collect("continue-lake-bootstrap", limit=len(feed))
    )
    assert sorted(out) == [("k000", 6), ("k049", 100), ("k199", 200), ("new", 7)]
