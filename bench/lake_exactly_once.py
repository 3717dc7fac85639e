"""Exactly-once into Delta and Iceberg tables: Cairn beside Spark Structured Streaming, in the
same run, on the same generated records.

- **Cairn**: ``DataGeneratorSource.keyed_values`` -> ``key_by`` -> running sum in ``ValueState``
  -> ``DeltaSink`` / ``IcebergSink`` (one table commit per checkpoint), local Spark executor.
  Commit latency per checkpoint: the table commit's timestamp minus the checkpoint's trigger.
- **Spark SS**: ``rate-micro-batch`` with the same keys (Cairn's key function in SQL) ->
  ``groupBy(key).sum`` in update mode -> ``foreachBatch`` writing each micro-batch's updated
  totals with the same Python libraries (delta-rs ``write_deltalake`` with the ``txn``
  action ``(app id, batch id)``; pyiceberg ``append`` with the batch id in the snapshot
  summary, skipped when the table already holds it): Spark SS's documented way for a sink
  it has no native connector for. Its own Delta and Iceberg sinks do not load on PySpark 4.3
  (delta-spark 4.0.0: ``NoSuchMethodError LogKey.$init$``; iceberg-spark-runtime 4.0/4.1:
  ``IncompatibleClassChangeError SparkView``). Commit latency per micro-batch: the batch's
  trigger to the end of its table commit.

Records/s: the records over the wall time from submission (Spark: from building the session)
to the last commit, startup included for both. Cairn appends a row per record (each running
total), Spark a row per updated key per micro-batch (fewer rows): the comparison favours
Spark. Both tables' last total per key must equal the records' per-key counts (checked).

Invariant: each system runs in its own process, one after the other; prints one JSON object
as its last stdout line; tables under a temporary directory, removed.

    python -m bench.lake_exactly_once --records 1000000 --keys 10000 --interval-ms 2000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

GOLDEN64 = 0x9E3779B97F4A7C15
FORMATS = ("delta", "iceberg")


def _catalog(work: str) -> dict[str, str]:
    return {"type": "sql", "uri": f"sqlite:///{work}/catalog.db", "warehouse": f"file://{work}"}


def _pcts(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 1),
        "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 1),
        "max": round(ordered[-1], 1),
        "n": len(ordered),
    }


def _last_totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    best: dict[str, int] = {}
    for r in rows:
        best[r["key"]] = max(best.get(r["key"], 0), int(r["total"]))
    return best


def _table_rows(fmt: str, work: str, name: str) -> list[dict[str, Any]]:
    if fmt == "delta":
        import deltalake

        return list(deltalake.DeltaTable(f"{work}/{name}").to_pyarrow_table().to_pylist())
    from pyiceberg.catalog import load_catalog

    table = load_catalog("cairn", **_catalog(work)).load_table(f"bench.{name}")
    return list(table.scan().to_arrow().to_pylist())


def expected_totals(records: int, keys: int) -> dict[str, int]:
    """Per-key counts of the generator's keys (all values are 1)."""
    from cairn.datastream.connectors.datagen import KeyedValuesGenerator

    gen = KeyedValuesGenerator(keys, 1, None)
    counts: Counter[str] = Counter()
    step = 100_000
    for start in range(0, records, step):
        counts.update(gen.keys_of(range(start, min(records, start + step))))
    return dict(counts)


# ---- Cairn -----------------------------------------------------------------------------------


