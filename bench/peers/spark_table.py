"""PySpark 4.3 Structured Streaming SQL peer of the Table API benchmark.

Invariant: the input is ``rate-micro-batch`` (row ``value`` = ``i``) with ``table_common``'s
event of ``i`` computed in SQL (``spark_window.event_columns``: ``key``, ``ts``, ``v``) and a
500 ms watermark on ``ts``, registered as the view ``events``; the query is ``spark.sql`` on
it, the same SQL as the other systems':

* ``table-wordcount``: ``SELECT word, COUNT(*) AS cnt FROM events GROUP BY word`` (update
  mode: each micro-batch emits the words it changed, Spark's form of an updating result)
* ``table-window``: ``SELECT word, window.start, COUNT(*), SUM(v) FROM events GROUP BY
  window(ts, '1 second'), word`` (append mode; one extra row 3 s after the last event moves
  the watermark past every window, as in the window workload)

with ``--udf on`` calling ``normalize_word(word)``, a Python UDF (``spark.udf.register``). The sink
is ``foreachBatch``: word count collects each batch's updated rows (at most one per word) into
the final counts, the window tallies each batch's results in Spark (``spark_window.tally_batch``)
— the run verifies itself. ``local[2]``, 2 shuffle partitions, RocksDB state store, trigger
``processingTime`` 1 s (a checkpoint = a micro-batch commit); events/s from the micro-batches
as in the window workload.

``--rate R`` runs the latency mode instead (``table_latency.py`` defines it): the ``rate``
source at ``R`` rows/s (a second's rows readable once it ends: their offer), each row also
carrying the source's start (``t0_ms``, kept by the query as ``MIN(t0_ms)``); ``foreachBatch``
notes when each batch's results are out. The word count's update of a batch includes every
row the batch read (its seconds, from the query progress); a window result's latency is from
the offer of the events that closed the window. Last stdout line: one JSON result.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import table_common as tc
import table_latency as tl
import window_common as wc
from spark_keyed_sum import _as_dict, _end_offset, build_session
from spark_window import SQL_BATCH_ROWS, batch_rate, event_columns, tally_batch, wait_for_end

SYSTEM = "spark"


def _fresh_session(args: argparse.Namespace, checkpoint_dir: Path) -> Any:
    """A Spark session for one run: the query's checkpoint directory emptied, the UDF
    registered when the run asks for it."""
    if checkpoint_dir.exists():
        shutil.rmtree(checkpoint_dir)
    spark = build_session(args)
    spark.sparkContext.setLogLevel("ERROR")
    if args.udf == "on":
        spark.udf.register("normalize_word", tc.normalize, "string")
    return spark


def query(workload: str, udf: bool) -> str:
    word = "normalize_word(key)" if udf else "key"
    if workload == "table-wordcount":
        return f"SELECT {word} AS word, COUNT(*) AS cnt FROM events GROUP BY {word}"
    return (
        f"SELECT {word} AS key, unix_millis(window.start) AS start_ms, COUNT(*) AS count, "
        f"SUM(v) AS total FROM events GROUP BY window(ts, '{wc.WINDOW_MS} milliseconds'), {word}"
    )


def latency_query(workload: str, udf: bool) -> str:
    """The latency run's query: the benchmark's, carrying the source's start along."""
    word = "normalize_word(key)" if udf else "key"
    if workload == "table-wordcount":
        return (
            f"SELECT {word} AS word, COUNT(*) AS cnt, MIN(t0_ms) AS t0_ms FROM events "
            f"GROUP BY {word}"
        )
    return (
        f"SELECT {word} AS key, unix_millis(window.start) AS start_ms, COUNT(*) AS count, "
        f"SUM(v) AS total, MIN(t0_ms) AS t0_ms FROM events "
        f"GROUP BY window(ts, '{wc.WINDOW_MS} milliseconds'), {word}"
    )


def _offsets(batch: dict[str, Any]) -> tuple[int, int]:
    """A ``rate`` batch's seconds: ``[start, end)`` (its offsets count seconds)."""
    source = batch["sources"][0]
    start = source.get("startOffset")
    first = 0 if start in (None, "null") else int(float(str(start).strip('"')))
    return first, int(float(str(source["endOffset"]).strip('"')))


