"""PySpark 4.3 Structured Streaming SQL peer of the Nexmark benchmark.

Invariant: the input is the benchmark's CSV files read by ``readStream.csv`` with the
files' schema (timestamps ``TIMESTAMP`` as ``yyyy-MM-dd HH:mm:ss.SSS`` in UTC — Spark's
event time must be one; the session and this process run in UTC — empty = NULL),
``dateTime`` computed as in ``nexmark_common.DATETIME_SQL`` with a 4 s watermark
(``withWatermark``), registered as the view ``events`` with ``person``, ``auction`` and
``bid`` over it (``nexmark_common.view_selects``); the query is ``nexmark_common.SPARK_SQL``
in append mode (a windowed query's input adds three flush rows: :func:`flush_rows`),
trigger ``processingTime`` 1 s (a micro-batch commit per trigger), checkpoints in a local
folder, ``local[2]`` with 2 shuffle partitions and the RocksDB state store. The first batch
reads every file; the run ends after the batch that the watermark's last move calls for
(``availableNow`` stops before it, leaving the last windows unemitted). The timed run writes
to the ``noop`` sink (Spark's blackhole); ``elapsed_s`` runs from ``start()`` to the end of
that last batch (the session is up before). A query Spark refuses as a streaming query is
reported as ``unsupported`` with Spark's reason. ``--verify-data`` first runs the query
over those (smaller) files into a ``foreachBatch`` sink that collects the rows, and reports
the :func:`nexmark_common.figures` of them.
Last stdout line: one JSON result. Run it through ``run_peer.py --workload nexmark``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import nexmark_common as nc
from spark_keyed_sum import build_session

SYSTEM = "spark"
SPARK_TYPES = {"INT": "INT", "BIGINT": "BIGINT", "STRING": "STRING", "TIMESTAMP(3)": "TIMESTAMP"}


def register_views(spark: Any, data: str) -> None:
    from pyspark.sql import functions as F

    schema = ", ".join(f"{name} {SPARK_TYPES[t]}" for name, t in nc.COLUMNS)
    events = (
        spark.readStream.schema(schema)
        .option("header", "false")
        .option("timestampFormat", nc.SPARK_TIMESTAMP_PATTERN)
        .csv(str(Path(data).resolve()))
        .withColumn("dateTime", F.expr(nc.DATETIME_SQL))
        .withWatermark("dateTime", "4 seconds")
    )
    events.createOrReplaceTempView("events")
    for view, query in nc.view_selects():
        spark.sql(query).createOrReplaceTempView(view)


#: The queries whose results wait for the watermark (their windows close on it).
WINDOWED = frozenset({"q4", "q5", "q7", "q8", "q11"})


def flush_rows(last_time: str) -> list[list[str]]:
    """A person, an auction and a bid an hour after ``last_time`` that no query's result
    includes (ids -1, category -1, state ``XX``; their windows never close): read after the
    data, they move Spark's watermark past every window of it.

    >>> [row[0] for row in flush_rows("2024-01-01 00:00:00.300")]
    ['0', '1', '2']
    """
    from datetime import datetime, timedelta

    moment = datetime.strptime(last_time, nc.FLINK_TIMESTAMP_FORMAT) + timedelta(hours=1)
    stamp = moment.strftime(nc.FLINK_TIMESTAMP_FORMAT)[:23]
    values = {
        "p_id": "-1", "p_state": "XX", "p_dateTime": stamp,
        "a_id": "-1", "a_seller": "-1", "a_category": "-1", "a_initialBid": "0",
        "a_reserve": "0", "a_dateTime": stamp, "a_expires": stamp,
        "b_auction": "-1", "b_bidder": "-1", "b_price": "0", "b_dateTime": stamp,
    }  # fmt: skip
    rows = []
    for kind, (_, prefix, _) in enumerate(nc.KINDS):
        row = [str(kind)]
        for name, _ in nc.COLUMNS[1:]:
            row.append(values.get(name, "") if name.startswith(prefix) else "")
        rows.append(row)
    return rows


def input_folder(data: str, query: str, work: Path) -> str:
    """The folder Spark reads: ``data`` itself, or for a windowed query its files (linked)
    and ``flush.csv`` (:func:`flush_rows`), read in the same first micro-batch."""
    if query not in WINDOWED:
        return str(Path(data).resolve())
    folder = work / f"input-{Path(data).name}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for part in sorted(Path(data).resolve().glob("part-*.csv")):
        (folder / part.name).symlink_to(part)
    manifest = json.loads((Path(data) / "_manifest.json").read_text())
    with open(folder / "flush.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(flush_rows(manifest["last_time"]))
    return str(folder)


def _start(spark: Any, args: argparse.Namespace, data: str, checkpoint: Path, sink: Any) -> Any:
    if checkpoint.exists():
        shutil.rmtree(checkpoint)
    register_views(spark, input_folder(data, args.query, checkpoint.parent))
    writer = (
        spark.sql(nc.SPARK_SQL[args.query])
        .writeStream.option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(processingTime=f"{args.checkpoint_interval_ms or 1000} milliseconds")
    )
    writer = writer.format("noop") if sink is None else writer.foreachBatch(sink)
    return writer.start()


def _end_of(batch: dict[str, Any]) -> float:
    from datetime import datetime, timezone

    started = datetime.strptime(batch["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    took_s = batch["durationMs"]["triggerExecution"] / 1000.0
    return started.replace(tzinfo=timezone.utc).timestamp() + took_s


def wait_done(handle: Any, windowed: bool, timeout_s: float) -> tuple[float, list[dict[str, Any]]]:
    """Wait until the query has read its input (the file source takes every file present in
    its first batch) and, when ``windowed``, run the batch that its watermark's last move
    calls for (the one emitting the last windows); stop it. Returns the end of its last
    batch (epoch s) and its progress reports."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if handle.exception() is not None:
            raise handle.exception()
        progress = [dict(p) for p in handle.recentProgress]
        batches: dict[int, dict[str, Any]] = {}
        for p in progress:  # idle reports repeat the last batch's id without running one
            if "triggerExecution" in p.get("durationMs", {}):
                batches.setdefault(int(p["batchId"]), p)
        ordered = [batches[k] for k in sorted(batches)]
        last_input = max((k for k, b in batches.items() if b.get("numInputRows")), default=-1)
        if last_input >= 0 and (not windowed or max(batches) > last_input):
            handle.stop()
            return _end_of(ordered[-1]), ordered
        time.sleep(0.1)
    handle.stop()
    raise TimeoutError(f"the query did not end within {timeout_s:.0f} s")


