"""Cairn's side of the Table API benchmark: the word count and the tumbling window as table
programs (``python -m bench.table_jobs``; the driver is :mod:`bench.table`).

Cairn's SQL front end is not merged yet, so the queries are written with the Table API's
expression DSL, which builds the same logical plan the SQL will (``Calc`` ->
``GroupAggregate`` / ``WindowAggregate``):

* ``table-wordcount`` = ``SELECT word, COUNT(*) AS cnt FROM events GROUP BY word``::

      events.select(word.alias("word")).group_by(col("word"))
            .select(col("word"), lit(1).count.alias("cnt"))

* ``table-window`` = ``SELECT word, window_start, COUNT(*), SUM(v) FROM TABLE(TUMBLE(TABLE
  events, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY word, window_start, window_end``::

      events.select(word.alias("word"), col("ts"), col("v"))
            .window(Tumble.over(lit(1).seconds).on(col("ts")).alias("w"))
            .group_by(col("word"), col("w"))
            .select(col("word"), col("w").start, col("v").count, col("v").sum)

(``col("v").count`` is ``COUNT(*)``: ``v`` is never NULL, and a window aggregate takes only
columns as arguments).

where ``word`` is ``col("word")``, or ``normalize_word(col("word"))`` with ``--udf on`` (a Python
scalar ``udf``). Invariant: the input is ``table_common``'s events (a ``DataGeneratorSource``
of ``window_common.event(i)`` with a 500 ms bounded-out-of-orderness watermark, turned into a
table by ``from_data_stream``), the same as the peers'; the timed job writes into a
``blackhole`` table (``execute_insert``) with 1 s exactly-once checkpoints at parallelism 2,
and its events/s come from the sources' progress marks between 10 % and 90 % of the input
(as PyFlink's from its source's ``numRecordsOut``). ``--verify`` runs the same query again,
untimed, into ``to_changelog_stream`` and a sink that folds the changelog into the
``result_*`` figures the driver checks.

    python -m bench.table_jobs --workload table-wordcount --records 2000000 --keys 10000 --udf on
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

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))
# Spark's Python workers start from this environment: they import table_common too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(PEERS), *filter(None, [os.environ.get("PYTHONPATH")])]
)

import table_common as tc  # noqa: E402
import window_common as wc  # noqa: E402
from common import key_table  # noqa: E402

from bench import empty_result  # noqa: E402
from bench.jobs import CairnOptions, bench_environment, cairn_versions  # noqa: E402
from cairn.common import Duration, TimestampAssigner, Types, WatermarkStrategy  # noqa: E402
from cairn.common.types import RowKind  # noqa: E402
from cairn.datastream.connectors.datagen import DataGeneratorSource  # noqa: E402
from cairn.datastream.functions import SinkFunction  # noqa: E402

__all__ = ["TableEvents", "build_query", "run_cairn"]

POLL_S = 0.1


class TableEvents:
    """The generator: ``window_common.event(i)`` in batches, each batch marked in this
    subtask's progress file (``table_common.SourceMarks``); picklable, keys built once."""

    def __init__(self, num_keys: int, events_per_second: int, marks_dir: str, records: int) -> None:
        self.num_keys = num_keys
        self.records = records
        self.events_per_second = events_per_second
        self.marks_dir = marks_dir
        self._keys: list[str] | None = None
        self._marks: tc.SourceMarks | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_keys": None, "_marks": None}

    def __call__(self, index: int) -> tuple[str, int, int]:
        return self.generate_batch(range(index, index + 1))[0]

    def generate_batch(self, indices: range) -> list[tuple[str, int, int]]:
        if self._keys is None:
            self._keys = key_table(self.num_keys)
            self._marks = tc.SourceMarks(self.marks_dir)
        batch = wc.events(indices, self._keys, self.events_per_second)
        assert self._marks is not None
        # A subtask's last batch (its next index is past the input) is always marked.
        last = indices[-1] + indices.step >= self.records if indices else False
        self._marks.add(len(batch), time.time(), force=last)
        return batch


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def build_query(
    t_env: Any, workload: str, records: int, keys: int, eps: int, udf: bool, marks_dir: str
) -> Any:
    """The benchmark's query on ``t_env`` over a fresh source (the table, not yet run)."""
    from cairn.table import DataTypes
    from cairn.table.expressions import col, lit
    from cairn.table.udf import udf as make_udf
    from cairn.table.window import Tumble

    env = t_env.get_stream_execution_environment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(wc.BOUND_MS)
    ).with_timestamp_assigner(EventTime())
    stream = env.from_source(
        DataGeneratorSource(TableEvents(keys, eps, marks_dir, records), records),
        strategy,
        "events",
        type_info=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]),
    ).uid("events")
    events = t_env.from_data_stream(stream).select(
        col("f0").alias("word"),
        col("f1").cast(DataTypes.TIMESTAMP(3)).alias("ts"),
        col("f2").alias("v"),
    )
    word = col("word")
    if udf:
        normalize = make_udf(tc.normalize, result_type=DataTypes.STRING(), name="normalize_word")
        word = normalize(col("word"))
    if workload == "table-wordcount":
        return (
            events.select(word.alias("word"))
            .group_by(col("word"))
            .select(col("word"), lit(1).count.alias("cnt"))
        )
    return (
        events.select(word.alias("word"), col("ts"), col("v"))
        .window(Tumble.over(lit(1).seconds).on(col("ts")).alias("w"))
        .group_by(col("word"), col("w"))
        .select(
            col("word"),
            col("w").start.alias("window_start"),
            col("v").count.alias("cnt"),  # COUNT(*): a window aggregate takes columns only
            col("v").sum.alias("total"),
        )
    )