def run_latency(args: argparse.Namespace) -> dict[str, Any]:
    """The latency run (``--rate``): the paced query; the result's latency fields."""
    from pyspark.sql import functions as F

    window = args.workload == "table-window"
    rate = args.rate
    work = Path(args.work_dir)
    checkpoint_dir = work / "checkpoint"
    spark = _fresh_session(args, checkpoint_dir)
    rows = args.records + 1 if window else args.records
    events = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rate)
        .option("numPartitions", args.parallelism)
        .load()
        .where(F.col("value") < rows)
        .selectExpr(
            *event_columns(args.records, args.keys, rate),
            # The source's start: a row's timestamp is start + round(value * 1000 / rate) ms.
            f"unix_millis(timestamp) - CAST(round(value * 1000.0 / {rate}) AS BIGINT) AS t0_ms",
        )
        .withWatermark("ts", f"{wc.BOUND_MS} milliseconds")
    )
    events.createOrReplaceTempView("events")
    results = spark.sql(latency_query(args.workload, args.udf == "on"))
    every = tl.sample_every(args.keys, rate)
    done: dict[int, float] = {}
    starts: list[int] = []
    per_window: list[tuple[int, float, int]] = []  # (window, done, sampled results)

    def sink(df: Any, batch_id: int) -> None:
        rank = F.substring(df.columns[0], 2, 20).cast("long")
        sampled = df.where(rank % every == 0)
        if window:
            index = ((F.col("start_ms") - F.lit(wc.T0_MS)) / F.lit(wc.WINDOW_MS)).cast("long")
            got = (
                sampled.where(F.col("key") != "flush")
                .groupBy(index.alias("w"))
                .agg(F.count("*").alias("n"), F.min("t0_ms").alias("t0"))
                .collect()
            )
        else:
            got = sampled.select(F.lit(-1).alias("w"), F.lit(1).alias("n"), "t0_ms").collect()
        now = time.time()
        done[batch_id] = now
        for row in got:
            starts.append(int(row[2]))
            if window:
                per_window.append((int(row[0]), now, int(row[1])))

    handle = (
        results.writeStream.option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=f"{args.checkpoint_interval_ms or 1000} milliseconds")
        .outputMode("append" if window else "update")
        .foreachBatch(sink)
        .start()
    )
    started = time.time()
    deadline = started + args.timeout_s
    progress: list[dict[str, Any]] = []
    while time.time() < deadline:
        if handle.exception() is not None:
            raise RuntimeError(str(handle.exception()))
        progress = [_as_dict(p) for p in handle.recentProgress]
        read = [i for i, b in enumerate(progress) if _end_offset(b, rate) >= rows]
        if read and len(progress) > read[0] + 1:  # and one batch after: the windows it closed
            break
        time.sleep(0.1)
    else:
        raise RuntimeError(f"no end after {args.timeout_s:.0f} s")
    handle.stop()
    (work / "progress.json").write_text(json.dumps(progress, indent=1))
    spark.stop()
    if not starts:
        return {"elapsed_s": round(time.time() - started, 3), "error": "no sampled result"}
    start_ms = min(starts)
    if window:
        closers = tl.window_closers(args.records, rate, args.parallelism)
        samples = []
        for w, at, n in per_window:
            if w in closers:
                offer = tl.spark_offer_ms(max(closers[w]), start_ms, rate) / 1000.0
                samples.append((offer, (at - offer) * 1000.0, n))
    else:
        spans = [(done[b["batchId"]], *_offsets(b)) for b in progress if b["batchId"] in done]
        samples = tl.spark_event_samples(spans, start_ms, rate, args.records)
    return {
        **tl.latency_fields(samples, args.latency_warmup_s),
        "elapsed_s": round(time.time() - started, 3),
        "latency_rate": rate,
        "sample_every": every,
        "micro_batches": len(done),
    }


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    import pyspark
    from pyspark.sql import functions as F

    window = args.workload == "table-window"
    batch_rows = args.batch_rows or min(SQL_BATCH_ROWS, max(10_000, args.records // 5))
    work = Path(args.work_dir)
    checkpoint_dir = work / "checkpoint"
    spark = _fresh_session(args, checkpoint_dir)
    rows = args.records + 1 if window else args.records  # the window's flush row
    events = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", batch_rows)
        .option("numPartitions", args.parallelism)
        .load()
        .where(F.col("value") < rows)
        .selectExpr(*event_columns(args.records, args.keys, args.events_per_second))
        .withWatermark("ts", f"{wc.BOUND_MS} milliseconds")
    )
    events.createOrReplaceTempView("events")
    results = spark.sql(query(args.workload, args.udf == "on"))
    words = tc.WordCountTally()
    windows = wc.WindowTally()

    def sink(df: Any, _batch: int) -> None:
        if window:
            tally_batch(df, windows)
        else:
            words.update((r[0], int(r[1])) for r in df.collect())

    query_handle = (
        results.writeStream.option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=f"{args.checkpoint_interval_ms or 1000} milliseconds")
        .outputMode("append" if window else "update")
        .foreachBatch(sink)
        .start()
    )
    progress = wait_for_end(query_handle, rows, args.timeout_s)
    end = time.time()
    query_handle.stop()
    (work / "progress.json").write_text(json.dumps(progress, indent=1))
    spark.stop()

    result = common.result_template(args, SYSTEM)
    result["versions"]["pyspark"] = pyspark.__version__
    result["udf"] = args.udf == "on"
    result["events_per_second"] = args.events_per_second
    result["batch_rows"] = batch_rows
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    figures = windows.figures() if window else words.figures()
    result.update({f"result_{k}": v for k, v in figures.items()})
    batch_rate(result, progress, args.records)
    busy = [b for b in progress if b.get("numInputRows", 0) > 0]
    durations = [float(b["durationMs"]["triggerExecution"]) for b in busy]
    commits = [
        float(
            b["durationMs"].get("walCommit", 0)
            + b["durationMs"].get("commitOffsets", 0)
            + sum(op.get("commitTimeMs", 0) for op in b.get("stateOperators", []))
        )
        for b in busy
    ]
    result["micro_batches"] = len(busy)
    result["batch_p50_ms"] = common.percentile(durations, 50)
    result["checkpoints_completed"] = len(busy)
    result["checkpoint_p50_ms"] = common.percentile(commits, 50)
    result["checkpoint_p99_ms"] = common.percentile(commits, 99)
    capped = (result["batch_p50_ms"] or 0) < (args.checkpoint_interval_ms or 1000)
    result["capped_by_source"] = capped
    result["note"] = (
        f"Spark SQL ({'update' if not window else 'append'} mode)"
        + ("; Python UDF normalize_word(word)" if args.udf == "on" else "; no Python UDF")
        + f"; {batch_rows:,} rows per micro-batch, trigger every {args.checkpoint_interval_ms} ms;"
        " foreachBatch sink folding the results (verifies the run); events/s from the "
        "micro-batches after the first"
        + (
            "; batches took less than the trigger interval, so the rate is capped by "
            "rowsPerBatch / interval (raise --events or --spark-batch-rows)"
            if capped
            else ""
        )
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--events-per-second", type=int, required=True)
    parser.add_argument("--udf", choices=("on", "off"), default="off")
    parser.add_argument("--verify", action="store_true", help="accepted: every run verifies")
    parser.add_argument("--batch-rows", type=int, default=0, help="default: records / 5")
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    args = parser.parse_args()
    args.rate = int(args.rate)
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-spark-table-")
    if args.rate:
        import pyspark

        args.events_per_second = args.rate  # event time advances as fast as wall time
        result = common.result_template(args, SYSTEM)
        result["versions"]["pyspark"] = pyspark.__version__
        result.update(udf=args.udf == "on", events_per_second=args.rate)
        result.update(run_latency(args))
        result["note"] = (
            f"latency run: Spark SQL, rate source at {args.rate:,} rows/s (a second's rows "
            "readable once it ends), trigger every "
            f"{args.checkpoint_interval_ms} ms, foreachBatch sink; "
            + tl.NOTE[args.workload]
            + ("; Python UDF normalize_word(word)" if args.udf == "on" else "")
        )
    else:
        result = run_job(args)
    result["work_dir"] = args.work_dir
    common.emit(result)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