def run_cairn(fmt: str, args: argparse.Namespace, work: str) -> dict[str, Any]:
    from bench.cairn_functions import KeyedSum
    from bench.jobs import run_job
    from cairn.common import Configuration, Row, Types, WatermarkStrategy
    from cairn.common.restart_strategy import RestartStrategies
    from cairn.datastream import StreamExecutionEnvironment
    from cairn.datastream.connectors.datagen import DataGeneratorSource
    from cairn.datastream.connectors.delta import DeltaSink
    from cairn.datastream.connectors.iceberg import IcebergSink

    row = Types.ROW_NAMED(["key", "total"], [Types.STRING(), Types.LONG()])
    conf = Configuration()
    conf.set_string("cairn.executor", "spark")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.interval_ms)
    env.get_checkpoint_config().set_checkpoint_storage(f"file://{work}/checkpoints")
    env.set_restart_strategy(RestartStrategies.no_restart())
    sink: Any
    if fmt == "delta":
        sink = DeltaSink.for_row_data(f"{work}/cairn_totals", row).build()
    else:
        sink = IcebergSink("bench.cairn_totals", _catalog(work), row)
    (
        env.from_source(
            DataGeneratorSource.keyed_values(args.records, args.keys),
            WatermarkStrategy.no_watermarks(),
            "generator",
        )
        .uid("generator")
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .process(KeyedSum())
        .uid("keyed-sum")
        .map(lambda t: Row(t[0], t[1]), output_type=row)
        .uid("to-row")
        .sink_to(sink)
        .uid(f"{fmt}-sink")
    )
    seen = run_job(env, f"bench-lake-{fmt}")
    elapsed = seen.ended - seen.submitted
    triggers = {cid: s.trigger_ms for cid, s in seen.checkpoints.items()}
    latencies = [
        float(commit - triggers[cid]) for cid, commit in _commits(fmt, work) if cid in triggers
    ]
    return {
        "records_per_s": round(args.records / elapsed),
        "elapsed_s": round(elapsed, 2),
        "commits": len(latencies),
        "commit_latency_ms": _pcts(latencies),
        "rows_written": args.records,
        "totals": _last_totals(_table_rows(fmt, work, "cairn_totals")),
    }


def _commits(fmt: str, work: str) -> list[tuple[int, int]]:
    """``(checkpoint id, commit time ms)`` of each table commit of the Cairn job."""
    if fmt == "delta":
        import deltalake

        out = []
        for entry in deltalake.DeltaTable(f"{work}/cairn_totals").history():
            if "cairn.checkpoint" in entry:
                out.append((int(entry["cairn.checkpoint"]), int(entry["timestamp"])))
        return out
    from pyiceberg.catalog import load_catalog

    table = load_catalog("cairn", **_catalog(work)).load_table("bench.cairn_totals")
    return [
        (int(s.summary.additional_properties["flink.max-committed-checkpoint-id"]), s.timestamp_ms)
        for s in table.snapshots()
        if s.summary is not None
        and "flink.max-committed-checkpoint-id" in s.summary.additional_properties
    ]


# ---- Spark Structured Streaming ----------------------------------------------------------------


def _key_sql(keys: int) -> str:
    from cairn.datastream.connectors.datagen import KeyedValuesGenerator

    sample = KeyedValuesGenerator(keys, 1, None).keys_of(range(1))[0]
    width = len(sample) - 1
    golden_signed = GOLDEN64 - (1 << 64)
    return (
        f"format_string('k%0{width}d', "
        f"shiftrightunsigned(value * CAST({golden_signed} AS BIGINT), 32) % {keys})"
    )


class _BatchWriter:
    """``foreachBatch``: one table commit per micro-batch, idempotent by batch id."""

    def __init__(self, fmt: str, work: str) -> None:
        self.fmt, self.work = fmt, work
        self.latencies_ms: list[float] = []
        self.rows = 0

    def __call__(self, frame: Any, batch_id: int) -> None:
        started = time.time()
        data = frame.toArrow()
        self.rows += data.num_rows
        if self.fmt == "delta":
            import deltalake
            from deltalake import CommitProperties, Transaction

            path = f"{self.work}/spark_totals"
            if os.path.exists(path):
                done = deltalake.DeltaTable(path).transaction_version("spark-bench")
                if done is not None and done >= batch_id:
                    return
            deltalake.write_deltalake(
                path,
                data,
                mode="append",
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(app_id="spark-bench", version=batch_id)]
                ),
            )
        else:
            from pyiceberg.catalog import load_catalog

            cat = load_catalog("cairn", **_catalog(self.work))
            table = cat.load_table("bench.spark_totals")
            ids = {
                s.summary.additional_properties.get("spark.batch-id")
                for s in table.snapshots()
                if s.summary is not None
            }
            if str(batch_id) in ids:
                return
            table.append(data, snapshot_properties={"spark.batch-id": str(batch_id)})
        self.latencies_ms.append((time.time() - started) * 1000)