def _t_env(opts: CairnOptions, interval_ms: int, checkpoint_dir: str) -> Any:
    from cairn.table import StreamTableEnvironment

    return StreamTableEnvironment.create(bench_environment(opts, interval_ms, checkpoint_dir))


def _watch(client: Any, timeout_s: float) -> tuple[float, dict[str, Any]]:
    """Poll the job master until the job ends: (end time, checkpoint figures)."""
    master = client.job_master
    deadline = time.monotonic() + timeout_s
    while master.end_ms is None:
        if time.monotonic() > deadline:
            client.cancel()
            break
        time.sleep(POLL_S)
    client.get_job_execution_result(timeout=60)
    figures: dict[str, Any] = {"restarts": master.restarts}
    coordinator = master.coordinator
    if coordinator is not None:
        snapshot = coordinator.stats.snapshot()
        summary = snapshot.end_to_end_duration
        figures["checkpoints_completed"] = summary.count
        if summary.count:
            figures["checkpoint_p50_ms"] = summary.p50
            figures["checkpoint_p99_ms"] = summary.p99
    return (master.end_ms or time.time() * 1000) / 1000.0, figures


class TallySink(SinkFunction):
    """The verifying run's sink: folds the changelog of the query (``Row``s with their kind)
    into this subtask's final results and writes them as JSON when it closes — the word
    count's latest count per word, the window's figures (additive over subtasks)."""

    def __init__(self, out_dir: str, workload: str) -> None:
        self.out_dir = out_dir
        self.workload = workload

    def open(self, runtime_context: Any) -> None:
        self._name = f"tally-{runtime_context.get_index_of_this_subtask()}.json"
        self._latest: dict[str, int] = {}
        self._windows = wc.WindowTally()

    def invoke(self, value: Any, context: Any) -> None:
        from cairn.table.timestamps import epoch_millis

        kind = value.get_row_kind()
        if self.workload == "table-wordcount":
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                self._latest[value[0]] = value[1]
            elif kind is RowKind.DELETE:
                self._latest.pop(value[0], None)
            return
        word, start, count, total = value[0], epoch_millis(value[1]), value[2], value[3]
        self._windows.add("k" + word[1:], wc.window_index(start), count, total)

    def close(self) -> None:
        if not hasattr(self, "_name"):
            return
        data = self._latest if self.workload == "table-wordcount" else self._windows.figures()
        with open(os.path.join(self.out_dir, self._name), "w", encoding="ascii") as f:
            json.dump(data, f)


