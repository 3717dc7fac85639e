"""PySpark 4.3 Structured Streaming peer of the ``window`` workload: 1 s tumbling event-time
windows, as SQL (``groupBy(window(ts, "1 second"), key).agg(count, sum)``) or with
``transformWithState`` (``--api transformWithState``: a ``StatefulProcessor`` with a map
state of window -> (count, sum) per key and an event-time timer per window).

Invariant: the query is ``rate-micro-batch`` -> ``window_common``'s event of the row index,
computed in SQL -> ``withWatermark(ts, 500 ms)`` -> the windows (append mode) ->
``foreachBatch`` tallying each batch's results in Spark (``window_common.result_hash`` as a
SQL expression) on ``local[2]`` with 2 shuffle partitions, RocksDB state store, trigger
``processingTime`` 1 s (a checkpoint = a micro-batch commit). Spark has no final watermark at
the end of input, so one extra row (index ``--records``, key ``flush``, 3 s after the last
event) moves the watermark past every window; its own window is never emitted, and the tally
leaves key ``flush`` out. Last stdout line: one JSON result.
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
import window_common as wc
from spark_keyed_sum import _as_dict, _batch_span, _end_offset, build_session, key_expression

SYSTEM = "spark"
SQL_BATCH_ROWS = 2_000_000  # the SQL aggregation is JVM code: batches must outlast the 1 s trigger
TWS_BATCH_ROWS = 200_000  # as keyed-sum's transformWithState (see the peers' README)


def event_columns(records: int, num_keys: int, eps: int) -> list[str]:
    """SQL of ``window_common.event(value)`` (and the flush row at ``value == records``)."""
    last_ms = wc.FIRST_MS + (records - 1) * 1000 // eps
    ts_ms = (
        f"CASE WHEN value = {records} THEN {last_ms + 3000} ELSE "
        f"{wc.FIRST_MS} + (value * 1000) div {eps} - pmod(value * 7919, {wc.DISORDER_MS}) END"
    )
    return [
        f"CASE WHEN value = {records} THEN 'flush' ELSE {key_expression(num_keys)} END AS key",
        f"{ts_ms} AS ts_ms",
        f"timestamp_millis({ts_ms}) AS ts",
        "1 + value % 7 AS v",
    ]


def make_processor() -> Any:
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

    class TumblingCountSum(StatefulProcessor):
        """Per key: window start -> (count, sum); a timer at each window's end emits it."""

        def init(self, handle: StatefulProcessorHandle) -> None:
            self.handle = handle
            self.windows = handle.getMapState("windows", "start long", "count long, total long")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            batch: dict[int, list[int]] = {}
            for row in rows:  # one state call per window touched, not per row
                start = row.ts_ms - row.ts_ms % wc.WINDOW_MS
                slot = batch.get(start)
                if slot is None:
                    batch[start] = [1, row.v]
                else:
                    slot[0] += 1
                    slot[1] += row.v
            for start, (count, total) in batch.items():
                stored = self.windows.getValue((start,))
                if stored is None:
                    self.handle.registerTimer(start + wc.WINDOW_MS)
                    self.windows.updateValue((start,), (count, total))
                else:
                    self.windows.updateValue((start,), (stored[0] + count, stored[1] + total))
            return iter([])

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            start = expiredTimerInfo.getExpiryTimeInMs() - wc.WINDOW_MS
            stored = self.windows.getValue((start,))
            if stored is not None:
                self.windows.removeKey((start,))
                yield Row(key=key[0], start_ms=start, count=stored[0], total=stored[1])

        def close(self) -> None:
            pass

    return TumblingCountSum()


