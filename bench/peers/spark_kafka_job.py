"""PySpark 4.3 Structured Streaming peer of the Kafka job benchmark (``python -m
bench.kafka_job``).

Invariant: the query is Spark's Kafka source (``startingOffsets=earliest``) -> the line's key
in SQL -> ``groupBy(key)`` -> ``transformWithState`` (Python row API, ``ValueState``
count, RocksDB state store) emitting each line with its running sum (``bench.kafka_topics``
format) -> Spark's Kafka sink keyed by the line's key; micro-batches triggered every
``--checkpoint-interval-ms`` (Spark's checkpoint is the micro-batch commit), ``local[2]``
with 2 shuffle partitions, the connector ``--package`` from Maven Central through
``spark.jars.packages``. It stops once the query has read ``--records`` input rows and the
batch holding the last one committed; prints one JSON result as its last stdout line.
Spark's Kafka sink is at-least-once: there is no exactly-once Kafka sink in Spark.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import common
from spark_keyed_sum import ROCKSDB, batch_fields

SYSTEM = "spark"


def make_processor() -> Any:
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StructField, StructType

    state_schema = StructType([StructField("total", LongType(), True)])

    class LineSum(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.total = handle.getValueState("total", state_schema)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            stored = self.total.get()
            total = 0 if stored is None else stored[0]
            k = key[0]
            for row in rows:
                total += 1
                _, _, rest = row.line.split(",", 2)
                yield Row(key=k, value=f"{k},{total},{rest}")
            self.total.update((total,))

        def close(self) -> None:
            pass

    return LineSum()


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    import pyspark
    from pyspark.sql import SparkSession

    work = Path(args.work_dir)
    spark = (
        SparkSession.builder.master(f"local[{args.parallelism}]")
        .appName("peer-kafka-job")
        .config("spark.jars.packages", args.package)
        .config("spark.jars.ivy", str(Path(args.ivy_dir).expanduser()))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        # A loaded machine starts Python workers slowly: Spark's 15 s would fail the query.
        .config("spark.python.authenticate.socketTimeout", "300s")
        .config("spark.network.timeout", "600s")
        .config("spark.executor.heartbeatInterval", "60s")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.parallelism))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config("spark.local.dir", str(work / "local"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    lines = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.source_topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS line")
        .selectExpr("substring_index(line, ',', 1) AS key", "line")
    )
    sums = lines.groupBy("key").transformWithState(
        statefulProcessor=make_processor(),
        outputStructType="key string, value string",
        outputMode="Update",
        timeMode="None",
    )
    started = time.time()
    query = (
        sums.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("topic", args.sink_topic)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime=f"{args.checkpoint_interval_ms} milliseconds")
        .outputMode("update")
        .start()
    )
    batches = wait_for_input(query, args.records)
    end = time.time()
    query.stop()
    spark.stop()
    result = common.result_template(args, SYSTEM)
    result["workload"] = "kafka-job"
    result["versions"]["pyspark"] = pyspark.__version__
    result["connector"] = args.package
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    result["job_s"] = round(end - started, 3)
    batch_fields(result, batches, args)
    result["note"] = "Spark's Kafka sink is at-least-once (no transactions)"
    return result


def wait_for_input(query: Any, records: int) -> list[dict[str, Any]]:
    """Poll progress until the micro-batches have read ``records`` rows; returns them."""
    while True:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        batches = [dict(json.loads(p.json)) for p in query.recentProgress]
        if sum(b.get("numInputRows", 0) for b in batches) >= records:
            return batches
        time.sleep(0.1)


def main() -> None:
    parser = common.kafka_job_parser(__doc__, "package")  # spark-sql-kafka-0-10's coordinate
    parser.add_argument("--ivy-dir", default="~/.cache/cairn/bench-ivy")
    common.run_main(parser, "peer-spark-kafka-", run_job)


if __name__ == "__main__":
    main()
