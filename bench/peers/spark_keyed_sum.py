"""PySpark 4.3 Structured Streaming peer: keyed running sum with ``transformWithState``.

Invariant: the query is a generator source (``rate-micro-batch``; ``rate`` for latency runs)
-> Cairn's ``(key, 1)`` record computed in SQL from the row index -> ``groupBy(key)`` ->
``transformWithState`` (Python row API, ``ValueState``, RocksDB state store) -> ``noop`` sink
(``foreachBatch`` latency probe in latency runs), on ``local[2]`` with 2 shuffle partitions.
A checkpoint is a micro-batch commit; last stdout line: one JSON result.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import recovery

SYSTEM = "spark"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
DEFAULT_BATCH_ROWS = 200_000  # ~20 rows per key per batch at 10,000 keys; see the README


def key_expression(num_keys: int) -> str:
    """Cairn's key of row ``value`` in Spark SQL (64-bit wrapping multiply; ANSI mode off)."""
    golden_signed = common.GOLDEN64 - (1 << 64)
    width = common.key_width(num_keys)
    return (
        f"format_string('k%0{width}d', "
        f"shiftrightunsigned(value * CAST({golden_signed} AS BIGINT), 32) % {num_keys})"
    )


def make_processor(probes_dir: str, run_tag: str, latency: bool, track_sums: bool) -> Any:
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StructField, StructType

    state_schema = StructType([StructField("total", LongType(), True)])

    class RunningSum(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.total = handle.getValueState("total", state_schema)
            self.probe = common.Probe(probes_dir, run_tag=run_tag)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            stored = self.total.get()  # None for a new key: one state call, not two
            total = 0 if stored is None else stored[0]
            if latency:
                for row in rows:
                    total += row.value
                    yield Row(key=key[0], total=total, created=row.created)
                self.total.update((total,))
                return
            n = 0
            for row in rows:
                total += row.value
                n += 1
            self.total.update((total,))
            self.probe.record_batch(n)
            if track_sums:
                self.probe.final_sums[key[0]] = total
            yield Row(key=key[0], total=total)

        def close(self) -> None:
            self.probe.close()

    return RunningSum()


def build_session(args: argparse.Namespace) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(f"local[{args.parallelism}]")
        .appName("peer-keyed-sum")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "4g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.parallelism))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
        .config("spark.sql.warehouse.dir", str(Path(args.work_dir) / "warehouse"))
        .config("spark.local.dir", str(Path(args.work_dir) / "local"))
        .getOrCreate()
    )


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    import pyspark
    from pyspark.sql import functions as F

    work = Path(args.work_dir)
    probes_dir = str(work / "probes")
    latency = args.workload == "latency"
    checkpoint_dir = work / "checkpoint"
    if not args.restore and checkpoint_dir.exists():
        shutil.rmtree(checkpoint_dir)
    spark = build_session(args)
    spark.sparkContext.setLogLevel("ERROR")
    if latency:
        source = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", max(1, int(args.rate)))
            .option("numPartitions", args.parallelism)
            .load()
        )
    else:
        # Interval 0: Spark always commits per micro-batch, so "off" is one micro-batch.
        batch_rows = args.batch_rows if args.checkpoint_interval_ms > 0 else args.records
        source = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", batch_rows)
            .option("numPartitions", args.parallelism)
            .load()
        )
    records = source.where(F.col("value") < args.records).selectExpr(
        f"{key_expression(args.keys)} AS key",
        "CAST(1 AS BIGINT) AS value",
        "CAST(unix_micros(timestamp) AS DOUBLE) / 1e6 AS created",
    )
    out_schema = "key string, total long" + (", created double" if latency else "")
    sums = records.groupBy("key").transformWithState(
        statefulProcessor=make_processor(
            probes_dir, args.run_tag, latency, args.workload == "recovery"
        ),
        outputStructType=out_schema,
        outputMode="Update",
        timeMode="None",
    )
    writer = sums.writeStream.option("checkpointLocation", str(checkpoint_dir))
    if args.checkpoint_interval_ms > 0:
        writer = writer.trigger(processingTime=f"{args.checkpoint_interval_ms} milliseconds")
    sink_probe = common.Probe(probes_dir, latency=True, run_tag=f"{args.run_tag}sink")
    if latency:

        def probe_batch(df: Any, batch_id: int) -> None:
            for row in df.select("created").collect():
                sink_probe.record(row[0])

        writer = writer.foreachBatch(probe_batch)
    else:
        writer = writer.format("noop")
    query = writer.outputMode("update").start()
    progress = wait_for_end(query, args)
    end = time.time()
    query.stop()
    (work / f"{args.run_tag}-progress.json").write_text(json.dumps(progress, indent=1))
    sink_probe.close()
    spark.stop()

    result = common.result_template(args, SYSTEM)
    result["versions"]["pyspark"] = pyspark.__version__
    result["state_store"] = "RocksDB"
    result["trigger"] = (
        f"processingTime {args.checkpoint_interval_ms} ms"
        if args.checkpoint_interval_ms > 0
        else "default (as fast as possible)"
    )
    probes = common.collect_probes(probes_dir, args.run_tag)
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    steady_fields(result, progress, args.records)
    result["steady_records_per_s_processor"] = probes["steady_records_per_s"]
    result["processed"] = probes["count"]
    result["final_sum_total"] = probes["final_sum_total"]
    if latency:
        sink = common.collect_probes(probes_dir, f"{args.run_tag}sink", args.latency_warmup_s)
        common.latency_fields(result, sink["latencies_ms"])
    batch_fields(result, progress, args)
    return result