def run_spark(fmt: str, args: argparse.Namespace, work: str) -> dict[str, Any]:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    started = time.time()  # with the session's start, as Cairn's time includes its own
    spark = (
        SparkSession.builder.master(f"local[{args.parallelism}]")
        .appName("bench-lake-spark-ss")
        .config("spark.sql.shuffle.partitions", str(args.parallelism))
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    if fmt == "iceberg":
        from pyiceberg.catalog import load_catalog

        cat = load_catalog("cairn", **_catalog(work))
        cat.create_namespace_if_not_exists("bench")
        schema = pa.schema([("key", pa.string()), ("total", pa.int64())])
        cat.create_table("bench.spark_totals", schema)
    batches = max(1, args.records // args.rows_per_batch)
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", args.rows_per_batch)
        .option("numPartitions", args.parallelism)
        .load()
        .selectExpr(f"{_key_sql(args.keys)} AS key")
        .groupBy("key")
        .count()
        .withColumnRenamed("count", "total")
    )
    writer = _BatchWriter(fmt, work)
    query = (
        stream.writeStream.outputMode("update")
        .option("checkpointLocation", f"{work}/spark-checkpoints")
        .trigger(processingTime=f"{args.interval_ms} milliseconds")
        .foreachBatch(writer)
        .start()
    )
    trigger_ms: list[float] = []
    seen: set[int] = set()
    while True:
        for p in query.recentProgress:
            if p["batchId"] not in seen and p["numInputRows"] > 0:
                seen.add(p["batchId"])
                trigger_ms.append(float(p["durationMs"].get("triggerExecution", 0)))
        if len(seen) >= batches:
            break
        time.sleep(0.2)
    elapsed = time.time() - started
    query.stop()
    spark.stop()
    records = batches * args.rows_per_batch
    return {
        "records_per_s": round(records / elapsed),
        "elapsed_s": round(elapsed, 2),
        "commits": len(writer.latencies_ms),
        "commit_latency_ms": _pcts(writer.latencies_ms),
        "micro_batch_ms": _pcts(trigger_ms),
        "rows_written": writer.rows,
        "totals": _last_totals(_table_rows(fmt, work, "spark_totals")),
    }


# ---- the run ---------------------------------------------------------------------------------


def one(system: str, fmt: str, args: argparse.Namespace) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix=f"cairn-lake-{system}-{fmt}-")
    try:
        run = run_cairn if system == "cairn" else run_spark
        return run(fmt, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--interval-ms", type=int, default=2_000)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--rows-per-batch", type=int, default=200_000, help="Spark SS micro-batch")
    p.add_argument("--formats", default=",".join(FORMATS))
    p.add_argument("--system", choices=("cairn", "spark", "both"), default="both")
    p.add_argument("--format", choices=FORMATS, help=argparse.SUPPRESS)  # one child run
    args = p.parse_args(argv)
    if args.format:  # a child: one system, one format
        result = one(args.system, args.format, args)
        print(json.dumps(result))
        return 0
    expected = expected_totals(args.records, args.keys)
    systems = ("cairn", "spark") if args.system == "both" else (args.system,)
    out: dict[str, Any] = {
        "benchmark": "lake-exactly-once",
        "records": args.records,
        "keys": args.keys,
        "interval_ms": args.interval_ms,
        "parallelism": args.parallelism,
        "rows_per_batch": args.rows_per_batch,
        "machine": f"{platform.node()} {os.cpu_count()} cores",
        "load_average_before": os.getloadavg(),
        "runs": {},
    }
    for fmt in args.formats.split(","):
        for system in systems:
            cmd = [sys.executable, "-m", "bench.lake_exactly_once", *(argv or sys.argv[1:])]
            cmd += ["--system", system, "--format", fmt]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            lines = proc.stdout.strip().splitlines()
            if proc.returncode != 0 or not lines:
                out["runs"][f"{system}-{fmt}"] = {"error": proc.stderr[-1500:]}
                continue
            result = json.loads(lines[-1])
            totals = result.pop("totals")
            want = expected if system == "cairn" else _spark_expected(args)
            result["totals_correct"] = totals == want
            out["runs"][f"{system}-{fmt}"] = result
            print(f"{system}-{fmt}: {json.dumps(result)}", file=sys.stderr)
        c, s = out["runs"].get(f"cairn-{fmt}", {}), out["runs"].get(f"spark-{fmt}", {})
        if c.get("records_per_s") and s.get("records_per_s"):
            out["runs"][f"ratio-{fmt}"] = round(c["records_per_s"] / s["records_per_s"], 2)
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out))
    return 0


def _spark_expected(args: argparse.Namespace) -> dict[str, int]:
    """The Spark run reads whole micro-batches: its records are rows 0 .. batches * rows."""
    batches = max(1, args.records // args.rows_per_batch)
    return expected_totals(batches * args.rows_per_batch, args.keys)


if __name__ == "__main__":
    sys.exit(main())
