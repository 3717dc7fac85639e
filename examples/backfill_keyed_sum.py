"""Backfill: running totals computed in batch from a Parquet file become the state a streaming
job starts from.

Invariant: for every key, the streaming job's totals continue the batch totals: total after
a new amount = sum of the key's history + the key's new amounts so far.

1. A batch job (plain Spark) sums the history per key.
2. ``SavepointWriter`` writes the sums as the ``ValueState`` ``"sum"`` of the operator with
   ``uid("keyed-sum")``: Spark tasks write one state file per key-group range, then the
   driver writes ``_metadata``.
3. The streaming job starts from that savepoint (``execution.savepoint.path``) and prints
   ``key: total`` as new amounts arrive.

Run it with ``python examples/backfill_keyed_sum.py [work-dir]``. Expected::

    alice: 1000 1005 1015
    bob: 2100
    carol: 3
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from cairn.common import Configuration, Types
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.state import ValueStateDescriptor
from cairn.deploy.spark_session import get_or_create_spark
from cairn.state_processor import SavepointWriter

SUM = ValueStateDescriptor("sum", Types.LONG())
HISTORY = [("alice", 600), ("bob", 1500), ("alice", 400), ("bob", 500)]
NEW_AMOUNTS = [("alice", 0), ("alice", 5), ("bob", 100), ("alice", 10), ("carol", 3)]


class RunningSum(KeyedProcessFunction[str, tuple[str, int], tuple[str, int]]):
    """A running sum per key in ``ValueState`` (the state the backfill writes)."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(SUM)

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[tuple[str, int]]:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


def backfill(spark: Any, history_parquet: str, savepoint: str) -> None:
    """Sum the history per key with Spark and write the sums as a savepoint."""
    totals = spark.read.parquet(history_parquet).groupBy("key").sum("amount")
    totals = totals.withColumnRenamed("sum(amount)", "value")
    SavepointWriter.new_savepoint(spark, max_parallelism=128).with_keyed_state(
        "keyed-sum", SUM, totals
    ).write(savepoint)


def stream(savepoint: str) -> dict[str, list[int]]:
    """The streaming job, started from ``savepoint``: each key's totals as they were printed."""
    config = Configuration()
    config.set_string("execution.savepoint.path", savepoint)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(2)
    env.set_max_parallelism(128)  # the savepoint's key groups
    totals: dict[str, list[int]] = {}
    job = (
        env.from_collection(NEW_AMOUNTS)
        .key_by(lambda r: r[0])
        .process(RunningSum())
        .uid("keyed-sum")
    )
    with job.execute_and_collect("keyed-sum-from-backfill") as results:
        for key, total in results:
            totals.setdefault(key, []).append(total)
    return totals


def main(argv: list[str] | None = None) -> dict[str, list[int]]:
    args = sys.argv[1:] if argv is None else argv
    work = args[0] if args else tempfile.mkdtemp(prefix="cairn-backfill-")
    history, savepoint = os.path.join(work, "history.parquet"), os.path.join(work, "savepoint")
    spark = get_or_create_spark(None, 2, {})
    spark.createDataFrame(HISTORY, "key string, amount long").write.mode("overwrite").parquet(
        history
    )
    backfill(spark, history, savepoint)
    totals = stream(savepoint)
    for key in sorted(totals):
        print(f"{key}: {' '.join(str(t) for t in totals[key])}")
    return totals


if __name__ == "__main__":
    main()