def _verify(
    t_env: Any, table: Any, workload: str, out_dir: str, timeout_s: float
) -> dict[str, int]:
    """Run the query into :class:`TallySink` and merge what its subtasks wrote."""
    os.makedirs(out_dir, exist_ok=True)
    t_env.to_changelog_stream(table).add_sink(TallySink(out_dir, workload))
    client = t_env.get_stream_execution_environment().execute_async("bench-table-verify")
    _watch(client, timeout_s)
    parts = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name), encoding="ascii") as f:
            parts.append(json.load(f))
    if workload == "table-wordcount":
        tally = tc.WordCountTally()
        for part in parts:  # a word's changes all reach one subtask: the parts are disjoint
            tally.update(part.items())
        return tally.figures()
    return {
        k: sum(int(p[k]) for p in parts) for k in ("results", "events", "value_sum", "checksum")
    }


def run_cairn(
    workload: str,
    records: int,
    keys: int,
    events_per_second: int,
    udf: bool,
    interval_ms: int = 1000,
    parallelism: int = 2,
    executor: str = "spark",
    verify: bool = False,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """Run the timed job (and, with ``verify``, the verifying one) in this process."""
    from cairn.table import TableDescriptor

    opts = CairnOptions(parallelism, executor)
    work = tempfile.mkdtemp(prefix="cairn-bench-table-")
    result = empty_result("cairn", workload, records)
    result.update(
        keys=keys,
        parallelism=parallelism,
        checkpoint_interval_ms=interval_ms,
        events_per_second=events_per_second,
        udf=udf,
        versions=cairn_versions(),
        executor=executor,
    )
    try:
        marks = os.path.join(work, "marks")
        t_env = _t_env(opts, interval_ms, os.path.join(work, "checkpoints"))
        table = build_query(t_env, workload, records, keys, events_per_second, udf, marks)
        t_env.create_temporary_table("sink", TableDescriptor.for_connector("blackhole").build())
        submitted = time.time()
        client = table.execute_insert("sink").get_job_client()
        ended, figures = _watch(client, timeout_s)
        result.update(figures)
        curve = tc.merge_marks(tc.read_marks(marks))
        rate = tc.steady_rate(curve, records)
        result["steady_records_per_s"] = None if rate is None else round(rate)
        result["elapsed_s"] = round(ended - submitted, 3)
        result["startup_s"] = round(curve[0][0] - submitted, 3) if curve else None
        if curve and curve[-1][1] != records:
            result["note"] = f"sources read {curve[-1][1]:,} of {records:,} events"
        if verify:
            started = time.time()
            v_env = _t_env(opts, interval_ms, os.path.join(work, "verify-checkpoints"))
            v_table = build_query(
                v_env, workload, records, keys, events_per_second, udf, marks + "-verify"
            )
            figures = _verify(v_env, v_table, workload, os.path.join(work, "tally"), timeout_s)
            result["verify_s"] = round(time.time() - started, 3)
            result.update({f"result_{k}": v for k, v in figures.items()})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["note"] = "; ".join(
        filter(
            None,
            [
                result.get("note"),
                "Table API expression DSL (the logical plan SQL will build), blackhole sink"
                + ("; Python UDF normalize_word(word)" if udf else "")
                + "; events/s from the sources' progress between 10 % and 90 % of the input",
            ],
        )
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.table_jobs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workload", choices=tc.WORKLOADS, default="table-wordcount")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--events-per-second", type=int, default=0, help="default: records/10")
    parser.add_argument("--udf", choices=("on", "off"), default="off")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--verify", action="store_true", help="run the query again, collected")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    eps = args.events_per_second or tc.default_events_per_second(args.records)
    try:
        result = run_cairn(
            args.workload,
            args.records,
            args.keys,
            eps,
            args.udf == "on",
            args.checkpoint_interval_ms,
            args.parallelism,
            args.executor,
            args.verify,
        )
    except Exception as exc:  # report, don't crash: the driver records the reason
        result = empty_result("cairn", args.workload, args.records)
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        print(json.dumps(result), flush=True)
        return 1
    print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
