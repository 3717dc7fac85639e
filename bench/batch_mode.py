"""BATCH against STREAMING on one bounded keyed aggregation, and the same job in PySpark's
DataFrame API: ``python -m bench.batch_mode --records 10000000 --keys 10000``.

Invariant: every run is the same job on one Spark session (started and warmed up first, so
start-up is left out): ``records`` generated records ``(key, 1)`` over ``keys`` keys,
key_by + sum, a discarding sink; the time is submission to the end of the job. STREAMING
emits every running sum (``records`` outputs), BATCH each key's final sum (``keys``
outputs); the DataFrame job is ``spark.range`` → ``groupBy(key).agg(sum)`` → the ``noop``
sink (generated and aggregated in the JVM). Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from bench.cairn_functions import CoveringKeysGenerator
from cairn.common import Configuration, WatermarkStrategy
from cairn.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource
from cairn.datastream.functions import SinkFunction


class CountingSink(SinkFunction):
    """Discards records; counts them in a file per subtask (the test of the run)."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def open(self, runtime_context: Any) -> None:
        self.count = 0
        self.path = os.path.join(
            self.out_dir, f"count-{runtime_context.get_index_of_this_subtask()}"
        )

    def invoke(self, value: Any, context: Any) -> None:
        self.count += 1

    def close(self) -> None:
        with open(self.path, "w") as f:
            f.write(str(self.count))


def cairn_run(mode: str, records: int, keys: int, parallelism: int, out_dir: str) -> float:
    """Seconds to run the keyed sum in ``mode`` on Cairn (Spark executor)."""
    for name in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, name))
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_runtime_mode(RuntimeExecutionMode[mode])
    env.set_parallelism(parallelism)
    source = DataGeneratorSource(CoveringKeysGenerator(keys), records)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "generator")
        .key_by(lambda r: r[0])
        .sum(1)
        .add_sink(CountingSink(out_dir))
    )
    started = time.perf_counter()
    env.execute(f"keyed sum {mode}")
    elapsed = time.perf_counter() - started
    emitted = sum(int(Path(out_dir, n).read_text()) for n in os.listdir(out_dir))
    expected = keys if mode == "BATCH" else records
    if emitted != expected:
        raise AssertionError(f"{mode}: {emitted} outputs, expected {expected}")
    return elapsed


def dataframe_run(spark: Any, records: int, keys: int, parallelism: int) -> float:
    """Seconds to run the keyed sum with PySpark's DataFrame API."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    frame = spark.range(0, records, numPartitions=parallelism)
    key = F.concat(F.lit("k"), F.lpad((F.col("id") % keys).cast("string"), 6, "0"))
    totals = (
        frame.select(key.alias("key"), F.lit(1).alias("one"))
        .groupBy("key")
        .agg(F.sum("one").alias("total"))
    )
    totals.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--out", default="/tmp/cairn-bench-batch")
    parser.add_argument("--runs", default="BATCH,STREAMING,DATAFRAME")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    from cairn.deploy.spark_session import get_or_create_spark

    spark = get_or_create_spark(None, args.parallelism, {})
    # Warm-up: Python workers forked, code imported, the JIT warm, for every run alike.
    for mode in ("BATCH", "STREAMING"):
        cairn_run(mode, 20_000, 100, args.parallelism, args.out)
    dataframe_run(spark, 20_000, 100, args.parallelism)
    results: dict[str, Any] = {
        "records": args.records,
        "keys": args.keys,
        "parallelism": args.parallelism,
        "load_before": os.getloadavg(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
    }
    for run in args.runs.split(","):
        if run == "DATAFRAME":
            seconds = dataframe_run(spark, args.records, args.keys, args.parallelism)
        else:
            seconds = cairn_run(run, args.records, args.keys, args.parallelism, args.out)
        results[run] = {"seconds": round(seconds, 2), "records_per_s": int(args.records / seconds)}
        print(run, results[run], flush=True)
    results["load_after"] = os.getloadavg()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