def run_verify(spark: Any, args: argparse.Namespace, work: Path) -> dict[str, int]:
    rows: list[tuple[str, tuple[Any, ...]]] = []

    def sink(df: Any, _batch: int) -> None:
        rows.extend(("+I", tuple(r)) for r in df.collect())

    handle = _start(spark, args, args.verify_data, work / "verify-checkpoint", sink)
    wait_done(handle, args.query in WINDOWED, args.timeout_s)
    return nc.figures(rows)


def run_timed(spark: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.time()
    handle = _start(spark, args, args.data, work / "checkpoint", None)
    ended, batches = wait_done(handle, args.query in WINDOWED, args.timeout_s)
    elapsed = ended - started
    return {
        "elapsed_s": round(elapsed, 3),
        "events_per_s": round(args.records / max(elapsed, 1e-9)),
        "micro_batches": len(batches),
    }


def _reason(exc: BaseException) -> tuple[str, str]:
    """``("unsupported" or "error", the first line naming Spark's reason)``."""
    text = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in text if "AnalysisException" in line or "UNSUPPORTED" in line]
    reason = f"{type(exc).__name__}: {(named or text or [''])[0][:400]}"
    refused = "UNSUPPORTED" in reason or "not supported" in reason
    return ("unsupported" if refused else "error"), reason


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--query", required=True, choices=nc.QUERIES)
    parser.add_argument("--data", default="", help="the timed run's CSV folder ('': none)")
    parser.add_argument("--verify-data", default="", help="the verifying run's CSV folder")
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-spark-nexmark-")
    work = Path(args.work_dir)
    import pyspark

    result = common.result_template(args, SYSTEM)
    result["versions"]["pyspark"] = pyspark.__version__
    result["query"] = args.query
    os.environ["TZ"] = "UTC"  # collect() turns TIMESTAMPs into this process's local time
    time.tzset()
    spark = build_session(args)
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        if args.verify_data:
            started = time.time()
            figures = run_verify(spark, args, work)
            result["verify_s"] = round(time.time() - started, 3)
            result.update({f"result_{k}": v for k, v in figures.items()})
        if args.data:
            result.update(run_timed(spark, args, work))
    except Exception as exc:
        field, reason = _reason(exc)
        result[field] = reason
    result["note"] = (
        "Spark SS SQL (append mode, 1 s processingTime trigger), csv file source, noop sink; "
        "events/s = events / (start() to the end of the last batch it needs)"
    )
    result["work_dir"] = args.work_dir
    common.emit(result)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