def tally_batch(df: Any, tally: wc.WindowTally) -> None:
    """Fold one micro-batch's results (``key, start_ms, count, total``) into ``tally``,
    summed in Spark per window index; every window seen gets this moment as its time."""
    from pyspark.sql import functions as F

    rank = F.substring("key", 2, 20).cast("long")
    window = ((F.col("start_ms") - F.lit(wc.T0_MS)) / F.lit(wc.WINDOW_MS)).cast("long")
    digest = (
        rank * 1_000_003
        + window * 7_919
        + F.col("count") * (rank + 1) * 31
        + F.col("total") * (window + 3)
    )
    rows = (
        df.where(F.col("key") != "flush")
        .withColumn("w", window)
        .groupBy("w")
        .agg(
            F.count("*").alias("n"),
            F.sum("count").alias("events"),
            F.sum("total").alias("total"),
            F.sum(digest).alias("digest"),
        )
        .collect()
    )
    now = time.time()
    for row in rows:
        tally.results += int(row["n"])
        tally.events += int(row["events"])
        tally.value_sum += int(row["total"])
        tally.checksum += int(row["digest"])
        tally.first.setdefault(int(row["w"]), now)
        tally.last[int(row["w"])] = now


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    import pyspark
    from pyspark.sql import functions as F

    tws = args.api == "transformWithState"
    # At least 5 batches: the first one (code generation, state store start) is start-up.
    batch_rows = args.batch_rows or min(
        TWS_BATCH_ROWS if tws else SQL_BATCH_ROWS, max(10_000, args.records // 5)
    )
    work = Path(args.work_dir)
    checkpoint_dir = work / "checkpoint"
    if checkpoint_dir.exists():
        shutil.rmtree(checkpoint_dir)
    spark = build_session(args)
    spark.sparkContext.setLogLevel("ERROR")
    events = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", batch_rows)
        .option("numPartitions", args.parallelism)
        .load()
        .where(F.col("value") <= args.records)
        .selectExpr(*event_columns(args.records, args.keys, args.events_per_second))
        .withWatermark("ts", f"{wc.BOUND_MS} milliseconds")
    )
    if tws:
        results = events.groupBy("key").transformWithState(
            statefulProcessor=make_processor(),
            outputStructType="key string, start_ms long, count long, total long",
            outputMode="Append",
            timeMode="EventTime",
        )
    else:
        results = (
            events.groupBy(F.window("ts", f"{wc.WINDOW_MS} milliseconds"), "key")
            .agg(F.count("*").alias("count"), F.sum("v").alias("total"))
            .select("key", F.unix_millis(F.col("window.start")).alias("start_ms"), "count", "total")
        )
    tally = wc.WindowTally()
    query = (
        results.writeStream.option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=f"{args.checkpoint_interval_ms or 1000} milliseconds")
        .outputMode("append")
        .foreachBatch(lambda df, _id: tally_batch(df, tally))
        .start()
    )
    progress = wait_for_end(query, args.records + 1, args.timeout_s)
    end = time.time()
    query.stop()
    (work / "progress.json").write_text(json.dumps(progress, indent=1))
    spark.stop()

    result = common.result_template(args, "spark-tws" if tws else SYSTEM)
    result["versions"]["pyspark"] = pyspark.__version__
    result["api"] = args.api
    result["events_per_second"] = args.events_per_second
    result["batch_rows"] = batch_rows
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    windows = wc.result_fields([tally.to_dict()], args.records, args.events_per_second, 0.0)
    windows.pop("startup_s")
    result["steady_from_windows"] = windows.pop("steady_records_per_s")
    result.update(windows)
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
    slow = (result["batch_p50_ms"] or 0) < (args.checkpoint_interval_ms or 1000)
    result["note"] = (
        ("transformWithState (Python row API, map state + event-time timers)" if tws else "SQL")
        + f" window aggregation, {batch_rows:,} rows per micro-batch, "
        f"trigger every {args.checkpoint_interval_ms} ms; "
        "events/s from the micro-batches (as keyed-sum); checkpoint = walCommit + "
        "commitOffsets + state commit per batch"
        + (
            "; batches took less than the trigger interval, so the rate is capped by "
            "rowsPerBatch / interval"
            if slow
            else ""
        )
    )
    return result


def batch_rate(result: dict[str, Any], batches: list[dict[str, Any]], records: int) -> None:
    """Events/s from the micro-batches that read events (the source produces rows past the
    last event, which the query filters out): one batch: its events over its duration;
    several: the events after the first batch over the time from its end to the end of the
    last one that read events. Start-up: until the first batch ends."""
    spans = []
    for b in batches:
        source = b["sources"][0]
        start = _offset(source.get("startOffset"))
        real = max(0, min(_end_offset(b, 0), records) - min(start, records))
        if real > 0:
            spans.append((real, *_batch_span(b)))
    if not spans:
        return
    if len(spans) == 1:
        real, begin, end = spans[0]
        result["startup_s"] = round(begin - common.SCRIPT_START, 3)
        result["steady_records_per_s"] = round(real / (end - begin))
        return
    result["startup_s"] = round(spans[0][2] - common.SCRIPT_START, 3)
    later = sum(real for real, _, _ in spans[1:])
    result["steady_records_per_s"] = round(later / (spans[-1][2] - spans[0][2]))


def _offset(offset: Any) -> int:
    """A ``rate-micro-batch`` offset (``{"offset": n, ...}``; ``None`` before the first)."""
    if isinstance(offset, dict):
        return int(offset["offset"])
    return 0 if offset in (None, "null") else int(json.loads(str(offset))["offset"])


def wait_for_end(query: Any, rows: int, timeout_s: float) -> list[dict[str, Any]]:
    """Poll until a batch after the one that read the last row (the flush row) has run:
    that batch emits the windows the flush row's watermark closed."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        batches = [_as_dict(p) for p in query.recentProgress]
        read = [i for i, b in enumerate(batches) if b.get("numInputRows", 0) > 0]
        last_read = next((i for i in read if _end_offset(batches[i], 0) >= rows), None)
        if last_read is not None and len(batches) > last_read + 1:
            return batches
        time.sleep(0.1)
    raise RuntimeError(f"no end after {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--events-per-second", type=int, required=True)
    parser.add_argument("--api", choices=("sql", "transformWithState"), default="sql")
    parser.add_argument("--batch-rows", type=int, default=0, help="default: by --api")
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-spark-window-")
    result = run_job(args)
    result["work_dir"] = args.work_dir
    common.emit(result)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