def _batch_span(batch: dict[str, Any]) -> tuple[float, float]:
    """Wall-clock (start, end) of a micro-batch from its progress report."""
    from datetime import datetime

    start = datetime.fromisoformat(batch["timestamp"].replace("Z", "+00:00")).timestamp()
    return start, start + batch["durationMs"]["triggerExecution"] / 1000.0


def steady_fields(result: dict[str, Any], batches: list[dict[str, Any]], records: int) -> None:
    """Start-up = until the first micro-batch has committed (its output is out); steady =
    records of the later batches over the wall time from that commit to the last one. With a
    single batch: its records over its duration, and start-up = until it starts."""
    busy = [b for b in batches if b.get("numInputRows", 0) > 0]
    if not busy:
        return
    spans = [_batch_span(b) for b in busy]
    if len(busy) == 1:
        result["startup_s"] = round(spans[0][0] - common.SCRIPT_START, 3)
        result["steady_records_per_s"] = records / (spans[0][1] - spans[0][0])
        return
    result["startup_s"] = round(spans[0][1] - common.SCRIPT_START, 3)
    later = sum(min(b["numInputRows"], records) for b in busy[1:])
    later = min(later, records - min(busy[0]["numInputRows"], records))
    result["steady_records_per_s"] = later / (spans[-1][1] - spans[0][1])


def wait_for_end(query: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Poll progress until the source has passed ``--records`` rows; returns the batches."""
    while True:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        batches = [_as_dict(p) for p in query.recentProgress]
        ends = [_end_offset(b, args.rate) for b in batches if b.get("numInputRows", 0) > 0]
        if ends and max(ends) >= args.records:
            return batches
        time.sleep(0.1)


def _as_dict(progress: Any) -> dict[str, Any]:
    return dict(json.loads(progress.json))


def _end_offset(batch: dict[str, Any], rows_per_second: float) -> int:
    """Rows the source has produced up to the end of ``batch``.

    ``rate-micro-batch`` offsets count rows (``{"offset": n, ...}``); ``rate`` offsets count
    seconds since the start.
    """
    end = batch["sources"][0]["endOffset"]
    if isinstance(end, dict):
        return int(end["offset"])
    return int(float(str(end).strip('"')) * rows_per_second)


def batch_fields(result: dict[str, Any], batches: list[dict[str, Any]], args: Any) -> None:
    """Checkpoint (= micro-batch commit) durations and state size from the query progress."""
    busy = [b for b in batches if b.get("numInputRows", 0) > 0]
    commits = []
    for b in busy:
        d = b.get("durationMs", {})
        state_commit = sum(op.get("commitTimeMs", 0) for op in b.get("stateOperators", []))
        commits.append(float(d.get("walCommit", 0) + d.get("commitOffsets", 0) + state_commit))
    result["micro_batches"] = len(busy)
    result["batch_p50_ms"] = common.percentile(
        [float(b["durationMs"]["triggerExecution"]) for b in busy], 50
    )
    result["checkpoints_completed"] = len(busy)
    result["checkpoint_p50_ms"] = common.percentile(commits, 50)
    result["checkpoint_p99_ms"] = common.percentile(commits, 99)
    if busy:
        result["checkpoint_last_ms"] = commits[-1]
        ops = busy[-1].get("stateOperators", [])
        if ops:
            metrics = ops[0].get("customMetrics", {})
            result["state_rows"] = ops[0].get("numRowsTotal")
            result["state_size_bytes"] = ops[0].get("memoryUsedBytes")
            result["checkpoint_bytes"] = metrics.get("rocksdbSstFileSize")
    result["async_dip_pct"] = None
    result["note"] = (
        "Spark SS checkpoints every micro-batch (offset WAL + RocksDB state store commit + "
        "commit log); checkpoint_p50/p99 = walCommit + commitOffsets + state commitTimeMs per "
        "batch. The commit is synchronous, so there is no asynchronous phase (async_dip null)."
        + (
            " Interval 0: one micro-batch holding every record (Spark cannot turn "
            "checkpointing off)."
            if args.checkpoint_interval_ms <= 0 and args.workload != "latency"
            else ""
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS)
    parser.add_argument("--role", default="main", choices=("main", "job"))
    parser.add_argument("--run-tag", default="run")
    parser.add_argument("--restore", action="store_true")
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-spark-")
    common.keyed_sum_main(
        args,
        run_job,
        lambda a: recovery.run_recovery(a, SYSTEM, __file__),
        (
            "the whole local[2] application (driver JVM, executor threads, Python workers) is "
            "SIGKILLed and the query restarted by the harness from its checkpoint location, as "
            "Spark SS recovers; recovery_s includes JVM start-up"
        ),
    )


if __name__ == "__main__":
    main()
